/// The tenant a job belongs to (docs/scheduling.md, "Tenants"): admission is fair between tenants
/// first, then between the origins of each tenant.
///
/// A name is 1 to ``maxBytes`` of `A-Z a-z 0-9 . _ : -`: it goes into logs, a configuration list
/// (`scheduler.tenant_limits`) and, opted in, a metric label, so it is kept plain. A job without
/// one belongs to the default tenant, ``defaultName``; a job that names it explicitly is the same.
package enum Tenant {
    package static let maxBytes = 64
    /// The tenant of jobs that name none.
    package static let defaultName = "default"

    /// Why `name` is not a tenant name, or nil when it is one. Repeats no value.
    package static func problem(_ name: String) -> String? {
        let bytes = name.utf8
        guard !bytes.isEmpty, bytes.count <= maxBytes else { return "must be 1 to \(maxBytes) bytes" }
        guard bytes.allSatisfy(isNameByte) else { return "may hold only letters, digits, '.', '_', ':' and '-'" }
        return nil
    }

    private static func isNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: ":"),
            UInt8(ascii: "-"):
            return true
        default:
            return false
        }
    }

    /// The job's tenant: the body's `tenant`, else the configured header's value; nil (the default
    /// tenant) when neither names one. An empty string counts as absent, as for the validators; a
    /// name that is not one, or a header that is not a string, makes the job `invalid_job`.
    static func read(body: String?, header: AMQPFieldValue?) -> Result<String?, JobError> {
        let name: String
        if let body, !body.isEmpty {
            name = body
        } else if let header {
            guard let text = header.stringValue else {
                return .failure(JobError(.invalidJob, "the job's tenant header is not a string"))
            }
            if text.isEmpty { return .success(nil) }
            name = text
        } else {
            return .success(nil)
        }
        if let problem = problem(name) { return .failure(JobError(.invalidJob, "the job's tenant \(problem)")) }
        return .success(name == defaultName ? nil : name)
    }
}
