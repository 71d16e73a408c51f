import Testing

@testable import ImageFetchWorker

@Suite("AMQPURL parsing")
struct AMQPURLTests {
    @Test func parsesEveryPart() throws {
        let url = try AMQPURL(parsing: "amqp://alice:s%40cret@broker.example:5673/%2F")
        #expect(
            url
                == AMQPURL(
                    tls: false, host: "broker.example", port: 5673, user: "alice", password: "s@cret", vhost: "/"))
    }

    /// Issue 33: a password that begins with a combining mark made `:` and the mark one
    /// `Character`, so no `:` was found, the whole user info became the user name (shown in logs
    /// and errors), and the password silently became the default.
    @Test func aPasswordStartingWithACombiningMarkStaysThePassword() throws {
        let url = try AMQPURL(parsing: "amqp://guest:\u{0301}s3cr3tpw@127.0.0.1:5699/")
        #expect(url.user == "guest")
        #expect(url.password == "\u{0301}s3cr3tpw")
        #expect(!url.description.contains("s3cr3tpw"))
        #expect(!AMQPURL.redacting("amqp://guest:\u{0301}s3cr3tpw@127.0.0.1:5699/").contains("s3cr3tpw"))
    }

    /// Issue 33: rabbitmq-c takes C strings, so `us%00er` logged in as `us`, silently.
    @Test(arguments: ["amqp://us%00er:pw@h/", "amqp://u:p%00w@h/", "amqp://u:pw@h/v%00h"])
    func aNULInTheUserInfoOrVhostIsRefused(_ text: String) {
        #expect(throws: ConfigurationError.self) { try AMQPURL(parsing: text) }
    }

    @Test func defaultURLRoundTrips() throws {
        #expect(try AMQPURL(parsing: "amqp://guest:guest@localhost:5672/%2F") == .default)
        #expect(AMQPURL.default.description == "amqp://guest:***@localhost:5672/%2F")
    }

    @Test(arguments: ["amqp://h", "amqp://h/", "amqp://h/%2F", "amqp://h/%2f"])
    func rootVhost(_ text: String) throws {
        #expect(try AMQPURL(parsing: text).vhost == "/")
    }

    @Test func customVhost() throws {
        #expect(try AMQPURL(parsing: "amqp://h/orders").vhost == "orders")
        #expect(try AMQPURL(parsing: "amqp://h/team%2Forders").vhost == "team/orders")
    }

    @Test func defaultsWithoutUserInfoOrPort() throws {
        let url = try AMQPURL(parsing: "amqp://rabbit")
        #expect(url.user == "guest")
        #expect(url.password == "guest")
        #expect(url.port == 5672)
        #expect(url.tls == false)
    }

    @Test func amqpsDefaultsToPort5671() throws {
        let url = try AMQPURL(parsing: "AMQPS://u:p@secure.example/")
        #expect(url.tls)
        #expect(url.port == 5671)
        #expect(try AMQPURL(parsing: "amqps://secure.example:9999").port == 9999)
    }

    @Test func ipv6Host() throws {
        let url = try AMQPURL(parsing: "amqp://u:p@[::1]:5673/")
        #expect(url.host == "::1")
        #expect(url.port == 5673)
        #expect(url.description == "amqp://u:***@[::1]:5673/%2F")
        #expect(try AMQPURL(parsing: "amqps://[fd00::5]").port == 5671)
    }

    @Test(arguments: ["amqp://", "amqp://u:p@", "amqp://u:p@:5672/", "amqp:///vhost"])
    func missingHost(_ text: String) {
        let error = #expect(throws: ConfigurationError.self) { try AMQPURL(parsing: text) }
        #expect(error?.key == "amqp.url")
        #expect(error?.problem.contains("host") == true)
    }

    @Test(arguments: ["http://u:p@h/", "amqpx://h", "h:5672", "rabbit.example"])
    func badScheme(_ text: String) {
        let error = #expect(throws: ConfigurationError.self) { try AMQPURL(parsing: text) }
        #expect(error?.key == "amqp.url")
        #expect(error?.problem.contains("amqp://") == true)
    }

    @Test(arguments: ["amqp://h:0", "amqp://h:65536", "amqp://h:port", "amqp://h:", "amqp://h:-1", "amqp://h:+80"])
    func badPort(_ text: String) {
        let error = #expect(throws: ConfigurationError.self) { try AMQPURL(parsing: text) }
        #expect(error?.key == "amqp.url")
        #expect(error?.problem.contains("port") == true)
    }

    @Test(arguments: [
        "amqp://h/a/b", "amqp://h/%zz", "amqp://[::1", "amqp://[nothost]:5672", "amqp://::1:5672",
        "amqp://h?heartbeat=10", "amqp://h#x", "amqp://bad host/", "",
    ])
    func otherMalformedURLs(_ text: String) {
        let error = #expect(throws: ConfigurationError.self) { try AMQPURL(parsing: text) }
        #expect(error?.key == "amqp.url")
    }

    @Test(arguments: [
        "amqp://alice:hunter2@h:notaport/",
        "http://alice:hunter2@h/",
        "amqp://alice:hunter2@h/a/b",
        "amqp://alice:hunter2@bad host/",
        "amqp://alice:hunter2@/",
        "amqp://alice:hunter2%zz@h/",
        "amqp://alice:hunter2/h",
        "amqp://alice:hunter2",
        "alice:hunter2@h",
    ])
    func errorsNeverShowThePassword(_ text: String) {
        let error = #expect(throws: ConfigurationError.self) { try AMQPURL(parsing: text) }
        #expect(error?.description.contains("hunter2") == false)
        #expect(error?.description.contains("configuration error: amqp.url: ") == true)
    }

    @Test func commaSeparatedList() throws {
        let urls = try AMQPURL.parseList(" amqp://a:1/, amqps://u:p@b/vh ,,amqp://[::1]")
        #expect(urls.map(\.host) == ["a", "b", "::1"])
        #expect(urls.map(\.port) == [1, 5671, 5672])
        #expect(urls[1].vhost == "vh")
    }

    @Test func emptyListIsAnError() {
        let error = #expect(throws: ConfigurationError.self) { try AMQPURL.parseList(" , ") }
        #expect(error?.key == "amqp.url")
    }

    @Test func listErrorHidesPasswordWithAComma() {
        let error = #expect(throws: ConfigurationError.self) {
            try AMQPURL.parseList("amqp://u:hun,ter2@h/")
        }
        #expect(error?.description.contains("hun") == false)
        #expect(error?.description.contains("ter2") == false)
    }

    @Test func redactingHidesPasswords() {
        #expect(AMQPURL.redacting("amqp://u:p@h/,amqps://v:q@@i/") == "amqp://u:***@h/,amqps://v:***@i/")
        #expect(AMQPURL.redacting("amqp://h:5672/") == "amqp://h:5672/")
    }
}
