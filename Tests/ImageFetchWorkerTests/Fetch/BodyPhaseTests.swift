import Testing

@testable import ImageFetchWorker

/// ``BodyPhase``, the state machine behind a transfer's write and header callbacks, driven
/// directly: no libcurl, no loop. (Events mutate the phase, so each is applied before its
/// `#expect`.)
@Suite struct BodyPhaseTests {
    static let limit = 64 * 1024

    @Test func aSuccessfulBodyIsAdmittedThenKept() {
        var phase = BodyPhase.awaitingBody
        var action = phase.chunk(count: 100, status: 200, discardLimit: Self.limit)
        #expect(action == .admit)
        // Asking is not admitting: the phase waits for the flow control's answer.
        #expect(phase == .awaitingBody)
        phase.admitted(inspecting: false)
        #expect(phase == .receiving(inspecting: false))
        action = phase.chunk(count: 100, status: 0, discardLimit: Self.limit)
        #expect(action == .keep(inspect: false))
    }

    @Test func theInspectorSeesTheBodyUntilItDecides() {
        var phase = BodyPhase.awaitingBody
        var action = phase.chunk(count: 10, status: 204, discardLimit: Self.limit)
        #expect(action == .admit)
        phase.admitted(inspecting: true)
        action = phase.chunk(count: 10, status: 204, discardLimit: Self.limit)
        #expect(action == .keep(inspect: true))
        phase.inspected()
        #expect(phase == .receiving(inspecting: false))
        action = phase.chunk(count: 10, status: 204, discardLimit: Self.limit)
        #expect(action == .keep(inspect: false))
    }

    @Test func aNonSuccessBodyIsCountedAndDroppedUpToTheLimit() {
        var phase = BodyPhase.awaitingBody
        var action = phase.chunk(count: 1000, status: 404, discardLimit: 1500)
        #expect(action == .drop)
        #expect(phase == .discarding(bytes: 1000))
        action = phase.chunk(count: 500, status: 0, discardLimit: 1500)
        #expect(action == .drop)
        action = phase.chunk(count: 1, status: 0, discardLimit: 1500)
        #expect(action == .stopDiscarding)
        #expect(phase == .discarding(bytes: 1501))
        // A first chunk alone can be over the limit.
        var big = BodyPhase.awaitingBody
        action = big.chunk(count: 1501, status: 302, discardLimit: 1500)
        #expect(action == .stopDiscarding)
        // Status 0 (no status line seen) is not a success either.
        var none = BodyPhase.awaitingBody
        action = none.chunk(count: 1, status: 0, discardLimit: 1500)
        #expect(action == .drop)
    }

    @Test func aStatusLineStartsOverAfterARedirectBody() {
        var phase = BodyPhase.awaitingBody
        _ = phase.chunk(count: 300, status: 301, discardLimit: Self.limit)
        phase.statusLine()
        #expect(phase == .awaitingBody)
        // The final response's body is judged by its own status.
        let action = phase.chunk(count: 300, status: 200, discardLimit: Self.limit)
        #expect(action == .admit)
        phase.statusLine()  // a 1xx before any body byte changes nothing
        #expect(phase == .awaitingBody)
    }

    @Test func aStatusLineDoesNotUndoAKeptBody() {
        for kept in [BodyPhase.receiving(inspecting: true), .paused, .complete] {
            var phase = kept
            phase.statusLine()
            #expect(phase == kept)
        }
    }

    @Test func theFlowControlPausesAndResumes() {
        var phase = BodyPhase.awaitingBody
        var action = phase.chunk(count: 100, status: 200, discardLimit: Self.limit)
        #expect(action == .admit)
        phase.pausedByFlowControl()
        #expect(phase.isPaused)
        // libcurl keeps the chunk while paused.
        action = phase.chunk(count: 100, status: 200, discardLimit: Self.limit)
        #expect(action == .stayPaused)
        // The loop resumes it: the kept chunk then comes in as part of the body.
        phase.admitted(inspecting: true)
        #expect(phase == .receiving(inspecting: true))
        #expect(!phase.isPaused)
        action = phase.chunk(count: 100, status: 200, discardLimit: Self.limit)
        #expect(action == .keep(inspect: true))
    }

    @Test func onlyABodyAboutToStartCanPause() {
        for state in [BodyPhase.discarding(bytes: 3), .receiving(inspecting: false), .complete] {
            var phase = state
            phase.pausedByFlowControl()
            #expect(phase == state)
        }
    }

    @Test func aCompleteBodyCountsInTheBacklogOnce() {
        var phase = BodyPhase.receiving(inspecting: true)
        #expect(!phase.countsInBacklog)
        var counted = phase.bodyComplete()
        #expect(counted)
        #expect(phase.countsInBacklog)
        counted = phase.bodyComplete()
        #expect(!counted)
        #expect(phase.countsInBacklog)
        // An empty 2xx body is complete when its transfer ends.
        var empty = BodyPhase.awaitingBody
        counted = empty.bodyComplete()
        #expect(counted)
        #expect(empty == .complete)
    }

    @Test func droppedAndPausedBodiesNeverCount() {
        for state in [BodyPhase.discarding(bytes: 10), .paused] {
            var phase = state
            let counted = phase.bodyComplete()
            #expect(!counted)
            #expect(!phase.countsInBacklog)
        }
    }

    @Test func endingTellsWhetherThePauseMustBeUncounted() {
        var paused = BodyPhase.paused
        var wasPaused = paused.ended()
        #expect(wasPaused)
        #expect(!paused.isPaused)
        wasPaused = paused.ended()
        #expect(!wasPaused)  // once
        var complete = BodyPhase.complete
        wasPaused = complete.ended()
        #expect(!wasPaused)
        // A complete body still counts after its transfer ended, until its completion is taken.
        #expect(complete.countsInBacklog)
    }
}
