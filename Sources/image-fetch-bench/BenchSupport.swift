import Logging
import Synchronization

/// A logger that keeps the library's info lines (connected, …) out of the benchmark's output.
func quietLogger(_ label: String) -> Logger {
    var logger = Logger(label: label)
    logger.logLevel = .warning
    return logger
}

/// A count shared between threads.
final class SharedCount: Sendable {
    let value = Atomic<Int>(0)
}

/// Hands a non-Sendable value to the one thread that uses it from then on.
struct UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
