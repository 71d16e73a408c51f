import Testing

@testable import ImageFetchWorker

/// The stdlib helpers that stand in for Foundation's string APIs at start-up.
@Suite struct ConfigTextTests {
    @Test func replacesEachListedCharacter() {
        #expect(ConfigText.replacing([".", "_"], with: "-", in: "fetch.max_bytes") == "fetch-max-bytes")
        #expect(ConfigText.replacing(["."], with: "_", in: "AMQP.URL") == "AMQP_URL")
        #expect(ConfigText.replacing(["."], with: "_", in: "") == "")
    }

    @Test func findsTheFirstSchemeSeparator() {
        let text = "amqp://user:pa://ss@host"
        let range = ConfigText.schemeSeparator(in: text)
        #expect(range.map { String(text[..<$0.lowerBound]) } == "amqp")
        #expect(range.map { String(text[$0.upperBound...]) } == "user:pa://ss@host")
        #expect(ConfigText.schemeSeparator(in: "host:5672") == nil)
        #expect(ConfigText.schemeSeparator(in: "a:/b:") == nil)
        let slice = "x,amqps://h"[...].split(separator: ",")[1]
        #expect(ConfigText.schemeSeparator(in: slice).map { String(slice[..<$0.lowerBound]) } == "amqps")
    }

    @Test func trimsSpacesTabsAndLineBreaksOfSubstringsToo() {
        #expect(ConfigText.trimmed(" \t a b \r\n") == "a b")
        #expect(ConfigText.trimmed("k= v "[...].dropFirst(2)) == "v")
        #expect(ConfigText.trimmed(" \n ") == "")
    }
}
