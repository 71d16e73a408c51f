import Dispatch
import Synchronization
import Testing

@testable import ImageFetchWorker

/// Where the robots.txt gate matches a path. The admission queue asks for the verdict of every
/// job, so a rule set that is slow to match must not be matched there: one origin's robots.txt
/// would hold every other origin's jobs.
@Suite struct RobotsGateTests {
    static let origin = Origin(scheme: "https", host: "many-rules.example", port: 443)
    static let admissionKey = DispatchSpecificKey<Bool>()

    /// A gate whose robots.txt fetch answers `text` on the fake engine.
    static func gate(robots text: String) -> RobotsGate {
        let fetcher = FakeFetcher(completionQueue: DispatchQueue(label: "completions"))
        fetcher.script("\(origin)/robots.txt", .respond(FetchResponse(httpStatus: 200, body: Array(text.utf8))))
        var configuration = WorkerConfiguration().fetch
        configuration.robots = .respect
        return RobotsGate(configuration: configuration, engine: fetcher, metrics: nil)
    }

    static func rules(_ count: Int) -> String {
        var text = "User-agent: *\n"
        for index in 0..<count { text += "Disallow: /private\(index)/\n" }
        return text
    }

    /// Asks for a verdict from a queue that stands for admission; returns it and whether it was
    /// decided on that queue.
    static func check(_ gate: RobotsGate, _ path: String) async -> (RobotsGate.Verdict, onAdmission: Bool) {
        let admission = DispatchQueue(label: "admission")
        admission.setSpecific(key: admissionKey, value: true)
        return await withCheckedContinuation { continuation in
            admission.async {
                gate.check("\(origin)\(path)", origin: origin) { verdict in
                    continuation.resume(returning: (verdict, DispatchQueue.getSpecific(key: admissionKey) == true))
                }
            }
        }
    }

    /// Failed before the fix: 45,000 rules (500 KiB of robots.txt) took about 10 ms a path on
    /// the admission queue.
    @Test func aLargeRuleSetIsNotMatchedOnTheAdmissionQueue() async {
        let gate = Self.gate(robots: Self.rules(RobotsGate.inlineRuleLimit + 1))
        // The first check fetches robots.txt; the verdicts after it find the rules cached.
        #expect(await Self.check(gate, "/private0/a.png").0 == .optedOut(.robotsDisallowed))
        let denied = await Self.check(gate, "/private\(RobotsGate.inlineRuleLimit)/a.png")
        #expect(denied.0 == .optedOut(.robotsDisallowed))
        #expect(!denied.onAdmission)
        let allowed = await Self.check(gate, "/public/a.png")
        #expect(allowed.0 == .allowed)
        #expect(!allowed.onAdmission)
    }

    /// Few rules can still be long: 200 wildcard rules of 2 KB each cost about as much to match
    /// as the 45,000 short ones above. Matched on the admission queue before the fix.
    @Test func fewLongRulesAreNotMatchedOnTheAdmissionQueue() async {
        let long = "/" + String(repeating: "x*", count: 1_000)
        let gate = Self.gate(robots: "User-agent: *\n" + String(repeating: "Disallow: \(long)\n", count: 200))
        #expect(await Self.check(gate, "/x/a.png").0 == .allowed)
        let allowed = await Self.check(gate, "/images/a.png")
        #expect(allowed.0 == .allowed)
        #expect(!allowed.onAdmission)
    }

    /// A small rule set costs less than the hop to another queue: it is matched in place.
    @Test func aSmallRuleSetIsMatchedInPlace() async {
        let gate = Self.gate(robots: Self.rules(RobotsGate.inlineRuleLimit))
        #expect(await Self.check(gate, "/public/a.png").0 == .allowed)
        let denied = await Self.check(gate, "/private3/a.png")
        #expect(denied.0 == .optedOut(.robotsDisallowed))
        #expect(denied.onAdmission)
    }
}
