import Dispatch
import Foundation
import ImageFetchWorker
import Synchronization

/// `publish --jsonl`: one job object a line, each checked as the worker checks jobs
/// (``JobLineCheck``) before it is sent; confirms are pipelined (``JobPublisher``), and the
/// confirmed prefix of the file (``ConfirmedPrefix``) is kept in a progress file for `--resume`.
struct JSONLPublishRun {
    /// The file, or nil for standard input.
    let path: String?
    let properties: AMQPProperties
    let allowedHeaders: Set<String>
    let maxLineBytes: Int
    /// The line the run starts after (the progress file's, with `--resume`), or 0.
    let startAfter: Int
    /// Where the confirmed prefix is written, or nil (standard input).
    let progressPath: String?
    /// At most this many lines this run (`--max-lines`), counted after `startAfter`.
    let maxLines: Int?

    struct Summary {
        var read = 0
        var sent = 0
        var confirmed = 0
        var invalid = 0
        var skipped = 0
        /// The first line the broker did not confirm, and its outcome.
        var unconfirmed: (line: Int, outcome: PublishOutcome)?
        var confirmedThrough = 0
        var stoppedByBudget = false
        var stoppedBySignal: Int32?
        /// The errno of the read that failed, if one did: the lines after it were not read.
        var readError: Int32?
    }

    /// What the broker's confirms update, on its queue, while the main thread reads.
    private struct Shared {
        var prefix: ConfirmedPrefix
        var confirmed = 0
        var unconfirmed: (line: Int, outcome: PublishOutcome)?
    }

    /// The shared state where the confirm callbacks can reach it.
    private final class SharedBox: Sendable {
        let state: Mutex<Shared>
        init(_ shared: Shared) { state = Mutex(shared) }
        func withLock<T>(_ body: (inout Shared) -> T) -> T { state.withLock { body(&$0) } }
    }

    /// Runs to the end of the input, the line budget, the first unconfirmed line or a signal.
    func run(_ publisher: JobPublisher, stop: StopSignal) -> Summary? {
        let descriptor: Int32
        if let path {
            descriptor = open(path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else {
                warn("cannot read \(path): \(String(cString: strerror(errno)))")
                return nil
            }
        } else {
            descriptor = STDIN_FILENO
        }
        defer { if path != nil { close(descriptor) } }
        var reader = LineReader(fileDescriptor: descriptor, maxBytes: maxLineBytes)
        let shared = SharedBox(Shared(prefix: ConfirmedPrefix(after: startAfter)))
        let progress = ProgressLine(enabled: isatty(STDERR_FILENO) == 1)
        var summary = Summary()
        var lastWrite = DispatchTime.now().uptimeNanoseconds
        var canWrite = progressPath != nil
        func record() {
            guard canWrite, let progressPath else { return }
            do {
                try PublishProgress.write(shared.withLock { $0.prefix.through }, to: progressPath)
            } catch {
                canWrite = false
                progress.report("cannot write the progress file \(progressPath) (\(error)); --resume will not work")
            }
        }
        if startAfter == 0 { record() }
        while let line = reader.next() {
            let number = line.number
            if number <= startAfter {
                summary.skipped += 1
                continue
            }
            if let maxLines, summary.read == maxLines {
                summary.stoppedByBudget = true
                break
            }
            let signal = stop.received
            if signal != 0 {
                summary.stoppedBySignal = signal
                break
            }
            if shared.withLock({ $0.unconfirmed != nil }) { break }
            summary.read += 1
            switch line {
            case .oversized(_, let length):
                summary.invalid += 1
                shared.withLock { $0.prefix.passed(number) }
                progress.report(
                    "line \(number): \(JobError.Code.jobTooLarge): the line is \(length) bytes or more, "
                        + "over queue.max_job_bytes (\(maxLineBytes))")
            case .text(_, let bytes):
                let freshID = UUID().uuidString.lowercased()
                switch JobLineCheck.check(bytes, allowedHeaders: allowedHeaders, freshID: freshID) {
                case .blank:
                    summary.skipped += 1
                    shared.withLock { $0.prefix.passed(number) }
                case .invalid(let error):
                    summary.invalid += 1
                    shared.withLock { $0.prefix.passed(number) }
                    progress.report("line \(number): \(error)")
                case .job(let messageID):
                    var properties = self.properties
                    if let messageID { properties.messageID = messageID }
                    summary.sent += 1
                    shared.withLock { $0.prefix.sent(number) }
                    publisher.send(bytes, properties: properties) { outcome in
                        shared.withLock { state in
                            state.prefix.settled(number, confirmed: outcome == .confirmed)
                            if outcome == .confirmed {
                                state.confirmed += 1
                            } else if state.unconfirmed == nil || state.unconfirmed!.line > number {
                                state.unconfirmed = (number, outcome)
                            }
                        }
                    }
                }
            }
            // The clock is read once every 1,024 lines: the progress file about once a second, the
            // progress line four times as often.
            if number & 1023 == 0 {
                let now = DispatchTime.now().uptimeNanoseconds
                if now - lastWrite >= 1_000_000_000 {
                    record()
                    lastWrite = now
                }
                progress.show(now: now) {
                    "line \(number): \(summary.sent) sent, \(shared.withLock { $0.confirmed }) confirmed, "
                        + "\(summary.invalid) invalid"
                }
            }
        }
        publisher.waitForOutcomes()
        if let error = reader.readError {
            summary.readError = error
            progress.report("reading stopped at line \(reader.linesRead): \(String(cString: strerror(error)))")
        }
        record()
        progress.clear()
        shared.withLock { state in
            summary.confirmed = state.confirmed
            summary.unconfirmed = state.unconfirmed
            summary.confirmedThrough = state.prefix.through
        }
        return summary
    }

    private func warn(_ text: String) {
        StandardError.write(text + "\n")
    }
}

/// SIGINT and SIGTERM during `publish --jsonl`: the first stops the reading, and the run waits for
/// the confirms of what it sent and records its progress; a second one exits at once.
final class StopSignal: @unchecked Sendable {
    // @unchecked Sendable: `sources` is written only by `install()`, once, before a signal can
    // come; the handlers touch only `caught`, which is atomic.
    private let caught = Atomic<Int32>(0)
    private let queue = DispatchQueue(label: "image-fetch-worker.publish.signals")
    /// Kept for the process's life: a released source stops delivering.
    private var sources: [any DispatchSourceSignal] = []

    /// The signal received, or 0.
    var received: Int32 { caught.load(ordering: .relaxed) }

    func install() {
        for signo in [SIGINT, SIGTERM] {
            signal(signo, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signo, queue: queue)
            source.setEventHandler { [self] in
                guard caught.compareExchange(expected: 0, desired: signo, ordering: .relaxed).exchanged else {
                    exit(128 + signo)
                }
                StandardError.write("stopping: waiting for the confirms of the lines sent\n")
            }
            source.resume()
            sources.append(source)
        }
    }
}

/// The progress line on a terminal (standard error), and the messages that must not mix with it.
private final class ProgressLine {
    let enabled: Bool
    private var lastShown: UInt64 = 0
    private var shown = false

    init(enabled: Bool) { self.enabled = enabled }

    /// Shows the progress, at most four times a second.
    func show(now: UInt64, _ text: () -> String) {
        guard enabled, now - lastShown >= 250_000_000 else { return }
        lastShown = now
        shown = true
        StandardError.write("\r\u{1B}[K" + text())
    }

    /// A line of its own on standard error.
    func report(_ text: String) {
        StandardError.write((shown ? "\r\u{1B}[K" : "") + text + "\n")
        shown = false
    }

    func clear() {
        guard shown else { return }
        StandardError.write("\r\u{1B}[K")
        shown = false
    }
}
