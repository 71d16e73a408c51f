@testable import ImageFetchWorker

extension ConfigurationLoader {
    /// What loading says, for the tests of bad values: "loaded", or the error's one line.
    static func problem(_ arguments: [String] = [], _ environment: [String: String] = [:]) -> String {
        do {
            _ = try load(arguments: arguments, environment: environment)
            return "loaded"
        } catch {
            return "\(error)"
        }
    }
}
