import Testing

@testable import ImageFetchWorker

/// Parses an address literal written in a test, failing the test (not crashing) if it is wrong.
func ip(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> IPAddress {
    try #require(IPAddress(text), "not an address literal: \(text)", sourceLocation: sourceLocation)
}
