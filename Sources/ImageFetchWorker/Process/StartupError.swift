/// Why the worker could not start, when its configuration is not the cause (that is a
/// ``ConfigurationError``, exit 78): libcurl would not initialise, the storage root cannot be made.
/// The executable logs `cannot start: ` and ``description``, and exits 1.
///
/// Not a `JobError`: no job is involved, so no result code fits, and nothing retries it.
public struct StartupError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, in one line that names no secret.
    public let description: String

    package init(_ description: String) {
        self.description = description
    }
}
