import Dispatch
import Foundation
import Logging
import Synchronization

extension JobRunner {
    // MARK: - Probes

    /// What `/readyz`, `/healthz`, `/metrics` and `/origins` report.
    package var probes: HealthServer.Probes {
        HealthServer.Probes(
            isReady: { [weak self] in self?.isReady ?? false },
            checkHealth: { [weak self] reply in
                guard let self else { return reply(false) }
                // Healthy when the channel, work and control queues each run a no-op; a stuck
                // queue never answers and the endpoint times out into 503.
                let answered = Mutex(0)
                let queues = [self.session.queue, self.workQueue, self.control]
                for queue in queues {
                    queue.async {
                        if answered.withLock({
                            $0 += 1
                            return $0
                        }) == queues.count {
                            reply(true)
                        }
                    }
                }
            },
            metrics: { [weak self] in
                guard let self else { return [] }
                // The session changes state in places that tell no delegate (connecting, waiting
                // to reconnect, draining, closed); read it at scrape time so the gauge is current.
                stats.metrics.connectionState(session.stateName)
                let origins = admission.gauges()
                originMetrics.active.set(Int64(origins.known))
                originMetrics.paused.set(Int64(origins.paused))
                fetchMetrics.collect(tls: fetchEngine.tlsCounts)
                return stats.metrics.render() + OriginMetrics.limitHistogram(origins.limits)
                    + (tenantMetrics?.render(admission.tenants()) ?? [])
            },
            origins: { [weak self] limit in
                guard let self else { return Array("[]\n".utf8) }
                return OriginReport.json(admission.busiest(limit))
            })
    }

    // MARK: - Origin events

    /// Limit cuts and pauses: counted, and logged at most once per origin and interval.
    func originEvents(_ events: [Admission<JobContext>.Event]) {
        for event in events {
            switch event {
            case .limitCut(let origin, let cut):
                originMetrics.limitCuts.increment()
                if originLog.shouldLog(origin, "cut") {
                    logger.notice(
                        "origin limit cut",
                        metadata: [
                            "origin": "\(origin)", "from": "\(cut.from)", "to": "\(cut.to)",
                            "signal": "\(cut.signal.rawValue)",
                        ])
                }
            case .paused(let origin, let seconds):
                if originLog.shouldLog(origin, "pause") {
                    logger.notice(
                        "origin paused by Retry-After",
                        metadata: [
                            "origin": "\(origin)", "seconds": "\(String(format: "%.1f", seconds))",
                        ])
                }
            case .backedOff(let origin, let seconds):
                if originLog.shouldLog(origin, "pause") {
                    logger.notice(
                        "origin paused after a refusal without Retry-After",
                        metadata: [
                            "origin": "\(origin)", "seconds": "\(String(format: "%.1f", seconds))",
                        ])
                }
            }
        }
    }

    // MARK: - Timers

    /// Samples ready messages and consumers of every queue of the topology with passive declares
    /// on the worker's own connection, every `metrics.depth_interval` seconds; not while the broker
    /// blocks that connection (the gauges keep their last values), see ``BrokerSession/queueDepth``.
    func startDepthSampling() {
        let interval = configuration.metrics.depthInterval
        guard interval > 0 else { return }
        let names = QueueDepth.queueNames(configuration)
        let timer = DispatchSource.makeTimerSource(queue: control)
        timer.schedule(deadline: .now() + min(interval, 1), repeating: interval, leeway: .milliseconds(100))
        timer.setEventHandler { [unowned self] in
            for name in names {
                session.queueDepth(name) { [stats, admission, jobs = configuration.queue.jobs] depth in
                    guard let depth else { return }
                    stats.metrics.depth(queue: name, ready: depth.messages, consumers: depth.consumers)
                    // Jobs ready behind the window: a paused origin alone may give its jobs up.
                    if name == jobs { admission?.queueSampled(ready: depth.messages) }
                }
            }
        }
        timer.resume()
        depthTimer = timer
    }

    func startSummaryTimer() {
        let interval = configuration.log.summaryInterval
        guard interval > 0 else { return }
        let timer = DispatchSource.makeTimerSource(queue: control)
        timer.schedule(deadline: .now() + interval, repeating: interval, leeway: .seconds(1))
        timer.setEventHandler { [unowned self] in self.logSummary() }
        timer.resume()
        summaryTimer = timer
    }

    func logSummary() {
        let snapshot = stats.snapshot
        let done = snapshot.succeeded + snapshot.failed + snapshot.retried
        let now = DispatchTime.now().uptimeNanoseconds
        let rate = lastSummary.withLock { last -> Double in
            let seconds = Double(now - last.time) / 1e9
            let rate = seconds > 0 ? Double(done - last.count) / seconds : 0
            last = (done, now)
            return rate
        }
        // Failures by code, e.g. "http_error=2,not_an_image=1"; counts since the start, like ok and failed.
        let byCode = snapshot.failuresByCode.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            .joined(separator: ",")
        let origins = admission.gauges()
        logger.info(
            "summary",
            metadata: [
                "rate_per_s": "\(String(format: "%.1f", rate))", "in_flight": "\(snapshot.inFlight)",
                "waiting": "\(snapshot.waiting)", "ok": "\(snapshot.succeeded)", "failed": "\(snapshot.failed)",
                "failed_by_code": "\(byCode)",
                "retried": "\(snapshot.retried)", "dead_lettered": "\(snapshot.deadLettered)",
                "requeued": "\(snapshot.handedBack)", "connection": "\(session.stateName)",
                "origins": "\(origins.known)", "origins_paused": "\(origins.paused)",
            ])
    }
}

/// Keeps the origin log lines to one of each kind per origin per minute: a misbehaving origin
/// answers many requests the same way, and one line says it.
final class OriginLogLimiter: Sendable {
    private struct Key: Hashable {
        var origin: Origin
        var kind: String
    }

    private let last = Mutex([Key: UInt64]())
    private let intervalNanoseconds: UInt64

    init(intervalNanoseconds: UInt64 = 60_000_000_000) {
        self.intervalNanoseconds = intervalNanoseconds
    }

    func shouldLog(_ origin: Origin, _ kind: String, now: UInt64 = DispatchTime.now().uptimeNanoseconds) -> Bool {
        let key = Key(origin: origin, kind: kind)
        return last.withLock { last in
            if let previous = last[key], now &- previous < intervalNanoseconds { return false }
            if last.count > 10_000 { last.removeAll() }  // bounded: forgets, at worst logs again
            last[key] = now
            return true
        }
    }
}

/// `/origins` as JSON: an array of the busiest origins, busiest first. Fields without a value
/// (no ceiling known, not paused, no latency yet) are left out.
enum OriginReport {
    static func json(_ origins: [OriginScheduler<JobContext>.OriginSnapshot]) -> [UInt8] {
        var writer = JSONWriter()
        writer.beginArray()
        for origin in origins {
            writer.beginObject()
            writer.field("origin", origin.origin.description)
            writer.field("limit", origin.limit)
            writer.field("ceiling", origin.ceiling)
            writer.field("in_flight", origin.inFlight)
            writer.field("waiting", origin.waiting)
            if let paused = origin.pausedForSeconds { writer.field("paused_for_s", decimal: paused) }
            if let baseline = origin.latencyBaselineMilliseconds {
                writer.field("latency_baseline_ms", decimal: baseline)
            }
            writer.field("overload_responses", origin.overloadResponses)
            writer.field("slow_start", origin.slowStart)
            writer.endObject()
        }
        writer.endArray()
        return writer.takeBytes() + [UInt8(ascii: "\n")]
    }
}
