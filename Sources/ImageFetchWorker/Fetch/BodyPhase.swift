/// Where one transfer is with the body of its current response: the state machine behind
/// ``FetchTransfer``'s write and header callbacks and the loop's body flow control, without I/O.
/// The transfer performs what each event returns.
///
/// A transfer can see several responses (1xx, redirects whose bodies are dropped) before its
/// final one; only a 2xx body is kept, let in once by the flow control (``BodyBacklog``), and
/// shown to the inspector until it decides. libcurl starts no further response once a 2xx body
/// has begun, so a status line moves only a response that has not begun a kept body.
enum BodyPhase: Equatable {
    /// No body byte of the current response yet.
    case awaitingBody
    /// The current response is not 2xx: its body is counted (`bytes`) and dropped.
    case discarding(bytes: Int)
    /// The first chunk of a 2xx body came while the flow control was full: the transfer is
    /// paused (libcurl keeps the chunk) until the loop resumes it.
    case paused
    /// The 2xx body is coming in; `inspecting` while the inspector has not decided yet.
    case receiving(inspecting: Bool)
    /// The kept body is complete and counts in the loop's backlog until its completion is taken.
    case complete

    /// What the write callback does with one chunk.
    enum ChunkAction: Equatable {
        /// A 2xx body is about to start: ask the flow control, then ``admitted(inspecting:)`` or
        /// ``pausedByFlowControl()``.
        case admit
        /// Keep the chunk, and show the body to the inspector first when `inspect`.
        case keep(inspect: Bool)
        /// Count the chunk and drop it.
        case drop
        /// A dropped body ran past the discard limit: stop the transfer with the response's status.
        case stopDiscarding
        /// Still paused: libcurl keeps the chunk.
        case stayPaused
    }

    /// A status line: a new response begins (a redirect hop, a 1xx, the final one).
    mutating func statusLine() {
        switch self {
        case .awaitingBody, .discarding: self = .awaitingBody
        case .paused, .receiving, .complete: break
        }
    }

    /// A chunk of `count` bytes of the current response, whose status is `status`.
    mutating func chunk(count: Int, status: Int, discardLimit: Int) -> ChunkAction {
        switch self {
        case .awaitingBody:
            if (200...299).contains(status) { return .admit }
            self = .discarding(bytes: 0)
            return chunk(count: count, status: status, discardLimit: discardLimit)
        case .discarding(let bytes):
            let total = bytes + count
            self = .discarding(bytes: total)
            return total > discardLimit ? .stopDiscarding : .drop
        case .paused:
            return .stayPaused
        case .receiving(let inspecting):
            return .keep(inspect: inspecting)
        case .complete:
            return .keep(inspect: false)
        }
    }

    /// The flow control lets the kept body in (at once, or when the loop resumes the transfer);
    /// `inspecting`: the request has an inspector.
    mutating func admitted(inspecting: Bool) {
        switch self {
        case .awaitingBody, .paused: self = .receiving(inspecting: inspecting)
        case .discarding, .receiving, .complete: break
        }
    }

    /// The flow control is full: the transfer pauses ahead of its kept body.
    mutating func pausedByFlowControl() {
        if case .awaitingBody = self { self = .paused }
    }

    /// The inspector decided (accepted or rejected): it sees no more of the body.
    mutating func inspected() {
        if case .receiving = self { self = .receiving(inspecting: false) }
    }

    /// The kept body is complete (all declared bytes, or a 2xx transfer ended); true when it
    /// starts to count in the backlog now, which happens once.
    mutating func bodyComplete() -> Bool {
        switch self {
        case .awaitingBody, .receiving:
            self = .complete
            return true
        case .discarding, .paused, .complete:
            return false
        }
    }

    /// The transfer ended; true when it was paused, so the flow control stops counting it.
    mutating func ended() -> Bool {
        guard case .paused = self else { return false }
        self = .awaitingBody
        return true
    }

    /// The transfer is paused by the flow control.
    var isPaused: Bool {
        if case .paused = self { return true }
        return false
    }

    /// The kept body counts in the loop's backlog.
    var countsInBacklog: Bool {
        if case .complete = self { return true }
        return false
    }
}
