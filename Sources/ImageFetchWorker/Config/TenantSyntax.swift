/// Parsing of the tenant keys, `scheduler.tenant_header` and `scheduler.tenant_limits`. Pure
/// functions of the text.
enum TenantSyntax {
    /// `scheduler.tenant_limits`: comma-separated `tenant=limit` entries, each tenant once.
    static func limits(_ text: String) -> Result<[String: Int], ConfigProblem> {
        var limits: [String: Int] = [:]
        for entry in text.split(separator: ",") {
            let item = ConfigText.trimmed(String(entry))
            if item.isEmpty { continue }
            let parts = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = ConfigText.trimmed(String(parts[0]))
            guard parts.count == 2, Tenant.problem(name) == nil else {
                return .failure(
                    ConfigProblem(
                        "must be comma-separated tenant=limit entries like a=8,b=16 (tenant names of letters, "
                            + "digits, '.', '_', ':' and '-', at most \(Tenant.maxBytes) bytes)"))
            }
            guard let limit = Int(ConfigText.trimmed(String(parts[1]))), (1...4096).contains(limit) else {
                return .failure(ConfigProblem("gives \(name) a limit that is not a whole number from 1 to 4096"))
            }
            guard limits.updateValue(limit, forKey: name) == nil else {
                return .failure(ConfigProblem("names \(name) twice"))
            }
        }
        return .success(limits)
    }

    static func showLimits(_ limits: [String: Int]) -> String? {
        limits.isEmpty ? nil : limits.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
    }

    /// `scheduler.tenant_header`: an AMQP header name, up to 128 bytes without control characters.
    static func headerName(_ text: String) throws(ConfigurationKey.Invalid) -> String {
        try Check.headerSafe(text, limit: 128)
    }
}
