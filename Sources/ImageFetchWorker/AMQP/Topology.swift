/// The queues the worker declares, derived from configuration. Pure data, no I/O.
package struct Topology: Sendable, Equatable {
    /// One queue declaration.
    package struct Queue: Sendable, Equatable {
        package var name: String
        package var arguments: [String: AMQPFieldValue]
        /// A delay queue that may already exist with the arguments of an older release: then it is
        /// used as it is (with a warning) instead of stopping the worker. Any other queue whose
        /// arguments differ stops the worker at start-up.
        package var mayExistWithOtherArguments: Bool = false
    }

    /// Every queue, in declaration order (dead first, so the jobs queue's dead-letter target exists).
    package var queues: [Queue]

    /// The retry queue for a delay: `<jobs>.retry.<delay>` with a compact duration, e.g. `image-fetch.jobs.retry.5s`.
    package static func retryQueueName(jobs: String, delaySeconds: Int) -> String {
        "\(jobs).retry.\(Self.compactDuration(delaySeconds))"
    }

    /// The delay queue of the origin scheduler's deferrals: `<jobs>.defer.<delay>`, e.g. `image-fetch.jobs.defer.5s`.
    package static func deferQueueName(jobs: String, delaySeconds: Int) -> String {
        "\(jobs).defer.\(Self.compactDuration(delaySeconds))"
    }

    /// The retry queues (one per distinct delay, shortest first), then the deferral queues: each
    /// name with its delay in seconds.
    package static func delayQueues(_ configuration: WorkerConfiguration) -> [(name: String, delaySeconds: Int)] {
        let jobs = configuration.queue.jobs
        return Set(configuration.retry.delays).sorted().map { (retryQueueName(jobs: jobs, delaySeconds: $0), $0) }
            + DeferralPolicy(configuration.scheduler).delays.map { (deferQueueName(jobs: jobs, delaySeconds: $0), $0) }
    }

    /// `5s`, `2m`, `1h`, `90s`: the shortest exact spelling.
    package static func compactDuration(_ seconds: Int) -> String {
        if seconds >= 3600, seconds % 3600 == 0 { return "\(seconds / 3600)h" }
        if seconds >= 60, seconds % 60 == 0 { return "\(seconds / 60)m" }
        return "\(seconds)s"
    }

    package init(configuration: WorkerConfiguration) {
        let names = configuration.queue
        var typeArguments: [String: AMQPFieldValue] = [:]
        if names.type == .quorum { typeArguments["x-queue-type"] = .string("quorum") }

        var jobsArguments = typeArguments
        jobsArguments["x-dead-letter-exchange"] = .string("")
        jobsArguments["x-dead-letter-routing-key"] = .string(names.dead)
        if names.type == .quorum { jobsArguments["x-delivery-limit"] = .int(Int64(names.deliveryLimit)) }

        var queues = [
            Queue(name: names.dead, arguments: typeArguments),
            Queue(name: names.results, arguments: typeArguments),
            Queue(name: names.jobs, arguments: jobsArguments),
        ]
        // Retry and deferral queues hold a job for their delay, then dead-letter it back to the jobs queue.
        for (name, delay) in Self.delayQueues(configuration) {
            let arguments = Self.delayQueueArguments(
                type: names.type, delayMilliseconds: Int64(delay) * 1000,
                deadLetterRoutingKey: names.jobs)
            queues.append(Queue(name: name, arguments: arguments, mayExistWithOtherArguments: true))
        }
        self.queues = queues
    }

    /// The arguments of a delay queue: a message waits `delayMilliseconds`, then the broker's
    /// dead-lettering moves it through the default exchange to `deadLetterRoutingKey`.
    ///
    /// That hop is at-most-once on a classic queue: a node failure during it can lose the message.
    /// On a quorum queue it is at-least-once (`x-dead-letter-strategy: at-least-once`), which
    /// RabbitMQ allows only together with `x-overflow: reject-publish`. The retry queues use it, and
    /// every future delay queue (deferral) must too.
    package static func delayQueueArguments(
        type: WorkerConfiguration.Queues.QueueType, delayMilliseconds: Int64,
        deadLetterRoutingKey: String
    ) -> [String: AMQPFieldValue] {
        var arguments: [String: AMQPFieldValue] = [
            "x-message-ttl": .int(delayMilliseconds),
            "x-dead-letter-exchange": .string(""),
            "x-dead-letter-routing-key": .string(deadLetterRoutingKey),
        ]
        if type == .quorum {
            arguments["x-queue-type"] = .string("quorum")
            arguments["x-dead-letter-strategy"] = .string("at-least-once")
            arguments["x-overflow"] = .string("reject-publish")
        }
        return arguments
    }
}
