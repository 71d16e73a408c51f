/// The check of one line of `publish --jsonl`: the worker's own, so that what `publish` sends the
/// worker accepts. The body goes through ``Job/decode(_:allowedHeaders:)`` (the job schema and
/// `fetch.job_headers`), then its URL through ``URLPolicy/validate(_:)``. The length limit
/// (`queue.max_job_bytes`) is the ``LineReader``'s.
///
/// Pure, no I/O.
package enum JobLineCheck {
    /// What to do with a line.
    package enum Verdict: Equatable {
        /// White space only: nothing to send.
        case blank
        /// A job: publish the line as it is, with `messageID` as the AMQP `message_id` when the
        /// body has no `id` of its own.
        case job(messageID: String?)
        /// Not a job the worker would fetch, and why (a code and a message that repeat no value).
        case invalid(JobError)
    }

    /// Checks `line`; `freshID` is the id a line without one gets (the worker reads it from
    /// `message_id`).
    package static func check(_ line: [UInt8], allowedHeaders: Set<String>, freshID: String) -> Verdict {
        if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { return .blank }
        var properties = AMQPProperties()
        let id = freshID
        properties.messageID = id
        let delivery = Delivery(tag: 0, epoch: 0, redelivered: false, properties: properties, body: line)
        switch Job.decode(delivery, allowedHeaders: allowedHeaders) {
        case .failure(let error):
            return .invalid(error)
        case .success(let job):
            if case .failure(let refusal) = URLPolicy.validate(job.url) { return .invalid(JobError(refusal)) }
            // The decoder fell back on `message_id`: the body has no id.
            return .job(messageID: job.id == id ? id : nil)
        }
    }
}
