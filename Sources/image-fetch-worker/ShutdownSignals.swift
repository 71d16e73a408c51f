import Dispatch
import Foundation
import ImageFetchWorker
import Logging

/// The process's answer to SIGTERM and SIGINT: the first drains the worker and exits with its
/// status; a second one exits at once (unacked jobs return to the queue when the connection
/// drops). SIGPIPE is ignored: a peer that closes a socket must not end the process.
final class ShutdownSignals: @unchecked Sendable {
    // @unchecked Sendable: `draining` and `sources` are touched only on `queue`.
    private let queue = DispatchQueue(label: "image-fetch-worker.signals")
    private var sources: [any DispatchSourceSignal] = []
    private var draining = false

    init(worker: Worker, logger: Logger) {
        signal(SIGPIPE, SIG_IGN)
        for signo in [SIGTERM, SIGINT] {
            // Ignored as a signal, so that only the dispatch source sees it.
            signal(signo, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signo, queue: queue)
            source.setEventHandler { [unowned self] in
                if draining {
                    logger.warning("second signal: exiting at once; unacked jobs return to the queue")
                    exit(128 + signo)
                }
                draining = true
                logger.info(
                    "signal received: draining", metadata: ["signal": "\(signo == SIGTERM ? "SIGTERM" : "SIGINT")"])
                worker.shutdown { status in
                    TracingSetup.flush()
                    exit(status)
                }
            }
            source.resume()
            sources.append(source)
        }
    }
}
