import HTTPDNS
import NIOCore
import Synchronization

/// What the service learned about names asked on behalf of client networks (EDNS Client Subnet, RFC 7871 §7.3).
///
/// Per name and family it holds one of two things:
/// - **the same for every client**: the upstream answered with scope 0 (or without ECS), so the resolver's shared
///   cache answers everyone, until that answer's TTL ends (then it is checked again in the background while the
///   shared answer is still served);
/// - **answers by network**: each with the network it holds for (the client's subnet cut to the scope the upstream
///   returned) and its expiry. A client gets one only when its own subnet, as long as it was sent, lies inside that
///   network: one network's answer is never served to another. An answer asked for a network a client chose
///   wider than the configured prefix (RFC 7871 §11.3: a client may state any network) serves only askers who
///   state that same network, so one client cannot choose the answers of networks it does not belong to.
///
/// Bounded: at most ``Limits/maximumNetworksPerName`` networks a name (the least recently used goes) and
/// ``Limits/maximumNames`` names: the name that entered the table first goes, unless it was looked up since it entered
/// or since it was last passed over, then it goes to the back of the queue once (a "second chance", so a popular name
/// is not asked upstream again each time the queue turns over), at most ``secondChances`` names passed over per
/// eviction: O(1), never a scan of the table under the lock every lookup takes. ``generation`` grows whenever a
/// name turns from shared to by-network, so encoded answers kept for the shared case (`AnswerMemo`) end at once.
final class ClientSubnetCache: Sendable {
    struct Limits: Sendable, Hashable {
        var maximumNames = 10_000
        var maximumNetworksPerName = 64
    }

    struct Key: Hashable {
        var name: String
        var family: AddressFamily
    }

    /// What a lookup found.
    enum Lookup {
        /// Ask the shared cache; `revalidate` when the upstream should be asked again (in the background) whether
        /// the name is still the same for every network.
        case shared(revalidate: Bool)
        /// An answer for the client's network, with the scope it holds for and its remaining TTL; `prefetch` when it
        /// is in the last tenth of its TTL and this lookup is the one to ask again in the background (once).
        case answer(RankedResolution, scope: Int, ttl: UInt32, prefetch: Bool)
        /// Nothing known for this network: ask the upstream with the client's subnet.
        case miss
    }

    private struct Entry {
        var network: IPNetwork
        /// The network a client chose wider than the configured prefix, when the answer was asked for one: then
        /// only askers stating that network get it.
        var chosen: IPNetwork?
        var answer: RankedResolution
        var expires: ContinuousClock.Instant
        var used: ContinuousClock.Instant
        var prefetching = false

        /// Whether a client asking for `subnet` may be given this answer.
        func serves(_ subnet: IPNetwork) -> Bool {
            chosen.map { $0 == subnet } ?? network.contains(subnet)
        }
    }

    private enum State {
        case shared(until: ContinuousClock.Instant, revalidating: Bool)
        case byNetwork([Entry])
    }

    let limits: Limits
    /// The names and the order they entered the table in; every name in `states` is in `order` once. The names
    /// with answers by network, and their networks, are counted as states change (`/metrics` reads them after
    /// every answer kept, so a scan of the table there would cost a miss O(names)).
    private struct Table {
        struct Slot {
            var state: State
            /// Looked up since it entered the queue or was last passed over.
            var referenced = false
        }

        private(set) var states: [Key: Slot] = [:]
        var order = CircularBuffer<Key>()
        private(set) var byNetworkNames = 0
        private(set) var byNetworkNetworks = 0

        subscript(key: Key) -> State? {
            get { states[key]?.state }
            set {
                guard let newValue else {
                    if let old = states.removeValue(forKey: key) { count(old.state, -1) }
                    return
                }
                if update(key, { $0.state = newValue }) == nil {
                    order.append(key)
                    states[key] = Slot(state: newValue)
                    count(newValue, 1)
                }
            }
        }

        /// Runs `body` on the slot of `key` in place (one hash of the name; an answer list taken out of the state
        /// while it changes is not copied), keeping the counts; `nil` when the name is not in the table.
        mutating func update<Result>(_ key: Key, _ body: (inout Slot) -> Result) -> Result? {
            guard let index = states.index(forKey: key) else { return nil }
            count(states.values[index].state, -1)
            let result = body(&states.values[index])
            count(states.values[index].state, 1)
            return result
        }

        private mutating func count(_ state: State, _ sign: Int) {
            guard case .byNetwork(let entries) = state else { return }
            byNetworkNames += sign
            byNetworkNetworks += sign * entries.count
        }

        /// Takes the oldest name off the queue: `false` when it was referenced (its flag is cleared then).
        mutating func takeOldest() -> (key: Key, referenced: Bool)? {
            guard let oldest = order.popFirst() else { return nil }
            let referenced = update(oldest) { slot in
                defer { slot.referenced = false }
                return slot.referenced
            }
            return (oldest, referenced ?? false)
        }

        var count: Int { states.count }

        /// Whether `key` is in the table (its slot is not copied).
        func contains(_ key: Key) -> Bool { states.index(forKey: key) != nil }

        /// Removes every name `matches` says, from the table and the queue (so each name stays in it once);
        /// returns how many. O(names): for an operator's flush, not for lookups.
        mutating func removeAll(where matches: (String) -> Bool) -> Int {
            let keys = states.keys.filter { matches($0.name) }
            guard !keys.isEmpty else { return 0 }
            for key in keys { self[key] = nil }
            let left = order.filter { states.index(forKey: $0) != nil }
            order = CircularBuffer(left)
            return keys.count
        }
    }

    private let table = Locked(Table())
    private let changes = Atomic<UInt64>(0)

    init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// Grows whenever a name stops being the same for every network.
    var generation: UInt64 { changes.load(ordering: .acquiring) }

    /// Removes every name `matches` says, both families, and ends the answers kept for them elsewhere
    /// (``generation``); returns how many names and families were removed.
    func remove(where matches: (String) -> Bool) -> Int {
        let removed = table.withLock { $0.removeAll(where: matches) }
        if removed > 0 { changes.add(1, ordering: .releasing) }
        return removed
    }

    /// Names with answers by network now, and the networks they hold (for `/metrics`).
    var size: (names: Int, networks: Int) {
        table.withLock { ($0.byNetworkNames, $0.byNetworkNetworks) }
    }

    /// What is known of `name` for clients in `subnet`.
    func lookup(_ key: Key, subnet: IPNetwork, now: ContinuousClock.Instant) -> Lookup {
        table.withLock { table in
            table.update(key) { slot -> Lookup in
                switch slot.state {
                case .shared(let until, let revalidating):
                    slot.referenced = true
                    guard until <= now, !revalidating else { return .shared(revalidate: false) }
                    // One background check at a time: later lookups keep the shared answer until it reports.
                    slot.state = .shared(until: until, revalidating: true)
                    return .shared(revalidate: true)
                case .byNetwork(var entries):
                    // Taken out while it changes, so the list is changed in place, not copied.
                    slot.state = .byNetwork([])
                    defer { slot.state = .byNetwork(entries) }
                    var best: Int?
                    for index in entries.indices where entries[index].serves(subnet) {
                        if best.map({ entries[index].network.prefixLength > entries[$0].network.prefixLength })
                            ?? true
                        {
                            best = index
                        }
                    }
                    guard let best, entries[best].expires > now else { return .miss }
                    slot.referenced = true
                    entries[best].used = now
                    let remaining = entries[best].expires - now
                    // Hot names stay hot: the first lookup in the last tenth of the TTL asks again in the background.
                    let prefetch =
                        !entries[best].prefetching && remaining * 10 <= .seconds(Int64(entries[best].answer.ttl))
                    if prefetch { entries[best].prefetching = true }
                    return .answer(
                        entries[best].answer, scope: entries[best].network.prefixLength,
                        ttl: UInt32(clamping: remaining.components.seconds), prefetch: prefetch)
                }
            } ?? .miss
        }
    }

    /// The least time a name stays marked shared before it is checked again, whatever its TTL (an answer with
    /// TTL 0 would otherwise be checked on every query).
    static let minimumSharedTime: Duration = .seconds(5)

    /// Whether `address` is in an answer kept for clients in `subnet` (a client may report on it).
    func answered(_ key: Key, subnet: IPNetwork, address: IPAddress) -> Bool {
        table.withLock { table in
            guard case .byNetwork(let entries) = table[key] else { return false }
            return entries.contains { entry in
                entry.serves(subnet) && entry.answer.addresses.contains { $0.ip == address }
            }
        }
    }

    /// Records that `key` has the same answer for every network, for `ttl` seconds (at least
    /// ``minimumSharedTime``).
    func keepShared(_ key: Key, ttl: UInt32, now: ContinuousClock.Instant) {
        table.withLock { table in
            makeRoom(&table, for: key, now: now)
            table[key] = .shared(until: now + max(.seconds(Int64(ttl)), Self.minimumSharedTime), revalidating: false)
        }
    }

    /// Keeps `answer`, which holds for clients in `network` (the client's subnet cut to the upstream's scope);
    /// `chosen` is the network the client stated when it was wider than the configured prefix (the answer then
    /// serves only askers stating the same).
    func keep(
        _ key: Key, network: IPNetwork, chosen: IPNetwork? = nil, answer: RankedResolution,
        now: ContinuousClock.Instant
    ) {
        let entry = Entry(
            network: network, chosen: chosen, answer: answer, expires: now + .seconds(Int64(answer.ttl)), used: now)
        let turned = table.withLock { table -> Bool in
            makeRoom(&table, for: key, now: now)
            guard case .byNetwork(var entries) = table[key] else {
                // A network one client chose does not end what holds for everyone else.
                if chosen != nil, table[key] != nil { return false }
                let wasShared = table[key] != nil
                table[key] = .byNetwork([entry])
                return wasShared
            }
            entries.removeAll { ($0.network == network && $0.chosen == chosen) || $0.expires <= now }
            if entries.count >= limits.maximumNetworksPerName,
                let oldest = entries.indices.min(by: { entries[$0].used < entries[$1].used })
            {
                entries.remove(at: oldest)
            }
            entries.append(entry)
            table[key] = .byNetwork(entries)
            return false
        }
        if turned { changes.add(1, ordering: .releasing) }
    }

    /// Ends a background check that found nothing (the upstream failed): the shared answer stays and is checked
    /// again on a later lookup.
    func revalidationFailed(_ key: Key) {
        table.withLock { table in
            if case .shared(let until, true) = table[key] { table[key] = .shared(until: until, revalidating: false) }
        }
    }

    /// The most names passed over (sent to the back of the queue) to make room for one.
    static let secondChances = 8

    private func makeRoom(_ table: inout Table, for key: Key, now: ContinuousClock.Instant) {
        guard table.count >= limits.maximumNames, !table.contains(key) else { return }
        var passedOver = 0
        while let (oldest, referenced) = table.takeOldest() {
            if passedOver < Self.secondChances, referenced {
                table.order.append(oldest)
                passedOver += 1
                continue
            }
            table[oldest] = nil
            return
        }
    }
}
