import Testing

@testable import ImageFetchWorker

/// `fetch.robots` and `fetch.opt_out.*` as the loader reads them, and the one line a bad value gets.
@Suite struct OptOutConfigTests {
    private func problem(_ environment: [String: String]) -> String {
        ConfigurationLoader.problem([], environment)
    }

    @Test func valuesFromTheEnvironment() throws {
        let fetch = try ConfigurationLoader.load(
            arguments: [],
            environment: [
                "FETCH_ROBOTS": "respect", "FETCH_OPT_OUT_DIRECTIVES": "NoAI, noimageai",
                "FETCH_OPT_OUT_TDM_RESERVATION": "no",
                "FETCH_OPT_OUT_USER_AGENT": "My_Bot", "FETCH_OPT_OUT_ROBOTS_TTL": "1h",
                "FETCH_OPT_OUT_ROBOTS_ERROR_TTL": "30s",
                "FETCH_OPT_OUT_ROBOTS_MAX_ORIGINS": "50",
            ]
        ).fetch
        #expect(fetch.robots == .respect)
        #expect(fetch.optOut.directives == ["noai", "noimageai"])
        #expect(!fetch.optOut.tdmReservation)
        #expect(fetch.optOut.userAgent == "My_Bot")
        #expect(
            fetch.optOut.robotsTTL == 3600 && fetch.optOut.robotsErrorTTL == 30 && fetch.optOut.robotsMaxOrigins == 50)
    }

    @Test func anEmptyListAndNoTDMTurnTheHeaderChecksOff() throws {
        let fetch = try ConfigurationLoader.load(
            arguments: [], environment: ["FETCH_OPT_OUT_DIRECTIVES": "", "FETCH_OPT_OUT_TDM_RESERVATION": "false"]
        ).fetch
        #expect(fetch.optOut.directives.isEmpty)
        #expect(fetch.optOut.policy == nil)
    }

    @Test func badValuesAreRefusedWithTheKey() {
        #expect(problem(["FETCH_ROBOTS": "maybe"]).contains("fetch.robots"))
        #expect(problem(["FETCH_OPT_OUT_USER_AGENT": "bot/1.0"]).contains("product token"))
        #expect(problem(["FETCH_OPT_OUT_DIRECTIVES": "noai, no ai"]).contains("fetch.opt_out.directives"))
        #expect(problem(["FETCH_OPT_OUT_ROBOTS_TTL": "0"]).contains("fetch.opt_out.robots_ttl"))
        #expect(problem(["FETCH_OPT_OUT_ROBOTS_MAX_ORIGINS": "0"]).contains("fetch.opt_out.robots_max_origins"))
    }
}
