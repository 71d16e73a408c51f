import Testing

@testable import ImageFetchWorker

@Suite struct JobContextTests {
    /// A job keeps its place at its origin while it fetches. The ticket admission hands out holds
    /// the job itself; kept in the job, it made a cycle, and every job leaked about a kilobyte
    /// (png32's peak RSS grew with the job count).
    @Test func aStartedJobDoesNotKeepItselfAlive() {
        weak var released: JobContext?
        do {
            var scheduler = OriginScheduler<JobContext>(
                settings: .init(
                    limiter: .init(minLimit: 1, maxLimit: 4, initialLimit: 4), window: 8))
            let delivery = Delivery(tag: 1, epoch: 1, redelivered: false, body: Array("{}".utf8))
            let context = JobContext(
                delivery: delivery, job: Job(id: "j", url: "http://a.example/x.png"),
                trace: JobTrace(delivery: delivery, queue: "jobs"))
            released = context
            let origin = Origin(scheme: "http", host: "a.example", port: 80)
            _ = scheduler.enqueue(context, origin: origin, now: 0)
            guard let ticket = scheduler.next(now: 0) else {
                Issue.record("nothing started")
                return
            }
            _ = ticket.element.lifecycle.submitted()
            _ = ticket.element.lifecycle.admitted(ticket.slot, canStart: true)
            _ = scheduler.finished(ticket.slot, outcome: .other, now: 1)
        }
        #expect(released == nil)
    }
}
