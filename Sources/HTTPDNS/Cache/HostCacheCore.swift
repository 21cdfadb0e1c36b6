import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients
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
        var error: DNSError?
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
        case negative(DNSError)
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
    private(set) var records: [HostName: Entry] = [:]
    private var tick: UInt64 = 0

    package init(configuration: HostCache.Configuration) {
        self.configuration = configuration
    }

    var count: Int { records.count }

    private static func slot(_ family: AddressFamily) -> Int {
        switch family {
        case .any: 0
        case .ipv4: 1
        case .ipv6: 2
        }
    }

    private static let families: [AddressFamily] = [.any, .ipv4, .ipv6]

    private mutating func nextTick() -> UInt64 {
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
    private static func touch(_ entry: inout Entry, tick: UInt64) -> Record {
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
            let resolution = RankedResolution(
                host: host.name, family: family, addresses: answer!.ranked, origin: answer!.origin,
                ttl: UInt32(clamping: remaining), freshness: .cache, upstream: answer!.upstream
            )
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
        return RankedResolution(
            host: host.name, family: family, addresses: ranked, origin: answer.origin, ttl: ttl, freshness: .upstream,
            upstream: answer.upstream)
    }

    /// Caches NXDOMAIN or no data for the negative TTL; other errors are not cached.
    mutating func storeNegative(_ host: HostName, family: AddressFamily, error: DNSError, now: CacheInstant) {
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

    private mutating func takeRecord(_ host: HostName) -> Record {
        if let entry = records.removeValue(forKey: host) { return entry.record }
        evictIfFull()
        return Record()
    }

    private mutating func putRecord(_ record: Record, for host: HostName) {
        records[host] = Entry(record: record, lastUsed: nextTick(), fast: FastPath(record))
    }

    /// Makes room for one more host: when full, the least recently used sixteenth (at least one) goes.
    private mutating func evictIfFull() {
        guard records.count >= configuration.maximumHosts else { return }
        let excess = records.count - configuration.maximumHosts + 1
        let batch = max(excess, configuration.maximumHosts / 16, 1)
        let victims = records.map { ($0.key, $0.value.lastUsed) }.sorted { $0.1 < $1.1 }.prefix(batch)
        for (host, _) in victims { records.removeValue(forKey: host) }
    }

    /// Drops scores of addresses no answer mentions any more.
    private static func pruneScores(_ record: Record) {
        guard !record.scores.isEmpty else { return }
        var live = Set<IPAddress>(record.external)
        for answer in record.answers { if let answer { live.formUnion(answer.addresses) } }
        record.scores = record.scores.filter { live.contains($0.key) }
    }

    // MARK: Scores

    /// Passive feedback: a connect to `ip` of `host` succeeded after `latency`.
    mutating func recordSuccess(_ host: HostName, ip: IPAddress, latency: Duration, now: CacheInstant) {
        let policy = configuration.scoring
        updateScore(host, ip: ip, now: now) { $0.recordSuccess(latency: latency, at: now, policy: policy) }
    }

    /// Passive feedback: a request to `ip` of `host` got its first response byte after `latency`.
    mutating func recordFirstByte(_ host: HostName, ip: IPAddress, latency: Duration, now: CacheInstant) {
        let policy = configuration.scoring
        updateScore(host, ip: ip, now: now) { $0.recordFirstByte(latency: latency, at: now, policy: policy) }
    }

    /// Passive feedback: a connect to `ip` of `host` failed.
    mutating func recordFailure(_ host: HostName, ip: IPAddress, now: CacheInstant) {
        let policy = configuration.scoring
        updateScore(host, ip: ip, now: now) { $0.recordFailure(at: now, policy: policy) }
    }

    private mutating func updateScore(
        _ host: HostName,
        ip: IPAddress,
        now: CacheInstant,
        _ body: (inout AddressScore) -> Void
    ) {
        // Feedback about an address the cache neither holds nor handed out for the host (a literal) is dropped:
        // scores live and die with the answers and override lists they rank.
        guard let index = records.index(forKey: host) else { return }
        let known = records.values[index].record
        guard known.external.contains(ip) || known.answers.contains(where: { $0?.addresses.contains(ip) ?? false })
        else { return }
        let record = records.values[index].record
        body(&record.scores[ip, default: AddressScore()])
        Self.rerank(record, now: now, configuration: configuration)
        records.values[index].fast = FastPath(record)
    }

    /// Claims a probe round for `host` if none ran within `interval`; returns what to connect to.
    mutating func claimProbe(_ host: HostName, interval: Duration, now: CacheInstant) -> ProbeRequest? {
        guard let index = records.index(forKey: host) else { return nil }
        return Self.claimProbe(records.values[index].record, host: host, interval: interval, now: now)
    }

    private static func claimProbe(
        _ record: Record,
        host: HostName,
        interval: Duration,
        now: CacheInstant
    ) -> ProbeRequest? {
        if let probedAt = record.probedAt, now - probedAt < interval { return nil }
        let addresses = record.knownAddresses
        guard !addresses.isEmpty else { return nil }
        record.probedAt = now
        return ProbeRequest(host: host, addresses: addresses, port: record.probePort)
    }

    /// Remembers the port a caller connects to on `host`, for its probes.
    mutating func setProbePort(_ port: Int, for host: HostName) {
        guard let index = records.index(forKey: host) else { return }
        records.values[index].record.probePort = port
    }

    /// Re-ranks every answer of a record by the scores at `now` and the dual-stack policy.
    private static func rerank(_ record: Record, now: CacheInstant, configuration: HostCache.Configuration) {
        var changing = false
        for slot in record.answers.indices {
            guard let answer = record.answers[slot], answer.error == nil else { continue }
            let (ranked, decaying) = rank(answer.addresses, in: record, now: now, configuration: configuration)
            changing = changing || decaying
            record.answers[slot]!.ranked = ranked
        }
        if !changing, !record.external.isEmpty {
            changing = rank(record.external, in: record, now: now, configuration: configuration).changing
        }
        record.rankValidUntil = changing ? now + .seconds(1) : nil
        for slot in record.answers.indices {
            if let answer = record.answers[slot], answer.error == nil, let first = answer.ranked.first {
                record.best[slot] = first.ip
                record.bestUntil[slot] = record.rankValidUntil.map { min($0, answer.expiresAt) } ?? answer.expiresAt
            } else {
                record.best[slot] = nil
                record.bestUntil[slot] = nil
            }
        }
    }

    /// Ranks `addresses` by the record's scores at `now`; `changing` is true while a penalty decays or a back-off
    /// runs, so the ranking must be recomputed soon.
    private static func rank(
        _ addresses: [IPAddress],
        in record: Record,
        now: CacheInstant,
        configuration: HostCache.Configuration
    ) -> (ranked: [RankedAddress], changing: Bool) {
        var changing = false
        let scored = addresses.enumerated().map { position, ip -> (RankedAddress, Int) in
            let score = record.scores[ip] ?? AddressScore()
            let penalty = score.penalty(at: now, policy: configuration.scoring)
            let backingOff = score.isBackingOff(at: now)
            if penalty > 0 || backingOff { changing = true }
            return (
                RankedAddress(
                    ip: ip, rank: 0, score: score.value(at: now, policy: configuration.scoring),
                    latencyMilliseconds: score.latencyMilliseconds, successes: score.successes,
                    failures: score.failures,
                    firstByteMilliseconds: score.firstByteMilliseconds, isBackingOff: backingOff,
                    penaltyMilliseconds: penalty
                ),
                position
            )
        }
        var ordered = order(scored, policy: configuration.dualStack)
        for index in ordered.indices { ordered[index].rank = index + 1 }
        return (ordered, changing)
    }

    /// Orders scored addresses: those backing off after every other; within each group by score (then by time to
    /// first byte, then the source's order), then by family as the policy says.
    static func order(_ scored: [(RankedAddress, Int)], policy: DualStackPolicy) -> [RankedAddress] {
        let sorted = scored.sorted { a, b in
            if a.0.isBackingOff != b.0.isBackingOff { return !a.0.isBackingOff }
            if a.0.score != b.0.score { return a.0.score < b.0.score }
            let aFirstByte = a.0.firstByteMilliseconds ?? .infinity, bFirstByte = b.0.firstByteMilliseconds ?? .infinity
            if aFirstByte != bFirstByte { return aFirstByte < bFirstByte }
            return a.1 < b.1
        }.map(\.0)
        let healthy = sorted.filter { !$0.isBackingOff }
        let backingOff = sorted.filter(\.isBackingOff)
        return byFamily(healthy, policy: policy) + byFamily(backingOff, policy: policy)
    }

    /// Applies the dual-stack policy to addresses already sorted by score.
    private static func byFamily(_ sorted: [RankedAddress], policy: DualStackPolicy) -> [RankedAddress] {
        let v4 = sorted.filter { $0.ip.family == .ipv4 }
        let v6 = sorted.filter { $0.ip.family == .ipv6 }
        switch policy {
        case .preferIPv4:
            return v4 + v6
        case .preferIPv6:
            return v6 + v4
        case .fastest:
            // The better head goes next; on equal scores the families alternate, IPv4 first.
            var result: [RankedAddress] = []
            result.reserveCapacity(sorted.count)
            var i = 0, j = 0
            var lastWasV4 = false
            while i < v4.count || j < v6.count {
                let takeV4: Bool
                if i == v4.count {
                    takeV4 = false
                } else if j == v6.count {
                    takeV4 = true
                } else if v4[i].score != v6[j].score {
                    takeV4 = v4[i].score < v6[j].score
                } else {
                    takeV4 = !lastWasV4
                }
                if takeV4 { result.append(v4[i]); i += 1 } else { result.append(v6[j]); j += 1 }
                lastWasV4 = takeV4
            }
            return result
        }
    }

    // MARK: Addresses from outside the cache

    /// Ranks addresses that come from outside the cache (an override, a hosts file) for `host` by the scores kept
    /// for them, remembering them so feedback and probes reach them; claims a probe round when `probeInterval` is
    /// set and one is due. The cache never serves these addresses on its own.
    mutating func rankExternal(
        _ host: HostName,
        family: AddressFamily,
        addresses: [IPAddress],
        port: Int?,
        probeInterval: Duration?,
        now: CacheInstant
    ) -> (ranked: [RankedAddress], probe: ProbeRequest?) {
        let tick = nextTick()
        let record: Record
        if let index = records.index(forKey: host) {
            record = Self.touch(&records.values[index], tick: tick)
        } else {
            record = takeRecord(host)
            putRecord(record, for: host)
        }
        var known = record.external
        for ip in addresses where !known.contains(ip) { known.append(ip) }
        if known.count != record.external.count {
            // Keep the list bounded: addresses the override no longer names are dropped with their scores.
            record.external = known.count > 64 ? addresses : known
            Self.pruneScores(record)
        }
        if let port { record.probePort = port }
        let ranked = Self.rank(addresses, in: record, now: now, configuration: configuration).ranked
        let probe = probeInterval.flatMap { Self.claimProbe(record, host: host, interval: $0, now: now) }
        return (ranked, probe)
    }

    // MARK: Maintenance

    /// Forgets every cached NXDOMAIN and no-data answer (the upstreams that gave them were replaced).
    mutating func removeNegativeAnswers() {
        for index in records.indices {
            let record = records.values[index].record
            for slot in record.answers.indices where record.answers[slot]?.error != nil {
                record.answers[slot] = nil
            }
        }
    }

    /// After a network change: every answer is due for refresh (served stale meanwhile), probes run again and
    /// measurements from the old network are forgotten.
    mutating func markAllForRefresh(now: CacheInstant) {
        for index in records.indices {
            let record = records.values[index].record
            for slot in record.answers.indices where record.answers[slot] != nil {
                if record.answers[slot]!.error != nil {
                    record.answers[slot] = nil
                    continue
                }
                record.answers[slot]!.expiresAt = min(record.answers[slot]!.expiresAt, now)
                record.answers[slot]!.refreshBlockedUntil = nil
            }
            record.scores = [:]
            record.probedAt = nil
            Self.rerank(record, now: now, configuration: configuration)
            records.values[index].fast = FastPath(record)
        }
    }

    /// Removes one host.
    mutating func remove(_ host: HostName) {
        records.removeValue(forKey: host)
        removedSinceSave.insert(host.name)
    }

    /// Removes every host.
    mutating func removeAll() {
        records.removeAll()
        clearedSinceSave = true
    }

    /// Every cached answer (negative ones included), most recently used host first.
    func snapshot(now: CacheInstant) -> [HostCache.Entry] {
        records.sorted { $0.value.lastUsed > $1.value.lastUsed }.flatMap { host, entry -> [HostCache.Entry] in
            let record = entry.record
            var entries: [HostCache.Entry] = []
            if !record.external.isEmpty {
                entries.append(
                    HostCache.Entry(
                        host: host.name, family: .any,
                        addresses: Self.rank(record.external, in: record, now: now, configuration: configuration)
                            .ranked,
                        origin: .override, ttl: 0, remainingSeconds: 0, error: nil))
            }
            return entries
                + Self.families.enumerated().compactMap { slot, family -> HostCache.Entry? in
                    guard let answer = record.answers[slot] else { return nil }
                    let remaining = answer.expiresAt - now
                    return HostCache.Entry(
                        host: host.name,
                        family: family,
                        addresses: answer.ranked,
                        origin: answer.origin,
                        ttl: answer.ttl,
                        remainingSeconds: remaining.fractionalSeconds,
                        error: answer.error?.code
                    )
                }
        }
    }
}

extension HostCacheCore.Answer {
    func canRefresh(at now: CacheInstant) -> Bool {
        guard let until = refreshBlockedUntil else { return true }
        return now >= until
    }
}

// MARK: Persistence

extension HostCacheCore {
    /// The longest latency a loaded score may carry.
    static let maximumLoadedMilliseconds = 600_000.0

    /// The cache as the persisted file holds it: positive answers and scores, most recently used hosts first.
    package func exported(now: CacheInstant, wallNow: Double) -> CacheFile {
        let hosts = records.sorted { $0.value.lastUsed > $1.value.lastUsed }.compactMap {
            host, entry -> CacheFile.Host? in
            let record = entry.record
            let answers = Self.families.enumerated().compactMap { slot, family -> CacheFile.Answer? in
                guard let answer = record.answers[slot], answer.error == nil else { return nil }
                return CacheFile.Answer(
                    family: family.rawValue,
                    origin: answer.origin.name,
                    ttl: answer.ttl,
                    expiresAt: wallNow + (answer.expiresAt - now).fractionalSeconds,
                    addresses: answer.addresses.map(\.description),
                    upstream: answer.upstream
                )
            }
            guard !answers.isEmpty || !record.external.isEmpty else { return nil }
            let scores = record.scores.sorted { $0.key < $1.key }.map { ip, score in
                CacheFile.Score(
                    ip: ip.description,
                    latencyMs: score.latencyMilliseconds,
                    penaltyMs: score.penalty(at: now, policy: configuration.scoring),
                    successes: score.successes,
                    failures: score.failures,
                    firstByteMs: score.firstByteMilliseconds
                )
            }
            return CacheFile.Host(
                name: host.name, probePort: record.probePort, answers: answers, scores: scores,
                overrides: record.external.isEmpty ? nil : record.external.map(\.description))
        }
        return CacheFile(
            format: CacheFile.formatName, version: CacheFile.currentVersion, savedAt: wallNow, hosts: hosts)
    }

    /// Adds the hosts of a loaded file that are not already cached, skipping anything malformed and answers past
    /// the maximum staleness. Returns how many answers were loaded and how many were dropped.
    package mutating func load(_ file: CacheFile, now: CacheInstant, wallNow: Double) -> (loaded: Int, dropped: Int) {
        var loaded = 0
        var dropped = file.skippedHosts
        let maximumStaleness = configuration.maximumStaleness.fractionalSeconds
        // The file lists the most recently used first; insert the oldest first so LRU order survives.
        for host in file.hosts.prefix(configuration.maximumHosts).reversed() {
            guard let name = try? HostName(host.name), records[name] == nil else {
                dropped += host.answers.count
                continue
            }
            let record = Record()
            for answer in host.answers {
                let addresses = answer.addresses.compactMap(IPAddress.init)
                guard let family = AddressFamily(rawValue: answer.family), answer.expiresAt.isFinite,
                    !addresses.isEmpty, addresses.count == answer.addresses.count,
                    addresses.allSatisfy({ family == .any || $0.family == family }),
                    wallNow - answer.expiresAt <= maximumStaleness,
                    !answer.origin.isEmpty, answer.origin.utf8.count <= 255
                else {
                    dropped += 1
                    continue
                }
                let ttl = configuration.clamp(answer.ttl)
                let remaining = min(answer.expiresAt - wallNow, Double(ttl))
                let expiresAt = now + .seconds(fractional: remaining)
                let lead = configuration.refreshLead(ttl: ttl)
                record.answers[Self.slot(family)] = Answer(
                    addresses: addresses, ranked: [], error: nil, origin: ResolutionSource(answer.origin), ttl: ttl,
                    storedAt: expiresAt - .seconds(Int64(ttl)), expiresAt: expiresAt, refreshAt: expiresAt - lead,
                    upstream: answer.upstream.flatMap { $0.isEmpty || $0.utf8.count > 1024 ? nil : $0 }
                )
                loaded += 1
            }
            record.external = Array((host.overrides ?? []).prefix(64).compactMap(IPAddress.init))
            guard record.answers.contains(where: { $0 != nil }) || !record.external.isEmpty else { continue }
            for score in host.scores {
                guard let ip = IPAddress(score.ip), score.penaltyMs.isFinite, score.penaltyMs >= 0,
                    score.latencyMs.map({ $0.isFinite && $0 >= 0 }) ?? true,
                    score.firstByteMs.map({ $0.isFinite && $0 >= 0 }) ?? true,
                    score.successes >= 0, score.failures >= 0
                else { continue }
                // Values a hand-edited or hostile file may carry are clamped: counters saturate when they grow,
                // and no real connect or first byte takes longer than the longest timeout (10 minutes).
                record.scores[ip] = AddressScore(
                    latencyMilliseconds: score.latencyMs.map { min($0, Self.maximumLoadedMilliseconds) },
                    penalty: min(score.penaltyMs, configuration.scoring.maximumPenaltyMilliseconds),
                    penaltyAt: now,
                    successes: score.successes,
                    failures: score.failures,
                    firstByteMilliseconds: score.firstByteMs.map { min($0, Self.maximumLoadedMilliseconds) }
                )
            }
            if let port = host.probePort, (1...65_535).contains(port) { record.probePort = port }
            Self.pruneScores(record)
            Self.rerank(record, now: now, configuration: configuration)
            evictIfFull()
            putRecord(record, for: name)
        }
        return (loaded, dropped)
    }
}
