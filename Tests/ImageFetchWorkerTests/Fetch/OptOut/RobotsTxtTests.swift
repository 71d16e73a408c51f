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
