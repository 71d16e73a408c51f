import Foundation
import Testing

@testable import ImageFetchWorker

@Suite("fetch.* request controls")
struct FetchControlsConfigTests {
    private func load(_ arguments: [String] = [], _ environment: [String: String] = [:]) throws -> WorkerConfiguration {
        try ConfigurationLoader.load(arguments: arguments, environment: environment)
    }

    private func problem(_ arguments: [String] = [], _ environment: [String: String] = [:]) -> String {
        ConfigurationLoader.problem(arguments, environment)
    }

    @Test func defaultsAreEmpty() throws {
        let fetch = try load().fetch
        #expect(fetch.headers.isEmpty && fetch.jobHeaders.isEmpty && fetch.allowedHosts.isEmpty)
        #expect(fetch.deniedHosts.isEmpty && fetch.resolve.isEmpty)
    }

    @Test func headersAreLinesFromAnyLayer() throws {
        let fromEnvironment = try load([], ["FETCH_HEADERS": "Referer: https://shop.example/a,b\nX-Api-Key:  k1  "])
            .fetch.headers
        #expect(
            fromEnvironment == [
                HTTPHeaderField(name: "Referer", value: "https://shop.example/a,b"),
                HTTPHeaderField(name: "X-Api-Key", value: "k1"),
            ])
        // One flag whose value holds the lines, or the flag repeated, one header each.
        let fromFlags = try load(["--fetch-headers", "A: 1\nB: 3"]).fetch.headers
        #expect(fromFlags.map(\.name) == ["A", "B"])
        #expect(fromFlags.first?.value == "1")
        let repeated = try load([
            "--fetch-headers", "Authorization: Bearer a,b", "--worker-concurrency", "8", "--fetch-headers=Referer: r",
        ]).fetch.headers
        #expect(
            repeated == [
                HTTPHeaderField(name: "Authorization", value: "Bearer a,b"),
                HTTPHeaderField(name: "Referer", value: "r"),
            ])
        #expect(throws: ConfigurationError.self) { try load(["--fetch-headers", "A: 1", "--fetch-headers", "a: 2"]) }
        let file = try ConfigurationLoaderTests.TempFile(
            extension: "yaml",
            contents: "fetch:\n  headers:\n    - \"Authorization: Bearer a,b\"\n    - \"Referer: r\"\n")
        #expect(try load(["--config", file.path]).fetch.headers.map(\.value) == ["Bearer a,b", "r"])
    }

    @Test func headersCanComeFromASecretFile() throws {
        let file = try ConfigurationLoaderTests.TempFile(extension: "txt", contents: "Authorization: Bearer s3cret\n")
        #expect(try load([], ["FETCH_HEADERS_FILE": file.path]).fetch.headers.first?.value == "Bearer s3cret")
    }

    @Test(arguments: [
        ("no colon here", "no ':'"),
        ("Bad Name: x", "not a valid HTTP header name"),
        ("Host: other", "libcurl manages"),
        ("Referer:", "no value"),
        ("A: 1\na: 2", "twice"),
    ])
    func badHeadersStopTheWorker(value: String, expected: String) {
        let text = problem([], ["FETCH_HEADERS": value + "\nAuthorization: Bearer TOPSECRET"])
        #expect(text.contains("fetch.headers"), "\(text)")
        #expect(text.contains(expected), "\(text)")
        #expect(!text.contains("TOPSECRET"))
    }

    @Test func jobHeadersAreLowerCaseNames() throws {
        #expect(
            try load([], ["FETCH_JOB_HEADERS": "Referer, Authorization"]).fetch.jobHeaders == [
                "referer", "authorization",
            ])
        #expect(problem([], ["FETCH_JOB_HEADERS": "Referer, bad name"]).contains("fetch.job_headers"))
        #expect(problem([], ["FETCH_JOB_HEADERS": "Content-Length"]).contains("libcurl manages"))
    }

    @Test func hostListsAreNormalised() throws {
        let fetch = try load(
            [],
            [
                "FETCH_ALLOWED_HOSTS": "Images.Example.com, *.bücher.example, 2001:db8::1",
                "FETCH_DENIED_HOSTS": "*.internal",
            ]
        ).fetch
        #expect(fetch.allowedHosts == ["images.example.com", "*.xn--bcher-kva.example", "[2001:db8::1]"])
        #expect(fetch.deniedHosts == ["*.internal"])
        for bad in ["a.*.example", "*", "exa mple.com", "xn--pple-43d.com"] {
            #expect(problem([], ["FETCH_ALLOWED_HOSTS": bad]).contains("fetch.allowed_hosts"), "\(bad)")
        }
    }

    @Test func resolveEntries() throws {
        #expect(
            try load([], ["FETCH_RESOLVE": "images.test:443:127.0.0.1, v6.test:80:[::1]"]).fetch.resolve
                == ["images.test:443:127.0.0.1", "v6.test:80:[::1]"])
        for bad in ["images.test:443", "images.test:0:127.0.0.1", "images.test:443:localhost", "a b:1:127.0.0.1"] {
            #expect(problem([], ["FETCH_RESOLVE": bad]).contains("fetch.resolve"), "\(bad)")
        }
    }

    @Test func tlsCAFileMustBeReadable() throws {
        #expect(try load().fetch.tls.caFile == nil)
        let path = try TestPEMFiles.shared().ca
        #expect(try load(["--fetch-tls-ca-file", path]).fetch.tls.caFile == path)
        #expect(try load([], ["FETCH_TLS_CA_FILE": path]).fetch.tls.caFile == path)
        let missing = problem([], ["FETCH_TLS_CA_FILE": path + ".missing"])
        #expect(missing.contains("fetch.tls.ca_file") && missing.contains("cannot be read"), "\(missing)")
        #expect(problem([], ["FETCH_TLS_CA_FILE": "/tmp"]).contains("not a regular file"))
    }
}
