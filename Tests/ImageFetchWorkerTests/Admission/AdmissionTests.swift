import Dispatch
import Synchronization
import Testing
@testable import ImageFetchWorker

/// `Admission`, the runner around the scheduler: the real pump on its queue, with an injected
/// clock and handlers that record what they are given.
@Suite struct AdmissionTests {
    static let a = Origin(scheme: "https", host: "a.example", port: 443)

    static func settings(concurrency: Int = 4, window: Int = 8) -> OriginScheduler<String>.Settings {
        .init(limiter: .init(minLimit: 1, maxLimit: concurrency, initialLimit: concurrency), window: window)
    }

    /// Issue 33, defect 7: a drain waits on the group and then takes the waiting jobs back. A job
    /// that waits in admission must hold the group, or the drain's wait can end (and the
    /// connection close) while the job is still taken out later, to be started or deferred.
    @Test func aJobWaitingInAdmissionHoldsTheGroup() {
        let group = DispatchGroup()
        let semaphore = DispatchSemaphore(value: 0)  // no permit: the job cannot start
        let admission = Admission<String>(
            settings: Self.settings(), semaphore: semaphore, inFlight: group, clock: { 0 },
            handlers: .init(start: { _ in }, deferJob: { _, _, _ in }, events: { _ in }))
        admission.submit("a0", origin: Self.a)
        let held = group.wait(timeout: .now()) == .timedOut
        #expect(held, "the group was empty while a job waited in admission")
        let taken = admission.takeAll()
        #expect(taken == ["a0"])
        if held { for _ in taken { group.leave() } }
        #expect(group.wait(timeout: .now()) == .success)
        semaphore.signal()  // lets the pump, parked on the semaphore, find nothing and return
    }
}
