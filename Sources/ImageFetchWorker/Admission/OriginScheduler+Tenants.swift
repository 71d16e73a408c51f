import NIOCore

/// The tenant level of the choice (docs/scheduling.md, "Tenants"), taken only when jobs of more than
/// one tenant wait or some tenant has a cap: first the tenant, by ``TenantShares``, then the fairest
/// of its origins, as ``OriginScheduler/next(now:)`` picks among all origins, and that origin's
/// oldest job of the tenant.
///
/// An origin keeps one queue in arrival order, whatever the tenants of its jobs, so that the window
/// and the origin's limit see the origin as before. So the choice reads the waiting jobs of the
/// origins that could start one: a scan of at most the prefetch window per start, paid only while
/// tenants compete.
extension OriginScheduler {
    mutating func hasStartableOfTenants(now: UInt64) -> Bool {
        let (settings, tenants) = (self.settings, self.tenants)
        for origin in backlogged {
            guard let index = origins.index(forKey: origin) else { continue }
            let startable = Self.peek(&origins.values[index]) { state in
                Self.canStart(state, now: now, settings: settings)
                    && state.waiting.contains { tenants.hasRoom($0.tenant) }
            }
            if startable { return true }
        }
        return false
    }

    mutating func nextOfTenants(now: UInt64) -> Start? {
        let (settings, tenants) = (self.settings, self.tenants)
        // The tenant: among those with a job that could start now.
        var tenant: Int?
        for origin in backlogged {
            guard let index = origins.index(forKey: origin) else { continue }
            Self.peek(&origins.values[index]) { state in
                guard Self.canStart(state, now: now, settings: settings) else { return }
                for entry in state.waiting where entry.tenant != tenant && tenants.hasRoom(entry.tenant) {
                    if let current = tenant, !tenants.precedes(entry.tenant, current) { continue }
                    tenant = entry.tenant
                }
            }
        }
        guard let tenant else { return nil }
        // Its origin: the fewest running, ties to the one served longest ago.
        var best: (place: Int, position: CircularBuffer<Entry>.Index, inFlight: Int, lastServed: UInt64)?
        for (place, origin) in backlogged.enumerated() {
            guard let index = origins.index(forKey: origin) else { continue }
            let candidate = Self.peek(&origins.values[index]) { state -> (CircularBuffer<Entry>.Index, Int, UInt64)? in
                guard Self.canStart(state, now: now, settings: settings) else { return nil }
                if let current = best, (current.inFlight, current.lastServed) <= (state.inFlight, state.lastServed) {
                    return nil
                }
                guard let position = state.waiting.firstIndex(where: { $0.tenant == tenant }) else { return nil }
                return (position, state.inFlight, state.lastServed)
            }
            if let (position, inFlight, lastServed) = candidate { best = (place, position, inFlight, lastServed) }
        }
        guard let best else { return nil }
        return start(backlogged: best.place, entryAt: best.position, now: now)
    }
}
