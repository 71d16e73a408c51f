/// The tenant level of admission (docs/scheduling.md, "Tenants"): which tenant a free permit goes
/// to, before ``OriginScheduler`` picks among that tenant's origins. Pure state, no I/O and no clock.
///
/// The policy is the one the origins use, one level up: among the tenants that have a job that
/// could start (its origin has room and no pause, and the tenant is under its cap), the one with
/// the fewest jobs running, ties to the one served longest ago. Max-min fair and work-conserving: a
/// tenant alone takes every permit its cap allows, and a tenant that arrives beside a busy one gets
/// every freed permit until both run as many.
///
/// Tenants are kept by slot. Slot 0 is the default tenant and is always there, so a worker whose
/// jobs name no tenant never looks a name up; a named tenant's slot is freed (and reused) once it
/// has nothing running or waiting, so names that come and go do not accumulate.
package struct TenantShares: Sendable {
    package struct Settings: Sendable, Equatable {
        /// The most jobs of one tenant that may run at once; nil: no cap but the global one.
        package var limit: Int?
        /// Caps for named tenants, over ``limit``.
        package var limits: [String: Int]

        package init(limit: Int? = nil, limits: [String: Int] = [:]) {
            self.limit = limit
            self.limits = limits
        }

        func cap(of name: String) -> Int { limits[name] ?? limit ?? Int.max }
    }

    struct Slot: Sendable {
        var name: String
        var cap: Int
        var inFlight = 0
        var waiting = 0
        var lastServed: UInt64 = 0
    }

    package let settings: Settings
    private(set) var slots: [Slot]
    private var slotByName: [String: Int] = [:]
    private var freeSlots: [Int] = []
    /// Tenants with a job waiting.
    package private(set) var waitingTenants = 0
    /// Whether any cap applies: then the one-tenant case checks it too.
    let hasCaps: Bool

    package init(settings: Settings = .init()) {
        self.settings = settings
        self.slots = [Slot(name: Tenant.defaultName, cap: settings.cap(of: Tenant.defaultName))]
        self.hasCaps = settings.limit != nil || !settings.limits.isEmpty
    }

    /// Whether the choice among tenants is no choice: at most one tenant waits and none has a cap.
    /// Then admission is exactly the origins' choice, at the cost it had before tenants.
    @inline(__always)
    var isTrivial: Bool { waitingTenants <= 1 && !hasCaps }

    /// Tenants known now: the default one, and each named one with work.
    package var count: Int { slots.count - freeSlots.count }

    // MARK: - Events

    /// The slot of a job's tenant (nil: the default tenant), taken if the tenant is new.
    package mutating func slot(for name: String?) -> Int {
        guard let name, name != Tenant.defaultName else { return 0 }
        if let slot = slotByName[name] { return slot }
        let entry = Slot(name: name, cap: settings.cap(of: name))
        let slot: Int
        if let free = freeSlots.popLast() {
            slot = free
            slots[slot] = entry
        } else {
            slot = slots.count
            slots.append(entry)
        }
        slotByName[name] = slot
        return slot
    }

    /// A job of the tenant now waits.
    @inline(__always)
    package mutating func enqueued(_ slot: Int) {
        slots[slot].waiting += 1
        if slots[slot].waiting == 1 { waitingTenants += 1 }
    }

    /// A waiting job of the tenant left without starting (deferral, hand-back).
    package mutating func left(_ slot: Int) {
        slots[slot].waiting -= 1
        if slots[slot].waiting == 0 { waitingTenants -= 1 }
        release(slot)
    }

    /// A waiting job of the tenant started; `served` orders the tenants served longest ago first.
    @inline(__always)
    package mutating func started(_ slot: Int, served: UInt64) {
        slots[slot].waiting -= 1
        if slots[slot].waiting == 0 { waitingTenants -= 1 }
        slots[slot].inFlight += 1
        slots[slot].lastServed = served
    }

    /// A running job of the tenant finished.
    @inline(__always)
    package mutating func finished(_ slot: Int) {
        guard slot < slots.count, slots[slot].inFlight > 0 else { return }
        slots[slot].inFlight -= 1
        if slots[slot].inFlight == 0 { release(slot) }
    }

    /// Frees a named tenant's slot once it has no work; a fresh slot that never got a job goes too.
    package mutating func release(_ slot: Int) {
        guard slot != 0, slots[slot].inFlight == 0, slots[slot].waiting == 0,
            slotByName.removeValue(forKey: slots[slot].name) != nil
        else { return }
        freeSlots.append(slot)
    }

    // MARK: - The choice

    /// Whether the tenant may start one more job.
    @inline(__always)
    package func hasRoom(_ slot: Int) -> Bool {
        slots[slot].inFlight < slots[slot].cap
    }

    /// Whether tenant `slot` should get the permit before tenant `other`: fewer running, then
    /// served longer ago.
    package func precedes(_ slot: Int, _ other: Int) -> Bool {
        (slots[slot].inFlight, slots[slot].lastServed) < (slots[other].inFlight, slots[other].lastServed)
    }

    /// The name of a slot's tenant.
    package func name(of slot: Int) -> String { slots[slot].name }

    /// Each known tenant's running and waiting jobs, the default one first; for metrics.
    package func snapshot() -> [(tenant: String, inFlight: Int, waiting: Int)] {
        var result: [(tenant: String, inFlight: Int, waiting: Int)] = []
        for (index, slot) in slots.enumerated() where index == 0 || slotByName[slot.name] == index {
            result.append((slot.name, slot.inFlight, slot.waiting))
        }
        return result
    }
}
