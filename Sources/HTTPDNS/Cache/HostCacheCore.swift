import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients
import NIOCore
/// The cache's state and rules as a plain value: no locks, no I/O, time passed in. ``HostCache`` wraps it in a
/// mutex; tests drive it directly with made-up instants.
package struct HostCacheCore: Sendable {
    /// One answer for one host and one asked family.
    struct Answer: Sendable {
        /// The addresses as the source gave them (empty for a negative answer).
        var addresses: [IPAddress]
        /// ``addresses`` ranked, best first; recomputed when scores change.
        var ranked: [RankedAddress]
        /// The error of a negative answer (NXDOMAIN or no data).
        var error: HTTPDNSError?
        var origin: ResolutionSource
        /// The clamped TTL in seconds.
        var ttl: UInt32
        var storedAt: CacheInstant
        var expiresAt: CacheInstant
        /// Fresh hits since the answer was stored; hot answers are refreshed shortly before they expire.
        var hits: Int = 0
        /// When a hot answer's refresh is due.
        var refreshAt: CacheInstant
        /// No new refresh is started before this (one is running, or the last one failed recently).
        var refreshBlockedUntil: CacheInstant?
        /// The identity of the upstream that gave the answer, when known.
        /// The TTL the upstream gave, when the bounds changed it.
        var clampedFrom: UInt32?
        var upstream: String?
    }

    /// Everything known about one host.
    ///
    /// A class so that a hit updates it in place instead of copying its arrays and strings. It is
    /// `@unchecked Sendable` because records are only ever reached through ``HostCacheCore/records``, and the
    /// core lives inside ``HostCache``'s mutex: every read and write of a record happens under that lock.
    final class Record: @unchecked Sendable {
        /// Answers by asked family: any, ipv4, ipv6.
        var answers: [Answer?] = [nil, nil, nil]
        var scores: [IPAddress: AddressScore] = [:]
        /// Rankings include decaying penalties; they are recomputed once this passes.
        var rankValidUntil: CacheInstant?
        var probedAt: CacheInstant?
        var probePort: Int?
        /// The fast path's view, by slot: the best address and until when it may be returned without looking at
        /// the answer (its expiry or the ranking's validity, whichever comes first).
        var best: [IPAddress?] = [nil, nil, nil]
        var bestUntil: [CacheInstant?] = [nil, nil, nil]
        /// Addresses handed out for the host from outside the cache (overrides, hosts files): scored, probed and
        /// fed back like cached ones, but never served from here and never asked upstream.
        var external: [IPAddress] = []

        init() {}

        /// Every address an answer or the outside gave for the host, each once.
        var knownAddresses: [IPAddress] {
            var addresses = external
            for answer in answers {
                for ip in answer?.addresses ?? [] where !addresses.contains(ip) { addresses.append(ip) }
            }
            return addresses
        }
    }

    /// What the fast path reads, stored inline in the dictionary so a hit touches no other memory: per slot, the
    /// best address and until when it may be returned (copied from the record whenever it is re-ranked).
    struct FastPath: Sendable {
        var best: (IPAddress?, IPAddress?, IPAddress?) = (nil, nil, nil)
        var until: (CacheInstant?, CacheInstant?, CacheInstant?) = (nil, nil, nil)

        init(_ record: Record) {
            best = (record.best[0], record.best[1], record.best[2])
            until = (record.bestUntil[0], record.bestUntil[1], record.bestUntil[2])
        }

        func address(slot: Int, now: CacheInstant) -> IPAddress? {
            switch slot {
            case 0: if let limit = until.0, now < limit { return best.0 }
            case 1: if let limit = until.1, now < limit { return best.1 }
            default: if let limit = until.2, now < limit { return best.2 }
            }
            return nil
        }
    }

    /// A host's record with its place in the LRU order and its fast-path view.
    struct Entry: Sendable {
        var record: Record
        var lastUsed: UInt64
        /// The tick of the entry's one live place in ``HostCacheCore/order``.
        var queued: UInt64
        var fast: FastPath
    }

    /// The outcome of a lookup.
    enum Lookup: Sendable {
        case miss
        /// A positive answer, fresh or stale; `refresh` says the caller should start a background refresh
        /// (the claim is already taken).
        /// `probe` is set when a probe round is due (and claimed). `steadyFor`: how long from now a lookup would
        /// return this same resolution (same TTL, same ranking, no refresh due) unless the cache changes (see
        /// ``HostCache/generation``); `nil` for stale answers and answers about to be refreshed.
        case hit(RankedResolution, refresh: Bool, probe: ProbeRequest?, steadyFor: Duration?)
        case negative(HTTPDNSError)
    }

    /// What a probe round should connect to.
    struct ProbeRequest: Sendable, Hashable {
        var host: HostName
        var addresses: [IPAddress]
        var port: Int?
    }

    var configuration: HostCache.Configuration
    /// Hosts removed on purpose since the last save: a save does not bring them back from the file.
    var removedSinceSave: Set<String> = []
    /// Whether the whole cache was cleared since the last save: then the file's hosts are not merged at all.
    var clearedSinceSave = false
    var records: [HostName: Entry] = [:]
    /// The hosts in the order they were put in, for eviction: a place whose tick is not its entry's `queued` was left
    /// behind when the host was removed, and is skipped (``compactOrder()``).
    var order = CircularBuffer<(host: HostName, tick: UInt64)>()
    /// The network the scores were measured on (``switchNetwork(to:now:)``); `nil` until the first change is seen.
    var networkKey: String?
    /// Scores measured on other networks, the most recently left last.
    var otherNetworks: [(key: String, scores: [HostName: [IPAddress: AddressScore]])] = []
    private var tick: UInt64 = 0

    package init(configuration: HostCache.Configuration) {
        self.configuration = configuration
    }

    var count: Int { records.count }

    static func slot(_ family: AddressFamily) -> Int {
        switch family {
        case .any: 0
        case .ipv4: 1
        case .ipv6: 2
        }
    }

    static let families: [AddressFamily] = [.any, .ipv4, .ipv6]

    mutating func nextTick() -> UInt64 {
        tick &+= 1
        return tick
    }

    // MARK: Lookups

    /// The answer for `host` and `family` at `now`: fresh, stale within the maximum staleness, negative or none.
    /// - Parameter probeInterval: When set, a hit also claims a probe round if none ran within the interval.
    mutating func lookup(
        _ host: HostName,
        family: AddressFamily,
        now: CacheInstant,
        probeInterval: Duration? = nil
    ) -> Lookup {
        guard let index = records.index(forKey: host) else { return .miss }
        let slot = Self.slot(family)
        let tick = nextTick()
        let record = Self.touch(&records.values[index], tick: tick)
        let reranks = record.rankValidUntil.map { now >= $0 } ?? false
        let result = Self.lookup(
            in: record, host: host, family: family, slot: slot, now: now, configuration: configuration)
        if reranks { records.values[index].fast = FastPath(record) }
        guard case .hit(let resolution, let refresh, _, let steadyFor) = result, let probeInterval else {
            return result
        }
        let probe = Self.claimProbe(record, host: host, interval: probeInterval, now: now)
        // A probe round changes the ranking when it ends: the answer is steady only until the next is due.
        return .hit(resolution, refresh: refresh, probe: probe, steadyFor: probe == nil ? steadyFor : nil)
    }

    /// Marks the entry used and returns its record, in place.
    static func touch(_ entry: inout Entry, tick: UInt64) -> Record {
        entry.lastUsed = tick
        return entry.record
    }

    private static func lookup(
        in record: Record,
        host: HostName,
        family: AddressFamily,
        slot: Int,
        now: CacheInstant,
        configuration: HostCache.Configuration
    ) -> Lookup {
        if let until = record.rankValidUntil, now >= until {
            rerank(record, now: now, configuration: configuration)
        }
        let result = evaluate(&record.answers[slot], host: host, family: family, now: now, configuration: configuration)
        // The ranking's penalties decay: it holds until its validity ends.
        guard case .hit(let resolution, let refresh, let probe, .some(let steadyFor)) = result,
            let until = record.rankValidUntil
        else { return result }
        let ranked = until - now
        return .hit(
            resolution, refresh: refresh, probe: probe, steadyFor: ranked > .zero ? min(steadyFor, ranked) : nil)
    }

    /// Judges one answer in place (an `inout` access neither copies it nor retains its arrays).
    private static func evaluate(
        _ answer: inout Answer?,
        host: HostName,
        family: AddressFamily,
        now: CacheInstant,
        configuration: HostCache.Configuration
    ) -> Lookup {
        guard answer != nil else { return .miss }
        if let error = answer!.error {
            if now < answer!.expiresAt { return .negative(error) }
            answer = nil
            return .miss
        }
        let expiresAt = answer!.expiresAt
        if now < expiresAt {
            answer!.hits += 1
            var refresh = false
            if answer!.hits >= configuration.hotHits, now >= answer!.refreshAt, answer!.canRefresh(at: now) {
                answer!.refreshBlockedUntil = now + configuration.refreshClaimDuration
                refresh = true
            }
            let left = expiresAt.nanoseconds - now.nanoseconds
            let remaining = (left + 999_999_999) / 1_000_000_000
            var resolution = RankedResolution(
                host: host.name, family: family, addresses: answer!.ranked, origin: answer!.origin,
                ttl: UInt32(clamping: remaining), freshness: .cache, upstream: answer!.upstream
            )
            resolution.clampedFrom = answer!.clampedFrom
            // The same answer until its TTL in whole seconds ticks down, or a refresh of a hot answer falls due.
            var steadyFor: Duration? = .nanoseconds(left - (remaining - 1) * 1_000_000_000)
            if refresh || now >= answer!.refreshAt {
                steadyFor = nil
            } else if let tick = steadyFor {
                steadyFor = min(tick, answer!.refreshAt - now)
            }
            return .hit(resolution, refresh: refresh, probe: nil, steadyFor: steadyFor)
        }
        let staleFor = now - expiresAt
        guard staleFor <= configuration.maximumStaleness else {
            answer = nil
            return .miss
        }
        var refresh = false
        if answer!.canRefresh(at: now) {
            answer!.refreshBlockedUntil = now + configuration.refreshClaimDuration
            refresh = true
        }
        return .hit(
            stale(answer!, host: host, family: family, staleFor: staleFor), refresh: refresh, probe: nil, steadyFor: nil
        )
    }

    private static func stale(_ answer: Answer, host: HostName, family: AddressFamily, staleFor: Duration)
        -> RankedResolution
    {
        RankedResolution(
            host: host.name, family: family, addresses: answer.ranked, origin: answer.origin, ttl: 0,
            freshness: .stale, staleSeconds: UInt32(min(staleFor.fractionalSeconds.rounded(.up), Double(UInt32.max))),
            upstream: answer.upstream
        )
    }

    /// The best address of a fresh positive answer, for the fast path. Does not count as a hit for refreshes.
    mutating func bestAddress(_ host: HostName, family: AddressFamily, now: CacheInstant) -> IPAddress? {
        guard let index = records.index(forKey: host) else { return nil }
        tick &+= 1
        if let best = Self.touchFast(&records.values[index], slot: Self.slot(family), now: now, tick: tick) {
            return best
        }
        // Expired, negative, or the ranking has decayed: take the full path.
        if case .hit(let resolution, _, _, _) = lookup(host, family: family, now: now), !resolution.isStale {
            return resolution.best
        }
        return nil
    }

    /// Reads the fast-path view in place (an `inout` access does not copy the entry or retain its record) and
    /// marks the entry used when it answers.
    private static func touchFast(_ entry: inout Entry, slot: Int, now: CacheInstant, tick: UInt64) -> IPAddress? {
        guard let best = entry.fast.address(slot: slot, now: now) else { return nil }
        entry.lastUsed = tick
        return best
    }

    /// A positive answer still within the maximum staleness, fresh or not, without claiming a refresh: what is
    /// served when every upstream fails.
    func fallback(_ host: HostName, family: AddressFamily, now: CacheInstant) -> RankedResolution? {
        guard let answer = records[host]?.record.answers[Self.slot(family)], answer.error == nil else { return nil }
        if now < answer.expiresAt {
            return RankedResolution(
                host: host.name, family: family, addresses: answer.ranked, origin: answer.origin,
                ttl: UInt32((answer.expiresAt - now).fractionalSeconds.rounded(.up)), freshness: .cache,
                upstream: answer.upstream
            )
        }
        let staleFor = now - answer.expiresAt
        guard staleFor <= configuration.maximumStaleness else { return nil }
        return Self.stale(answer, host: host, family: family, staleFor: staleFor)
    }

    /// The ranked addresses of `host` for `family` from any answer within the maximum staleness.
    func ranked(_ host: HostName, family: AddressFamily, now: CacheInstant) -> [RankedAddress] {
        fallback(host, family: family, now: now)?.addresses ?? []
    }

    // MARK: Stores

    /// Stores a positive answer (replacing, or with `merge` adding to, the addresses already cached) and returns
    /// it ranked.
    mutating func store(
        _ host: HostName,
        family: AddressFamily,
        addresses: [IPAddress],
        ttl: UInt32,
        origin: ResolutionSource,
        upstream: String? = nil,
        merge: Bool = false,
        now: CacheInstant
    ) -> RankedResolution {
        let given = ttl
        let ttl = configuration.clamp(ttl)
        let record = takeRecord(host)
        let slot = Self.slot(family)
        var list = addresses
        if merge, let existing = record.answers[slot], existing.error == nil {
            list = existing.addresses
            for ip in addresses where !list.contains(ip) { list.append(ip) }
        }
        let expiresAt = now + .seconds(Int64(ttl))
        let lead = configuration.refreshLead(ttl: ttl)
        var answer = Answer(
            addresses: list, ranked: [], error: nil, origin: merge ? (record.answers[slot]?.origin ?? origin) : origin,
            ttl: ttl, storedAt: now, expiresAt: expiresAt, refreshAt: expiresAt - lead, upstream: upstream
        )
        answer.clampedFrom = given == ttl ? nil : given
        if merge, let existing = record.answers[slot], existing.error == nil {
            answer.hits = existing.hits
            answer.storedAt = existing.storedAt
            answer.upstream = existing.upstream
        }
        record.answers[slot] = answer
        Self.pruneScores(record)
        Self.rerank(record, now: now, configuration: configuration)
        let ranked = record.answers[slot]!.ranked
        putRecord(record, for: host)
        var resolution = RankedResolution(
            host: host.name, family: family, addresses: ranked, origin: answer.origin, ttl: ttl, freshness: .upstream,
            upstream: answer.upstream)
        resolution.clampedFrom = answer.clampedFrom
        return resolution
    }

    /// Caches NXDOMAIN or no data for the negative TTL; other errors are not cached.
    mutating func storeNegative(_ host: HostName, family: AddressFamily, error: HTTPDNSError, now: CacheInstant) {
        guard error.code.isNegativeAnswer, configuration.negativeTTL > 0 else { return }
        let record = takeRecord(host)
        let expiresAt = now + .seconds(Int64(configuration.negativeTTL))
        record.answers[Self.slot(family)] = Answer(
            addresses: [], ranked: [], error: error, origin: "negative", ttl: configuration.negativeTTL,
            storedAt: now, expiresAt: expiresAt, refreshAt: expiresAt
        )
        Self.pruneScores(record)
        Self.rerank(record, now: now, configuration: configuration)
        putRecord(record, for: host)
    }

    /// A background refresh failed: no new one for `configuration.refreshRetryInterval`.
    mutating func refreshFailed(_ host: HostName, family: AddressFamily, now: CacheInstant) {
        guard let index = records.index(forKey: host), records.values[index].record.answers[Self.slot(family)] != nil
        else { return }
        records.values[index].record.answers[Self.slot(family)]!.refreshBlockedUntil =
            now + configuration.refreshRetryInterval
    }

    /// The record of `host` to change and put back with ``putRecord(_:for:)``: the one in place (it keeps its place
    /// in ``order``), or a new one, for which room is made first.
    mutating func takeRecord(_ host: HostName) -> Record {
        if let index = records.index(forKey: host) { return records.values[index].record }
        evictIfFull()
        return Record()
    }

    /// Puts `record` in place for `host`. A host already there keeps its place in the eviction order, the store
    /// counting as a use (its second chance when its turn comes), so storing again leaves no place behind and the
    /// order never needs rebuilding for it: eviction stays O(1) under any rate of stores. Only hosts removed on
    /// purpose leave places behind, skipped when their turn comes (``compactOrder()`` drops them if they pile up).
    mutating func putRecord(_ record: Record, for host: HostName) {
        let tick = nextTick()
        if let index = records.index(forKey: host) {
            records.values[index].record = record
            records.values[index].lastUsed = tick
            records.values[index].fast = FastPath(record)
            return
        }
        records[host] = Entry(record: record, lastUsed: tick, queued: tick, fast: FastPath(record))
        order.append((host, tick))
    }

    /// Drops the places of hosts removed on purpose once they outnumber the hosts (only ``remove(_:)``, an
    /// operator's flush, leaves them; stores never do).
    mutating func compactOrder() {
        guard order.count > 2 * records.count + 64 else { return }
        var live = CircularBuffer<(host: HostName, tick: UInt64)>(initialCapacity: records.count)
        for place in order where records[place.host]?.queued == place.tick { live.append(place) }
        order = live
    }

    /// Makes room for one more host. The eviction order approximates least recently used with a second chance
    /// (CLOCK): hosts leave in the order they were stored, except that one used since it was queued goes to the back
    /// once. Each host is looked at a bounded number of times between uses, so making room costs O(1) amortized, and
    /// a lookup pays nothing for it but the tick it writes anyway; no scan or sort of the whole cache.
    mutating func evictIfFull() {
        while records.count >= configuration.maximumHosts, let (host, tick) = order.popFirst() {
            guard let index = records.index(forKey: host), records.values[index].queued == tick else { continue }
            let lastUsed = records.values[index].lastUsed
            if lastUsed > tick {
                records.values[index].queued = lastUsed
                order.append((host, lastUsed))
            } else {
                records.remove(at: index)
            }
        }
    }

    /// Drops scores of addresses no answer mentions any more.
    static func pruneScores(_ record: Record) {
        guard !record.scores.isEmpty else { return }
        var live = Set<IPAddress>(record.external)
        for answer in record.answers { if let answer { live.formUnion(answer.addresses) } }
        record.scores = record.scores.filter { live.contains($0.key) }
    }
}
