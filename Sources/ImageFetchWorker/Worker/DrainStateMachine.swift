/// The shutdown of a worker (SIGTERM, or ``Worker/shutdown(completion:)``), as events in and
/// actions out. Pure: the worker performs the actions and reports back.
///
/// 1. The consumer is cancelled and readiness turns false; meanwhile the wait for the jobs in
///    flight starts.
/// 2. When the broker has confirmed the cancel, the deliveries that never started are handed back.
/// 3. At the deadline (`worker.drain_timeout`), fetches still running are aborted and their
///    deliveries handed back, with a short grace for those hand-backs to go out.
/// 4. The connection closes, then the worker reports exit status 0.
package struct DrainStateMachine: Sendable, Equatable {
    package enum State: Sendable, Equatable {
        case running
        case waitingForJobs
        case abortingFetches
        case closing
        case closed
    }

    package enum Action: Sendable, Equatable {
        /// Cancel the consumer and stop readiness; start waiting for the jobs in flight.
        case stopConsumingAndWait
        /// Nack with requeue every delivery that is still waiting for admission.
        case handBackWaiting
        /// Abort every running fetch and wait a little more.
        case abortFetches
        /// Close the channel and the connection.
        case close
        /// Report the exit status.
        case finish(exitStatus: Int32)
        case none
    }

    package private(set) var state = State.running

    package init() {}

    /// Whether shutdown has begun.
    package var isDraining: Bool { state != .running }

    /// A signal or a caller asked for shutdown; later requests change nothing.
    package mutating func shutdownRequested() -> Action {
        guard state == .running else { return .none }
        state = .waitingForJobs
        return .stopConsumingAndWait
    }

    /// The broker confirmed the cancel (or the connection is gone).
    package mutating func consumerStopped() -> Action {
        switch state {
        case .running, .closed: .none
        case .waitingForJobs, .abortingFetches, .closing: .handBackWaiting
        }
    }

    /// Every job in flight has settled.
    package mutating func jobsDrained() -> Action {
        switch state {
        case .waitingForJobs, .abortingFetches:
            state = .closing
            return .close
        case .running, .closing, .closed:
            return .none
        }
    }

    /// `worker.drain_timeout` passed with jobs still in flight.
    package mutating func deadlinePassed() -> Action {
        guard state == .waitingForJobs else { return .none }
        state = .abortingFetches
        return .abortFetches
    }

    /// The grace after aborting ended; whatever is still in flight returns to the queue when the
    /// connection closes.
    package mutating func abortGraceEnded() -> Action {
        guard state == .abortingFetches else { return .none }
        state = .closing
        return .close
    }

    /// The connection is closed.
    package mutating func closed() -> Action {
        guard state == .closing else { return .none }
        state = .closed
        return .finish(exitStatus: 0)
    }
}
