import Testing

@testable import ImageFetchWorker

/// The fast path of URL validation (`URLPolicy+Canonical.swift`) against the full parse: whatever
/// the fast path accepts, the full parse must accept as the very same URL.
@Suite struct URLPolicyCanonicalTests {
    /// URLs as jobs carry them, which the fast path must take.
    static let ordinary = [
        "http://127.0.0.1:8080/a.png",
        "http://127.0.0.1:19688/png32.png?j=41",
        "https://o17.bench.test/img/12.jpg?j=5",
        "https://images.example.org/a/b.png?size=large&x=%2F%20",
        "http://my_host.internal/x",
        "https://cdn-3.example.com:8443/p/q.webp",
        "http://0.0.0.0/",
        "http://255.255.255.255:65535/x",
        "http://example.com/@user/pic.png?by=a@b",
        "https://a.b.c.d.e/?",
    ]

    /// Inputs near the edges of every rule, most of them for the full parse to decide.
    static let edges = [
        "HTTPS://Example.com/x", "http://example.com", "http://example.com?q=1", "http://example.com/a#frag",
        "http://example.com:/a", "http://example.com:0080/a", "http://example.com./", "http://10.0.0.1./x",
        "http://0x7f000001:8080/", "http://2130706433:8080/", "http://0177.0.0.1/", "http://127.1/",
        "http://127.0.1/", "http://0/", "http://4294967295/", "http://169.254.43518/", "http://[::1]:8080/",
        "http://user:pw@host/", "http://@host/", "http://host:80@evil/", "http://", "http:///path",
        "http://:80/", "http://?x", "http://#x", "http://example.com:65536/", "http://example.com:0/",
        "http://example.com:65535/", "http://example.com:99999/", "http://example.com:123456/",
        "http://xn--ls8h.example/", "http://a.xn--ls8h/", "http://axn--b.example/", "http://ex%61mple.com/",
        "http://example.com\\@evil/", "http://a..b/", "http://./", "http://.a/", "http://1.2.3.256/",
        "http://256.0.0.1/", "http://1.2.3.4.5/", "http://08.0.0.1/", "http://01.2.3.4/", "http://1.2.3/",
        "http://example.123/", "http://1..2/", "http://0x/", "http://1.0x/", "http://a.1/", "http://1a/",
        "http://example.com/bild/größe.jpg", "http://example.com/a b", "http://example.com/\u{7F}",
        "ftp://example.com/", "httpx://example.com/", "http:/example.com/", "https:example.com/",
    ]

    private static func agree(_ input: String) -> Bool {
        guard let fast = URLPolicy.canonical(input) else { return true }
        return URLPolicy.validateFully(input) == .success(fast)
    }

    @Test(arguments: ordinary)
    func ordinaryURLsTakeTheFastPath(input: String) {
        let fast = URLPolicy.canonical(input)
        #expect(fast != nil)
        #expect(fast.map { URLPolicy.validateFully(input) == .success($0) } == true)
    }

    @Test(arguments: edges)
    func theFastPathAgreesAtTheEdges(input: String) {
        #expect(Self.agree(input))
    }

    @Test func theFastPathAgreesOnRandomMutations() {
        var generator = SplitMix64(state: 33)
        let alphabet: [String] = [
            "a", "A", "z", "0", "1", "9", "x", "n", "-", "_", ".", ":", "/", "?", "#", "@", "[", "]", "%",
            "\\", " ", "é", "\u{7F}", "\t",
        ]
        let seeds = Self.ordinary + Self.edges
        var accepted = 0
        for _ in 0..<30_000 {
            var characters = Array(seeds.randomElement(using: &generator) ?? "")
            for _ in 0..<Int.random(in: 1...3, using: &generator) {
                let position = Int.random(in: 0...characters.count, using: &generator)
                let character = Character(alphabet.randomElement(using: &generator) ?? "a")
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: characters.insert(character, at: position)
                case 1 where position < characters.count: characters[position] = character
                default: if position < characters.count { characters.remove(at: position) }
                }
            }
            let input = String(characters)
            if URLPolicy.canonical(input) != nil { accepted += 1 }
            #expect(Self.agree(input), "\(input)")
        }
        // Mutations of canonical URLs are often canonical still: the comparison saw both paths.
        #expect(accepted > 1_000)
    }
}
