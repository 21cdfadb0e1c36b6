import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients

extension HostCacheCore {
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

    static func claimProbe(
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
    static func rerank(_ record: Record, now: CacheInstant, configuration: HostCache.Configuration) {
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
    static func rank(
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
}
