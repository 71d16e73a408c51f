/// Why a sink could not store an image, in the sink's own terms. The job pipeline turns it into
/// `storage_failed` at its edge (`Worker/JobError+StorageError.swift`), keeping ``retryable``: the
/// sinks neither mint result codes nor know the job contract.
public struct StorageError: Error, Sendable, Equatable, CustomStringConvertible {
    /// One line that names the bucket or the key's folder at most: never a URL or a credential.
    public let message: String
    /// Whether the same store may work later (a timeout, a 5xx, credentials not refreshed yet),
    /// as opposed to a refusal that asking again will not change (a 403, a missing bucket).
    public let retryable: Bool

    package init(_ message: String, retryable: Bool = true) {
        self.message = message
        self.retryable = retryable
    }

    public var description: String { message }
}
