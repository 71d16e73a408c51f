import Testing

@testable import ImageFetchWorker

@Suite struct IDNATests {
    @Test(arguments: [
        ("bücher.example", "xn--bcher-kva.example"),
        ("BÜCHER.Example", "xn--bcher-kva.example"),
        ("xn--bcher-kva.example", "xn--bcher-kva.example"),
        ("faß.de", "xn--fa-hia.de"),  // IDNA 2008, non-transitional: ß is kept
        ("ｂüｃｈｅｒ。example", "xn--bcher-kva.example"),  // UTS 46 maps full-width forms and the ideographic dot
        ("пример.рф", "xn--e1afmkfd.xn--p1ai"),
        ("例え.jp", "xn--r8jz45g.jp"),
    ])
    func convertsToPunycode(input: String, expected: String) throws {
        #expect(try IDNA.toASCII(input).get() == expected)
        #expect(try URLPolicy.validate("https://\(input)/a.png").get().host == expected)
    }

    @Test(arguments: [
        "xn--pple-43d.com",  // "аpple": a Cyrillic а among Latin letters
        "\u{0430}pple.com",
        "xn--80ak6aa92e.com",  // "аррӏе": only Cyrillic letters that look Latin
        "g\u{03BF}\u{03BF}gle.com",  // Greek omicrons among Latin letters
        "xn--bcher-kvb.example",  // not a valid encoding
        "xn--abc.example",
        "a\u{200D}b.example",  // a joiner where the context rules forbid it
        "\u{0661}\u{0662}a.example",  // breaks the bidi rule
        "xn--ls8h.example",  // an emoji: disallowed in IDNA 2008
    ])
    func refusesInvalidAndConfusableNames(host: String) {
        guard case .failure(let problem) = IDNA.toASCII(host) else {
            Issue.record("\(host) was accepted")
            return
        }
        #expect(!problem.message.contains(host))
        guard case .failure(let refusal) = URLPolicy.validate("https://\(host)/a.png") else {
            Issue.record("the URL with \(host) was accepted")
            return
        }
        #expect(refusal == .invalidHostName(problem))
        #expect(JobError(refusal).code == .invalidURL)
    }

    @Test func wholeScriptNamesAreFineUnderTheirOwnTopLevelLabel() {
        // "аре" in Cyrillic looks Latin: refused under .com, fine under .рф.
        #expect((try? IDNA.toASCII("\u{0430}\u{0440}\u{0435}.com").get()) == nil)
        #expect((try? IDNA.toASCII("\u{0430}\u{0440}\u{0435}.рф").get()) != nil)
    }

    @Test func plainASCIIHostsDoNotGoThroughIDNA() {
        #expect(!IDNA.needsConversion("images.example.com".utf8))
        #expect(!IDNA.needsConversion("axn--b.example".utf8))
        #expect(IDNA.needsConversion("a.XN--b.example".utf8))
        #expect(IDNA.needsConversion("bücher.example".utf8))
        #expect(IDNA.needsConversion("xn--".utf8))
        #expect(!IDNA.needsConversion("xn-".utf8))
        #expect(!IDNA.needsConversion("x.n--a".utf8))
        #expect(IDNA.needsConversion("a..Xn--z".utf8))
    }

    /// The one-pass check says what splitting into labels says, over random hosts made of the
    /// bytes that matter.
    @Test func theOnePassCheckAgreesWithSplittingIntoLabels() {
        func bySplitting(_ host: [UInt8]) -> Bool {
            host.contains { $0 >= 0x80 }
                || host.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
                    .contains { $0.count >= 4 && $0.prefix(4).map { $0 | 0x20 } == Array("xn--".utf8) }
        }
        var generator = SplitMix64(state: 18)
        let alphabet = Array("xXnN-.a".utf8) + [0x0D, 0xC3]
        for _ in 0..<20_000 {
            let host = (0..<Int.random(in: 0...9, using: &generator)).map { _ in
                alphabet.randomElement(using: &generator)!
            }
            #expect(IDNA.needsConversion(host) == bySplitting(host), "\(host)")
        }
    }
}

@Suite struct HostPolicyTests {
    static func policy(allowed: [String] = [], denied: [String] = []) throws -> HostPolicy {
        try #require(
            HostPolicy(
                allowed: allowed.map { try HostPolicy.normalizedEntry($0).get() },
                denied: denied.map { try HostPolicy.normalizedEntry($0).get() }))
    }

    @Test func noListsMeansNoPolicy() {
        #expect(HostPolicy(allowed: [], denied: []) == nil)
    }

    @Test func exactNamesAndPatterns() throws {
        let policy = try Self.policy(allowed: ["images.example.com", "*.cdn.example"], denied: ["bad.cdn.example"])
        #expect(policy.refusal(forHost: "images.example.com") == nil)
        #expect(policy.refusal(forHost: "IMAGES.example.com.") == nil)
        #expect(policy.refusal(forHost: "x.images.example.com") == .notAllowed)
        #expect(policy.refusal(forHost: "a.cdn.example") == nil)
        #expect(policy.refusal(forHost: "a.b.cdn.example") == nil)
        #expect(policy.refusal(forHost: "cdn.example") == .notAllowed)
        #expect(policy.refusal(forHost: "evilcdn.example") == .notAllowed)
        #expect(policy.refusal(forHost: "bad.cdn.example") == .denied)
    }

    @Test func denyOnly() throws {
        let policy = try Self.policy(denied: ["*.internal", "metadata.google.internal", "192.0.2.7", "[2001:db8::7]"])
        #expect(policy.refusal(forHost: "example.com") == nil)
        #expect(policy.refusal(forHost: "x.internal") == .denied)
        #expect(policy.refusal(forHost: "192.0.2.7") == .denied)
        #expect(policy.refusal(forHost: "[2001:db8::7]") == .denied)
        #expect(policy.refusal(forHost: "[2001:db8::8]") == nil)
    }

    @Test func entriesAreNormalised() throws {
        #expect(try HostPolicy.normalizedEntry("Images.Example.COM.").get() == "images.example.com")
        #expect(try HostPolicy.normalizedEntry("*.bücher.example").get() == "*.xn--bcher-kva.example")
        #expect(try HostPolicy.normalizedEntry("2001:DB8::7").get() == "[2001:db8::7]")
        for bad in ["*", "*.", "a.*.b", "exa mple.com", "a/b", "*.xn--pple-43d.com", "*.1.2.3.4/8"] {
            #expect((try? HostPolicy.normalizedEntry(bad).get()) == nil, "\(bad)")
        }
    }

    @Test func errorsNameTheListNotTheHost() throws {
        let error = try #require(JobError(fetchFailure: .hostNotAllowed(.notAllowed, redirect: true)))
        #expect(error.code == .hostNotAllowed)
        #expect(error.code.rawValue == "host_not_allowed")
        #expect(!error.retryable)
        #expect(error.message.contains("fetch.allowed_hosts"))
    }
}

@Suite struct RequestHeadersTests {
    static let allowed: Set<String> = ["referer", "authorization"]

    @Test func allowedHeadersPass() {
        let fields = [
            HTTPHeaderField(name: "Referer", value: "https://shop.example/"),
            HTTPHeaderField(name: "authorization", value: "Bearer\tabc"),
        ]
        #expect(RequestHeaders.checkJobHeaders(fields, allowed: Self.allowed) == nil)
    }

    @Test(arguments: [
        (HTTPHeaderField(name: "Cookie", value: "a=b"), "not allowed"),
        (HTTPHeaderField(name: "Referer", value: "a\r\nX-Injected: 1"), "CR or LF"),
        (HTTPHeaderField(name: "Referer", value: "a\nb"), "CR or LF"),
        (HTTPHeaderField(name: "Referer", value: "a\u{0}b"), "control character"),
        (HTTPHeaderField(name: "Referer", value: String(repeating: "a", count: 4097)), "longer than 4096"),
        (HTTPHeaderField(name: "Bad Name", value: "x"), "not a valid HTTP header name"),
        (HTTPHeaderField(name: "Host", value: "x"), "not allowed"),
    ])
    func badHeadersAreInvalidJobs(field: HTTPHeaderField, reason: String) throws {
        let allowed = Self.allowed.union(["host"])
        let error = JobError(try #require(RequestHeaders.checkJobHeaders([field], allowed: allowed)))
        #expect(error.code == .invalidJob)
        #expect(error.message.contains(reason), "\(error.message)")
        #expect(!error.message.contains("X-Injected"))
    }

    @Test func tooManyOrRepeatedHeadersAreInvalidJobs() {
        let many = (0...16).map { HTTPHeaderField(name: "X-\($0)", value: "v") }
        #expect(RequestHeaders.checkJobHeaders(many, allowed: Set(many.map { $0.name.lowercased() })) == .tooMany)
        let twice = [HTTPHeaderField(name: "Referer", value: "a"), HTTPHeaderField(name: "REFERER", value: "b")]
        #expect(RequestHeaders.checkJobHeaders(twice, allowed: Self.allowed) == .repeated(name: "REFERER"))
    }

    @Test func jobHeadersReplaceOrRemoveConfiguredOnes() {
        let configured = [
            HTTPHeaderField(name: "Referer", value: "https://a/"), HTTPHeaderField(name: "X-Key", value: "k"),
        ]
        #expect(RequestHeaders.lines(configured: [], job: []) == [])
        #expect(RequestHeaders.lines(configured: configured, job: []) == ["Referer: https://a/", "X-Key: k"])
        #expect(
            RequestHeaders.lines(configured: configured, job: [HTTPHeaderField(name: "referer", value: "https://b/")])
                == ["X-Key: k", "referer: https://b/"])
        #expect(
            RequestHeaders.lines(configured: configured, job: [HTTPHeaderField(name: "Referer", value: "")]) == [
                "X-Key: k"
            ])
    }
}

@Suite struct JobHeadersTests {
    func delivery(_ body: String) -> Delivery {
        Delivery(tag: 1, epoch: 1, redelivered: false, properties: AMQPProperties(), body: Array(body.utf8))
    }

    @Test func headersAreDecodedAndChecked() throws {
        let body =
            #"{"id":"h1","url":"https://example.com/a.png","headers":{"Referer":"https://shop.example/","Authorization":"Bearer x"}}"#
        let job = try Job.decode(delivery(body), allowedHeaders: ["referer", "authorization"]).get()
        #expect(
            job.headers == [
                HTTPHeaderField(name: "Authorization", value: "Bearer x"),
                HTTPHeaderField(name: "Referer", value: "https://shop.example/"),
            ])
        // fetch.job_headers is empty by default: a job that sends headers is refused, not ignored.
        guard case .failure(let error) = Job.decode(delivery(body)) else {
            Issue.record("headers were accepted without fetch.job_headers")
            return
        }
        #expect(error.code == .invalidJob)
    }

    @Test(arguments: [
        #"{"id":"h","url":"http://x/","headers":{"Referer":"a\r\nX-Evil: 1"}}"#,
        #"{"id":"h","url":"http://x/","headers":{"Referer":"a\nb"}}"#,
        #"{"id":"h","url":"http://x/","headers":{"Referer":7}}"#,
        #"{"id":"h","url":"http://x/","headers":"Referer: a"}"#,
        #"{"id":"h","url":"http://x/","headers":["Referer: a"]}"#,
    ])
    func badHeadersMakeAnInvalidJob(body: String) {
        guard case .failure(let error) = Job.decode(delivery(body), allowedHeaders: ["referer"]) else {
            Issue.record("accepted: \(body)")
            return
        }
        #expect(error.code == .invalidJob)
    }

    @Test func oversizedValueIsAnInvalidJob() {
        let body =
            #"{"id":"h","url":"http://x/","headers":{"Referer":""# + String(repeating: "a", count: 5000) + #""}}"#
        guard case .failure(let error) = Job.decode(delivery(body), allowedHeaders: ["referer"]) else {
            Issue.record("an oversized value was accepted")
            return
        }
        #expect(error.code == .invalidJob)
    }

    @Test func nullOrEmptyHeadersStayOnTheFastPath() throws {
        #expect(JobBodyScanner.scan(Array(#"{"id":"a","url":"http://x/","headers":null}"#.utf8)) != nil)
        #expect(JobBodyScanner.scan(Array(#"{"id":"a","url":"http://x/","headers":{}}"#.utf8)) == nil)
        #expect(try Job.decode(delivery(#"{"id":"a","url":"http://x/","headers":{}}"#)).get().headers == [])
    }
}
