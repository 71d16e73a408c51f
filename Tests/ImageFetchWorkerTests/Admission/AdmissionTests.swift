import Dispatch
import Synchronization
import Testing

@testable import ImageFetchWorker

/// `Admission`, the runner around the scheduler (issue 33): the real pump on its queue, with an
/// injected clock and handlers that record what they are given.
@Suite struct AdmissionTests {
    static let ms: UInt64 = 1_000_000
    static let a = Origin(scheme: "https", host: "a.example", port: 443)
    static let b = Origin(scheme: "https", host: "b.example", port: 443)

    static func settings(concurrency: Int = 4, window: Int = 8) -> OriginScheduler<String>.Settings {
        .init(limiter: .init(minLimit: 1, maxLimit: concurrency, initialLimit: concurrency), window: window)
    }

    /// What the handlers saw, and a semaphore signalled on each call.
    final class Recorder: Sendable {
        let started = Mutex<[Admission<String>.Ticket]>([])
        let deferred = Mutex<[(job: String, origin: Origin, atLeast: Double?)]>([])
        let events = Mutex<[Admission<String>.Event]>([])
        let calls = DispatchSemaphore(value: 0)

        var handlers: Admission<String>.Handlers {
            .init(
                start: { ticket in
                    self.started.withLock { $0.append(ticket) }
                    self.calls.signal()
                },
                deferJob: { job, origin, atLeast, _ in
                    self.deferred.withLock { $0.append((job, origin, atLeast)) }
                    self.calls.signal()
                },
                events: { events in self.events.withLock { $0 += events } })
        }

        var startedJobs: [String] { started.withLock { $0.map(\.element) } }
        var deferredJobs: [String] { deferred.withLock { $0.map(\.job) } }

        /// Waits for `count` handler calls; false if they did not all come within 5 s.
        func waitForCalls(_ count: Int) -> Bool {
            (0..<count).allSatisfy { _ in calls.wait(timeout: .now() + 5) == .success }
        }

        /// True if no handler is called within `milliseconds`.
        func noCall(within milliseconds: Int) -> Bool {
            calls.wait(timeout: .now() + .milliseconds(milliseconds)) == .timedOut
        }
    }

    final class FakeClock: Sendable {
        let now = Atomic<UInt64>(1_000 * AdmissionTests.ms)
        func advance(_ nanoseconds: UInt64) { now.add(nanoseconds, ordering: .relaxed) }
        var read: @Sendable () -> UInt64 { { self.now.load(ordering: .relaxed) } }
    }

    /// The broker's blocked state, which admission reads (the session owns it in the worker).
    final class BlockedFlag: Sendable {
        let value = Atomic<Bool>(false)
    }

    struct Fixture {
        let admission: Admission<String>
        let recorder: Recorder
        let clock: FakeClock
        let semaphore: DispatchSemaphore
        let group: DispatchGroup
        let blocked: BlockedFlag

        init(
            permits: Int, settings: OriginScheduler<String>.Settings = AdmissionTests.settings(),
            sweepInterval: DispatchTimeInterval = .seconds(60)
        ) {
            let blocked = BlockedFlag()
            let (recorder, clock, semaphore, group) = (
                Recorder(), FakeClock(), DispatchSemaphore(value: permits),
                DispatchGroup()
            )
            admission = Admission(
                settings: settings, semaphore: semaphore, inFlight: group,
                sweepInterval: sweepInterval, clock: clock.read, jitter: { 0.5 },
                isBlocked: { [blocked] in blocked.value.load(ordering: .relaxed) }, handlers: recorder.handlers)
            self.blocked = blocked
            (self.recorder, self.clock, self.semaphore, self.group) = (recorder, clock, semaphore, group)
        }

        /// Ends a started job's fetch as the worker does: the outcome, then its permit back, and
        /// the job leaves the group once settled.
        func finish(
            _ ticket: Admission<String>.Ticket,
            _ outcome: OriginScheduler<String>.FetchOutcome = .response(
                status: 200, latencyNanoseconds: 10 * AdmissionTests.ms, durationNanoseconds: 10 * AdmissionTests.ms,
                retryAfterSeconds: nil)
        ) {
            admission.finished(ticket.slot, outcome: outcome)
            semaphore.signal()
            group.leave()
        }

        /// The broker blocks or unblocks publishing: the flag changes, then admission hears of it.
        func setBlocked(_ isBlocked: Bool) {
            blocked.value.store(isBlocked, ordering: .relaxed)
            admission.blockedChanged()
        }

        /// Hands every waiting job back, as the drain does, and leaves the group for each.
        func handBack() -> [String] {
            let taken = admission.takeAll()
            for _ in taken { group.leave() }
            return taken
        }
    }

    /// Issue 33, defect 7: a drain waits on the group and then takes the waiting jobs back. A job
    /// that waits in admission must hold the group, or the drain's wait can end (and the
    /// connection close) while the job is still taken out later, to be started or deferred.
    @Test func aJobWaitingInAdmissionHoldsTheGroup() {
        let group = DispatchGroup()
        let semaphore = DispatchSemaphore(value: 0)  // no permit: the job cannot start
        let admission = Admission<String>(
            settings: Self.settings(), semaphore: semaphore, inFlight: group, clock: { 0 },
            handlers: .init(start: { _ in }, deferJob: { _, _, _, _ in }, events: { _ in }))
        admission.submit("a0", origin: Self.a)
        let held = group.wait(timeout: .now()) == .timedOut
        #expect(held, "the group was empty while a job waited in admission")
        let taken = admission.takeAll()
        #expect(taken == ["a0"])
        if held { for _ in taken { group.leave() } }
        #expect(group.wait(timeout: .now()) == .success)
        semaphore.signal()  // lets the pump, parked on the semaphore, find nothing and return
    }

    @Test func thePumpStartsAJobPerPermitAndTheNextWhenOneReturns() {
        let fixture = Fixture(permits: 2)
        for index in 0..<3 { fixture.admission.submit("a\(index)", origin: Self.a) }
        #expect(fixture.recorder.waitForCalls(2))
        #expect(fixture.recorder.noCall(within: 100))
        #expect(fixture.recorder.startedJobs == ["a0", "a1"])
        // Every job, started or waiting, holds the group.
        #expect(fixture.group.wait(timeout: .now()) == .timedOut)
        fixture.finish(fixture.recorder.started.withLock { $0[0] })
        #expect(fixture.recorder.waitForCalls(1))
        #expect(fixture.recorder.startedJobs == ["a0", "a1", "a2"])
        for ticket in fixture.recorder.started.withLock({ $0 }).dropFirst() { fixture.finish(ticket) }
        #expect(fixture.group.wait(timeout: .now() + 5) == .success)
    }

    @Test func nothingStartsWhileTheBrokerBlocksPublishing() {
        let fixture = Fixture(permits: 4)
        fixture.setBlocked(true)
        fixture.admission.submit("a0", origin: Self.a)
        #expect(fixture.recorder.noCall(within: 200))
        #expect(fixture.admission.gauges().waiting == 1)
        fixture.setBlocked(false)
        #expect(fixture.recorder.waitForCalls(1))
        #expect(fixture.recorder.startedJobs == ["a0"])
        fixture.finish(fixture.recorder.started.withLock { $0[0] })
    }

    /// A block that comes while the pump waits for a permit: the permit that frees it must not
    /// start a job (it read "not blocked" before its wait).
    @Test func aBlockWhileThePumpWaitsForAPermitStartsNothing() {
        let fixture = Fixture(permits: 1)
        fixture.admission.submit("a0", origin: Self.a)
        #expect(fixture.recorder.waitForCalls(1))
        fixture.admission.submit("a1", origin: Self.a)
        #expect(fixture.recorder.noCall(within: 100))  // the pump now waits on the semaphore
        fixture.setBlocked(true)
        fixture.finish(fixture.recorder.started.withLock { $0[0] })
        #expect(fixture.recorder.noCall(within: 200), "a job started while the broker blocks publishing")
        #expect(fixture.admission.gauges().waiting == 1)
        fixture.setBlocked(false)
        #expect(fixture.recorder.waitForCalls(1))
        #expect(fixture.recorder.startedJobs.last == "a1")
        if let last = fixture.recorder.started.withLock({ $0.last }), last.element == "a1" { fixture.finish(last) }
    }

    /// A finished fetch wakes the pump only when a job waits: with none, a kick would wake a
    /// thread for nothing, once per job.
    @Test func aFinishedFetchWithNothingWaitingDoesNotRunThePump() {
        let fixture = Fixture(permits: 4)
        fixture.admission.submit("a0", origin: Self.a)
        #expect(fixture.recorder.waitForCalls(1))
        let ticket = fixture.recorder.started.withLock { $0[0] }
        #expect(fixture.recorder.noCall(within: 50))  // the pump's pass is over
        let runs = fixture.admission.pumpRuns
        fixture.finish(ticket)
        #expect(fixture.recorder.noCall(within: 100))
        #expect(fixture.admission.pumpRuns == runs)
        // With a job waiting behind the origin's limit, the same event runs it.
        var settings = Self.settings()
        settings.limiter = .init(minLimit: 1, maxLimit: 1, initialLimit: 1)
        let limited = Fixture(permits: 4, settings: settings)
        limited.admission.submit("a0", origin: Self.a)
        limited.admission.submit("a1", origin: Self.a)
        #expect(limited.recorder.waitForCalls(1))
        #expect(limited.recorder.noCall(within: 50))
        let before = limited.admission.pumpRuns
        limited.finish(limited.recorder.started.withLock { $0[0] })
        #expect(limited.recorder.waitForCalls(1))
        #expect(limited.admission.pumpRuns > before)
        #expect(limited.recorder.startedJobs == ["a0", "a1"])
        limited.finish(limited.recorder.started.withLock { $0[1] })
    }

    /// A job of an origin paused for longer than the longest wait leaves at once, while another
    /// origin is active and the window crowded; it keeps the group until the deferral settles.
    @Test func aPausedOriginsJobIsDeferredOnArrival() {
        let fixture = Fixture(permits: 4, settings: Self.settings(window: 4))
        fixture.admission.submit("a0", origin: Self.a)
        #expect(fixture.recorder.waitForCalls(1))
        let refused = fixture.recorder.started.withLock { $0[0] }
        fixture.finish(
            refused,
            .response(
                status: 429, latencyNanoseconds: Self.ms, durationNanoseconds: Self.ms,
                retryAfterSeconds: 30))
        #expect(
            fixture.recorder.events.withLock { $0 } == [
                .limitCut(Self.a, OriginLimiter.Cut(from: 4, to: 2, signal: .tooManyRequests)),
                .paused(Self.a, seconds: 30),
            ])
        // B's jobs fill the window (nothing starts while the broker blocks publishing).
        fixture.setBlocked(true)
        for index in 0..<2 { fixture.admission.submit("b\(index)", origin: Self.b) }
        fixture.admission.submit("a1", origin: Self.a)
        #expect(fixture.recorder.deferredJobs == ["a1"])
        let deferral = fixture.recorder.deferred.withLock { $0[0] }
        #expect(deferral.origin == Self.a && (deferral.atLeast ?? 0) > 29)
        #expect(fixture.group.wait(timeout: .now()) == .timedOut)  // a1 and b0, b1 hold it
        fixture.group.leave()  // a1's deferral settled
        #expect(Set(fixture.handBack()) == ["b0", "b1"])
        #expect(fixture.group.wait(timeout: .now()) == .success)
        fixture.setBlocked(false)
    }

    /// The sweep gives up the jobs of an origin that became paused while they waited, on its own
    /// timer, and hands them to the deferral handler holding the group.
    @Test func theSweepDefersJobsOfAnOriginPausedWhileTheyWait() {
        let fixture = Fixture(permits: 4, settings: Self.settings(window: 4), sweepInterval: .milliseconds(10))
        fixture.admission.submit("a0", origin: Self.a)
        #expect(fixture.recorder.waitForCalls(1))
        fixture.setBlocked(true)
        for index in 1...3 { fixture.admission.submit("a\(index)", origin: Self.a) }
        // A alone with a full window, nothing deferred until it is paused.
        #expect(fixture.recorder.noCall(within: 100))
        fixture.finish(
            fixture.recorder.started.withLock { $0[0] },
            .response(
                status: 503, latencyNanoseconds: Self.ms, durationNanoseconds: Self.ms, retryAfterSeconds: 120))
        fixture.admission.submit("a4", origin: Self.a)  // the window is full of the paused origin's jobs again
        #expect(fixture.recorder.waitForCalls(4))
        #expect(Set(fixture.recorder.deferredJobs) == ["a1", "a2", "a3", "a4"])
        #expect(fixture.admission.gauges().waiting == 0)
        for _ in 0..<4 { fixture.group.leave() }
        #expect(fixture.group.wait(timeout: .now()) == .success)
        fixture.setBlocked(false)
    }

    @Test func aQueueSampleWithJobsBehindLetsALonePausedOriginGiveItsJobsUp() {
        let fixture = Fixture(permits: 4, settings: Self.settings(window: 16))
        fixture.admission.submit("a0", origin: Self.a)
        #expect(fixture.recorder.waitForCalls(1))
        fixture.finish(
            fixture.recorder.started.withLock { $0[0] },
            .response(
                status: 429, latencyNanoseconds: Self.ms, durationNanoseconds: Self.ms, retryAfterSeconds: 60))
        fixture.admission.submit("a1", origin: Self.a)
        #expect(fixture.recorder.deferredJobs.isEmpty)  // alone, window far from full, nothing known behind
        fixture.admission.queueSampled(ready: 500)
        fixture.admission.submit("a2", origin: Self.a)
        #expect(fixture.recorder.deferredJobs == ["a2"])
        fixture.group.leave()
        #expect(fixture.handBack() == ["a1"])
        #expect(fixture.group.wait(timeout: .now()) == .success)
    }
}
