import Synchronization

/// The opt-in per-tenant metrics (`metrics.tenants`, docs/scheduling.md, "Tenants"): jobs started
/// per tenant, and each tenant's running and waiting jobs at the scrape.
///
/// Tenant names come from the jobs, so they are unbounded: the first `maxLabels` names seen get a
/// label of their own, for the life of the process, and every later one counts as `other`. So a
/// scrape has at most `maxLabels + 1` series per metric, whatever the producers send.
package final class TenantMetrics: Sendable {
    /// The label every tenant past the first `maxLabels` shares.
    package static let otherLabel = "other"

    private struct State {
        var started: [String: UInt64] = [:]
    }

    package let maxLabels: Int
    private let state = Mutex(State())

    package init(maxLabels: Int) {
        self.maxLabels = maxLabels
    }

    /// A job of `tenant` (nil: the default tenant) started its fetch.
    package func started(_ tenant: String?) {
        state.withLock { state in
            let label = Self.label(for: tenant ?? Tenant.defaultName, in: state.started, maxLabels: maxLabels)
            state.started[label, default: 0] += 1
        }
    }

    private static func label(for name: String, in known: [String: UInt64], maxLabels: Int) -> String {
        if known[name] != nil { return name }
        let own = known.count - (known[otherLabel] == nil ? 0 : 1)
        return own < maxLabels && name != otherLabel ? name : otherLabel
    }

    /// The exposition text, with `tenants` the scheduler's tenants now (``Admission/tenants()``).
    package func render(_ tenants: [(tenant: String, inFlight: Int, waiting: Int)]) -> [UInt8] {
        // A tenant seen first waiting, before any of its jobs started, takes its label now.
        let started = state.withLock { state in
            for tenant in tenants {
                let label = Self.label(for: tenant.tenant, in: state.started, maxLabels: maxLabels)
                if state.started[label] == nil { state.started[label] = 0 }
            }
            return state.started
        }
        var running: [String: Int] = [:]
        var waiting: [String: Int] = [:]
        for tenant in tenants {
            let label = Self.label(for: tenant.tenant, in: started, maxLabels: maxLabels)
            running[label, default: 0] += tenant.inFlight
            waiting[label, default: 0] += tenant.waiting
        }
        let labels = started.keys.sorted()
        var text = "# HELP image_fetch_tenant_jobs_started_total Jobs whose fetch started, by tenant.\n"
        text += "# TYPE image_fetch_tenant_jobs_started_total counter\n"
        for label in labels {
            text += "image_fetch_tenant_jobs_started_total{tenant=\"\(label)\"} \(started[label] ?? 0)\n"
        }
        text += "# HELP image_fetch_tenant_jobs Jobs held by admission, by tenant and state, as of the scrape.\n"
        text += "# TYPE image_fetch_tenant_jobs gauge\n"
        for label in labels {
            text += "image_fetch_tenant_jobs{tenant=\"\(label)\",state=\"running\"} \(running[label] ?? 0)\n"
            text += "image_fetch_tenant_jobs{tenant=\"\(label)\",state=\"waiting\"} \(waiting[label] ?? 0)\n"
        }
        return Array(text.utf8)
    }
}
