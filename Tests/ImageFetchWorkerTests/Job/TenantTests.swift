import Testing

@testable import ImageFetchWorker

@Suite struct TenantTests {
    func delivery(_ body: String, headers: [String: AMQPFieldValue] = [:]) -> Delivery {
        var properties = AMQPProperties()
        properties.headers = headers
        return Delivery(tag: 1, epoch: 1, redelivered: false, properties: properties, body: Array(body.utf8))
    }

    @Test func theBodyNamesTheTenant() throws {
        let job = try Job.decode(delivery(#"{"id":"1","url":"https://a.example/x","tenant":"acme"}"#)).get()
        #expect(job.tenant == "acme")
        // The full decoder too (an escape sends the body to it).
        let escaped = try Job.decode(delivery(#"{"id":"1\u0032","url":"https://a.example/x","tenant":"acme"}"#)).get()
        #expect(escaped.tenant == "acme")
    }

    @Test func theConfiguredHeaderNamesItWhenTheBodyDoesNot() throws {
        let headers: [String: AMQPFieldValue] = ["x-tenant": .string("beta")]
        let body = #"{"id":"1","url":"https://a.example/x"}"#
        #expect(try Job.decode(delivery(body, headers: headers), tenantHeader: "x-tenant").get().tenant == "beta")
        // Not configured: the header is not read.
        #expect(try Job.decode(delivery(body, headers: headers)).get().tenant == nil)
        // The body wins.
        let named = #"{"id":"1","url":"https://a.example/x","tenant":"acme"}"#
        #expect(try Job.decode(delivery(named, headers: headers), tenantHeader: "x-tenant").get().tenant == "acme")
    }

    @Test(arguments: [#""""#, #""default""#, "null"])
    func noTenantIsTheDefaultTenant(_ value: String) throws {
        let job = try Job.decode(delivery(#"{"id":"1","url":"https://a.example/x","tenant":\#(value)}"#)).get()
        #expect(job.tenant == nil)
    }

    @Test(arguments: [
        #""a b""#, #""a/b""#, "\"" + String(repeating: "t", count: 65) + "\"", "7", #"{"x":1}"#, #""caf\u00e9""#,
    ])
    func aBadTenantMakesTheJobInvalid(_ value: String) {
        let result = Job.decode(delivery(#"{"id":"1","url":"https://a.example/x","tenant":\#(value)}"#))
        guard case .failure(let error) = result else {
            Issue.record("accepted tenant \(value)")
            return
        }
        #expect(error.code == .invalidJob)
    }

    @Test func aHeaderThatIsNotANameMakesTheJobInvalid() {
        let body = #"{"id":"1","url":"https://a.example/x"}"#
        for value: AMQPFieldValue in [.int(7), .string("a b")] {
            guard case .failure(let error) = Job.decode(delivery(body, headers: ["t": value]), tenantHeader: "t") else {
                Issue.record("accepted header \(value)")
                continue
            }
            #expect(error.code == .invalidJob)
        }
    }

    @Test func limitsParse() throws {
        #expect(try TenantSyntax.limits(" a=8, b.c:d-e_f=16 ,").get() == ["a": 8, "b.c:d-e_f": 16])
        #expect(TenantSyntax.showLimits(["b": 2, "a": 1]) == "a=1,b=2")
        #expect(TenantSyntax.showLimits([:]) == nil)
    }

    @Test func metricsCapTheLabelsAndFoldTheRestIntoOther() {
        let metrics = TenantMetrics(maxLabels: 2)
        for tenant in [nil, "a", "b", "c", "a", "other"] as [String?] { metrics.started(tenant) }
        let text = String(decoding: metrics.render([("d", 1, 2), ("a", 3, 0)]), as: UTF8.self)
        #expect(text.contains(#"image_fetch_tenant_jobs_started_total{tenant="default"} 1"#))
        #expect(text.contains(#"image_fetch_tenant_jobs_started_total{tenant="a"} 2"#))
        #expect(text.contains(#"image_fetch_tenant_jobs_started_total{tenant="other"} 3"#))
        #expect(!text.contains(#"tenant="b""#))
        #expect(text.contains(#"image_fetch_tenant_jobs{tenant="other",state="waiting"} 2"#))
        #expect(text.contains(#"image_fetch_tenant_jobs{tenant="a",state="running"} 3"#))
    }
}
