/// The opt-out headers of one response, as sent (``FetchRequest/optOut``).
struct OptOutHeaders {
    var xRobotsTag: [String] = []
    var tdmReservation: [String] = []
    /// Fields past this many of one name are ignored: an origin cannot grow the list unbounded.
    static let maxFields = 32

    var isEmpty: Bool { xRobotsTag.isEmpty && tdmReservation.isEmpty }

    static let xRobotsTagPrefix = Array("x-robots-tag:".utf8)
    static let tdmReservationPrefix = Array("tdm-reservation:".utf8)

    mutating func gather(_ line: UnsafeRawBufferPointer) {
        if let value = FetchTransfer.value(of: Self.xRobotsTagPrefix, in: line), xRobotsTag.count < Self.maxFields {
            xRobotsTag.append(String(decoding: value.prefix(4096), as: UTF8.self))
        } else if let value = FetchTransfer.value(of: Self.tdmReservationPrefix, in: line),
            tdmReservation.count < Self.maxFields
        {
            tdmReservation.append(String(decoding: value.prefix(64), as: UTF8.self))
        }
    }
}
