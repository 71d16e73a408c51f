import Testing

@testable import ImageFetchWorker

/// `X-Robots-Tag` as Google documents it, and which directives end a job.
@Suite struct XRobotsTagTests {
    static let all: Set<String> = ["noai", "noimageai", "noml", "noindex", "noimageindex"]
    static let policy = OptOutPolicy(directives: all, tdmReservation: true, userAgent: "image-fetch-worker")

    @Test func commaSeparatedDirectivesWithoutCaseOrSpaces() {
        #expect(
            XRobotsTag.directives(["noarchive, NoAI ,nosnippet"], userAgent: "x") == ["noarchive", "noai", "nosnippet"])
        #expect(XRobotsTag.directives(["noindex", "noml"], userAgent: "x") == ["noindex", "noml"])
        #expect(XRobotsTag.directives([",, ,"], userAgent: "x") == [])
    }

    @Test func noneMeansNoindexAndNofollow() {
        #expect(XRobotsTag.directives(["none"], userAgent: "x") == ["noindex", "nofollow"])
        #expect(Self.policy.signal(xRobotsTag: ["NONE"], tdmReservation: []) == .xRobotsTag(directive: "noindex"))
        #expect(Self.policy.signal(xRobotsTag: ["all"], tdmReservation: []) == nil)
    }

    @Test func aUserAgentPrefixScopesTheRestOfTheField() {
        // Google's examples: `googlebot: nofollow`, `otherbot: noindex, nofollow`.
        #expect(XRobotsTag.directives(["googlebot: nofollow"], userAgent: "image-fetch-worker") == [])
        #expect(
            XRobotsTag.directives(["otherbot: noindex, nofollow"], userAgent: "OtherBot") == ["noindex", "nofollow"])
        #expect(XRobotsTag.directives(["googlebot: noindex", "noai"], userAgent: "mine") == ["noai"])
        // A later prefix in the same field switches the scope.
        #expect(XRobotsTag.directives(["otherbot: noindex, mine: noai"], userAgent: "mine") == ["noai"])
        #expect(Self.policy.signal(xRobotsTag: ["googlebot: noai"], tdmReservation: []) == nil)
        #expect(
            Self.policy.signal(xRobotsTag: ["Image-Fetch-Worker: noimageai"], tdmReservation: [])
                == .xRobotsTag(directive: "noimageai"))
    }

    @Test func aValuedDirectiveIsNoUserAgent() {
        let values = ["unavailable_after: 25 Jun 2010 15:00:00 PST, noml", "max-image-preview:large"]
        #expect(XRobotsTag.directives(values, userAgent: "x") == ["unavailable_after", "noml", "max-image-preview"])
    }

    @Test func onlyConfiguredDirectivesCount() {
        let aiOnly = OptOutPolicy(directives: ["noai", "noimageai"], tdmReservation: false, userAgent: "w")
        #expect(aiOnly.signal(xRobotsTag: ["noindex, noimageindex"], tdmReservation: []) == nil)
        #expect(
            aiOnly.signal(xRobotsTag: ["noindex, noimageai"], tdmReservation: []) == .xRobotsTag(directive: "noimageai")
        )
        #expect(aiOnly.signal(xRobotsTag: [], tdmReservation: ["1"]) == nil, "tdm_reservation off")
        let none = OptOutPolicy(directives: [], tdmReservation: false, userAgent: "w")
        #expect(!none.isActive)
        #expect(none.signal(xRobotsTag: ["noai"], tdmReservation: ["1"]) == nil)
    }

    @Test func tdmReservationOneReservesZeroDoesNot() {
        #expect(Self.policy.signal(xRobotsTag: [], tdmReservation: [" 1 "]) == .tdmReservation)
        #expect(Self.policy.signal(xRobotsTag: [], tdmReservation: ["0"]) == nil)
        #expect(Self.policy.signal(xRobotsTag: [], tdmReservation: ["yes", "10"]) == nil)
        #expect(Self.policy.signal(xRobotsTag: ["noarchive"], tdmReservation: ["1"]) == .tdmReservation)
    }

    @Test func theDefaultsAreTheDocumentedOnes() {
        let defaults = WorkerConfiguration.Fetch()
        #expect(defaults.robots == .off)
        #expect(defaults.optOut.directives == Self.all)
        #expect(defaults.optOut.tdmReservation)
        #expect(defaults.optOut.userAgent == "image-fetch-worker")
        #expect(defaults.optOut.policy == Self.policy)
    }
}
