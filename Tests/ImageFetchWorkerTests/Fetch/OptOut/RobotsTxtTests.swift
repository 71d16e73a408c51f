import Dispatch
import Testing

@testable import ImageFetchWorker

/// robots.txt parsing and matching, with RFC 9309's own examples.
@Suite struct RobotsTxtTests {
    static func rules(_ text: String, agent: String = "ExampleBot") -> RobotsRules {
        RobotsTxt.parse(Array(text.utf8), userAgent: agent)
    }

    /// RFC 9309 §5.1's example file.
    static let rfcExample = """
        User-Agent: *
        Disallow: *.gif$
        Disallow: /example/
        Allow: /publications/

        User-Agent: foobot
        Disallow:/
        Allow:/example/page.html
        Allow:/example/allowed.gif

        User-Agent: barbot
        User-Agent: bazbot
        Disallow: /example/page.html

        User-Agent: quxbot
        """

    @Test func rfcExampleGroupsForFoobot() {
        let foobot = Self.rules(Self.rfcExample, agent: "foobot")
        #expect(foobot.allows("/example/page.html"))
        #expect(foobot.allows("/example/allowed.gif"))
        #expect(!foobot.allows("/example/disallowed.gif"))
        #expect(!foobot.allows("/"))
        #expect(!foobot.allows("/publications/"))
    }

    @Test func rfcExampleGroupsForBarbotBazbotQuxbotAndOthers() {
        for agent in ["barbot", "BazBot"] {
            let rules = Self.rules(Self.rfcExample, agent: agent)
            #expect(!rules.allows("/example/page.html"), "\(agent)")
            #expect(rules.allows("/example/allowed.gif"), "\(agent): the * group does not apply")
        }
        // quxbot's group is empty: everything is allowed, the * group does not apply.
        #expect(Self.rules(Self.rfcExample, agent: "quxbot").allows("/example/x.gif"))
        let other = Self.rules(Self.rfcExample, agent: "otherbot")
        #expect(!other.allows("/example/page.html"))
        #expect(!other.allows("/a/b.gif"))
        #expect(other.allows("/a/b.gif?x=1"), "$ anchors the end")
        #expect(other.allows("/publications/x"))
    }

    @Test func productTokenMatchesWithoutCaseAndVersion() {
        let rules = Self.rules(
            "User-agent: Image-Fetch-Worker/2.1 (+https://x)\nDisallow: /private\n", agent: "image-fetch-worker")
        #expect(!rules.allows("/private/a.png"))
        #expect(rules.allows("/public/a.png"))
    }

    @Test func groupsForTheSameAgentAreMerged() {
        let rules = Self.rules(
            "user-agent: a\ndisallow: /x\n\nuser-agent: b\ndisallow: /y\n\nuser-agent: a\ndisallow: /z\n", agent: "a")
        #expect(!rules.allows("/x") && !rules.allows("/z"))
        #expect(rules.allows("/y"))
    }

    /// RFC 9309 §2.2.2: the most specific (longest) match wins; allow wins a tie.
    @Test func longestMatchAndAllowWinsTies() {
        let rules = Self.rules(
            "User-agent: *\nAllow: /example/page/\nDisallow: /example/page/disallowed.gif\nDisallow: /ex\nAllow: /ex\n")
        #expect(rules.allows("/example/page/"))
        #expect(!rules.allows("/example/page/disallowed.gif"))
        #expect(rules.allows("/exhibit"), "allow and disallow of the same length: allow")
        let tie = Self.rules("User-agent: *\nDisallow: /folder\nAllow: /folder\n")
        #expect(tie.allows("/folder/page"))
    }

    /// RFC 9309 §2.2.3: `*` and `$`.
    @Test func wildcards() {
        let rules = Self.rules(
            "User-agent: *\nDisallow: /*.php$\nDisallow: /fish*\nDisallow: /a*b*c\nAllow: /*.php$x\n")
        #expect(!rules.allows("/filename.php"))
        #expect(!rules.allows("/folder/filename.php"))
        #expect(rules.allows("/filename.php?parameters"))
        #expect(rules.allows("/filename.php/"))
        #expect(!rules.allows("/fish.html"))
        #expect(!rules.allows("/fishheads/yummy.html"))
        #expect(rules.allows("/Fish.asp"), "paths are case-sensitive")
        #expect(!rules.allows("/a-b-c"))
        #expect(!rules.allows("/aXXbYYc/more"))
        #expect(rules.allows("/aXXcYYb"))
        #expect(RobotsTxt.matches(Array("/x".utf8), Array("/***x".utf8)))
    }

    /// The matcher the leftmost-piece one replaced: the set of path offsets the pattern so far
    /// can reach. Slow, and plainly right: the reference for the one below.
    static func reachableOffsetsMatch(_ path: [UInt8], _ pattern: [UInt8]) -> Bool {
        var offsets = [0]
        for (index, symbol) in pattern.enumerated() {
            if symbol == UInt8(ascii: "$"), index == pattern.count - 1 { return offsets.contains(path.count) }
            if symbol == UInt8(ascii: "*") {
                offsets = Array(offsets[0]...path.count)
                continue
            }
            offsets = offsets.filter { $0 < path.count && path[$0] == symbol }.map { $0 + 1 }
            if offsets.isEmpty { return false }
        }
        return true
    }

    @Test func theMatcherAgreesWithTheReachableOffsetsOnRandomPatterns() {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("ab/$*".utf8)
        for _ in 0..<20_000 {
            let path = (0..<Int.random(in: 0...8, using: &generator)).map { _ in
                alphabet[Int.random(in: 0..<3, using: &generator)]
            }
            let pattern = (0..<Int.random(in: 0...6, using: &generator)).map { _ in
                alphabet.randomElement(using: &generator)!
            }
            #expect(
                RobotsTxt.matches(path, pattern) == Self.reachableOffsetsMatch(path, pattern),
                "path \(String(decoding: path, as: UTF8.self)), pattern \(String(decoding: pattern, as: UTF8.self))")
        }
    }

    /// A hostile origin's robots.txt of 20,000 `/*a*a*a*a*a*b` rules against an 8,000-byte path:
    /// the matcher took the pattern's length times the path's for each rule, on the admission
    /// queue, where nothing else is admitted meanwhile (minutes in a debug build). It must end
    /// well within the bound here, which only catches a stall.
    @Test func manyWildcardRulesAgainstALongPathDoNotStall() {
        let text = "User-agent: *\n" + String(repeating: "Disallow: /*a*a*a*a*a*b\n", count: 20_000)
        let rules = Self.rules(text)
        #expect(rules.rules.count == 20_000)
        let path = "/" + String(repeating: "a", count: 8_000)
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var allowed: Bool?
        DispatchQueue(label: "robots-stall").async {
            allowed = rules.allows(path)
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 20) == .success, "matching still ran after 20 s")
        #expect(allowed == true)
        #expect(!rules.allows(path + "b"))
    }

    /// RFC 9309 §2.2.2's table: escapes of unreserved characters compare decoded, non-ASCII
    /// compares percent-encoded.
    @Test func percentEncodingIsNormalised() {
        let rules = Self.rules("User-agent: *\nDisallow: /foo/bar/ツ\nDisallow: /foo/%62%61%7A\nDisallow: /q?x=%2f\n")
        #expect(!rules.allows("/foo/bar/%E3%83%84"))
        #expect(!rules.allows("/foo/bar/%e3%83%84"))
        #expect(!rules.allows("/foo/baz"))
        #expect(!rules.allows("/q?x=%2F"), "a reserved escape stays an escape, hex case aside")
        #expect(rules.allows("/q?x=/"), "…and is not the character it encodes")
        #expect(RobotsTxt.normalized(Array("/%7euser/%41".utf8)) == Array("/~user/A".utf8))
    }

    @Test func robotsTxtItselfIsAlwaysAllowed() {
        #expect(Self.rules("User-agent: *\nDisallow: /\n").allows("/robots.txt"))
    }

    @Test func noMatchingGroupOrEmptyFileAllowsAll() {
        #expect(Self.rules("User-agent: otherbot\nDisallow: /\n").allows("/a"))
        #expect(Self.rules("").allows("/a"))
        #expect(Self.rules("Disallow: /\n").allows("/a"), "rules before any user-agent line belong to no group")
        #expect(Self.rules("User-agent: *\nDisallow:\n").allows("/a"), "an empty disallow allows all")
    }

    @Test func commentsCRLFAndBOMAndUnknownLines() {
        let text =
            "\u{FEFF}# hi\r\nUser-agent: * # everyone\r\nCrawl-delay: 10\r\nSitemap: https://x/s.xml\r\nDisallow: /a # no\r\n"
        let rules = Self.rules(text)
        #expect(!rules.allows("/a/b"))
        #expect(rules.allows("/b"))
    }

    @Test func aUserAgentLineAfterRulesStartsANewGroup() {
        let rules = Self.rules("User-agent: ExampleBot\nDisallow: /a\nUser-agent: other\nDisallow: /b\n")
        #expect(!rules.allows("/a"))
        #expect(rules.allows("/b"))
    }

    @Test func onlyTheParseLimitIsRead() {
        let filler = String(repeating: "# filler line\n", count: RobotsTxt.parseLimit / 14 + 10)
        let rules = Self.rules("User-agent: *\nDisallow: /early\n" + filler + "Disallow: /late\n")
        #expect(!rules.allows("/early"))
        #expect(rules.allows("/late"), "past 500 KiB")
    }

    @Test func missingAndUnreachableFiles() {
        #expect(RobotsRules.allowAll.allows("/anything"))
        #expect(RobotsRules.allowAll.signal(for: "/a") == nil)
        #expect(!RobotsRules.disallowAll.allows("/a"))
        #expect(RobotsRules.disallowAll.signal(for: "/a") == .robotsUnreachable)
        #expect(Self.rules("User-agent: *\nDisallow: /a\n").signal(for: "/a") == .robotsDisallowed)
    }

    @Test func pathAndQueryOfACheckedURL() {
        #expect(RobotsTxt.pathAndQuery(of: "https://example.com/a/b.png?x=1#frag") == "/a/b.png?x=1")
        #expect(RobotsTxt.pathAndQuery(of: "http://[::1]:8080") == "/")
        #expect(RobotsTxt.pathAndQuery(of: "http://example.com?q") == "/?q")
    }
}

extension RobotsTxtTests {
    /// The cache charges a rule by its pattern: a pattern collapsed from a long run of `*` must
    /// not keep the run's memory, or a few files of such lines held gigabytes under a 128 MiB cap.
    @Test func aCollapsedPatternKeepsNoMemoryOfItsStars() {
        let parsed = Self.rules("User-agent: *\nDisallow: /" + String(repeating: "*", count: 16_000) + "\n")
        #expect(parsed.rules.first?.pattern == Array("/*".utf8))
        #expect((parsed.rules.first?.pattern.capacity ?? .max) < 64)
        #expect(RobotsCache<Int>.cost(of: parsed) < 1_000)
    }
}
