import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients

extension HostCacheCore {
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

    /// Removes every answer that hands out an address `isGuarded` says no upstream may give (negative answers
    /// stay).
    mutating func removeAnswers(handingOut isGuarded: (IPAddress) -> Bool) {
        for index in records.indices {
            let record = records.values[index].record
            for slot in record.answers.indices where record.answers[slot]?.addresses.contains(where: isGuarded) ?? false
            {
                record.answers[slot] = nil
            }
        }
    }

    /// After a network change: every answer is due for refresh (served stale meanwhile), probes run again and
    /// measurements from the old network are forgotten.
    mutating func markAllForRefresh(now: CacheInstant) {
        switchScores(to: [:], now: now)
    }

    /// How many networks' scores are kept besides the current one's.
    static let rememberedNetworks = 4

    /// The host moved to the network `key`: the scores measured so far are kept under the network they were
    /// measured on, and the scores of `key` (none for a network not seen before) take their place, so that no
    /// request on the new network is steered by the old one's measurements, and coming back restores them. Every
    /// answer is due for refresh (served stale meanwhile) and probes run again. Scores of the last
    /// ``rememberedNetworks`` networks are kept. The first network seen only names the scores already held.
    mutating func switchNetwork(to key: String, now: CacheInstant) {
        guard key != networkKey else { return }
        guard networkKey != nil else {
            // The first network seen: the scores held (loaded from the file, say) are taken to be its own.
            networkKey = key
            return
        }
        var measured: [HostName: [IPAddress: AddressScore]] = [:]
        for (host, entry) in records where !entry.record.scores.isEmpty { measured[host] = entry.record.scores }
        if let current = networkKey {
            otherNetworks.removeAll { $0.key == current }
            otherNetworks.append((current, measured))
        }
        let restored = otherNetworks.first { $0.key == key }?.scores ?? [:]
        otherNetworks.removeAll { $0.key == key }
        if otherNetworks.count > Self.rememberedNetworks { otherNetworks.removeFirst() }
        networkKey = key
        switchScores(to: restored, now: now)
    }

    /// Every answer due for refresh, and each host's scores replaced by its entry of `scores` (none if absent).
    private mutating func switchScores(to scores: [HostName: [IPAddress: AddressScore]], now: CacheInstant) {
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
            record.scores = scores[records.keys[index]] ?? [:]
            record.probedAt = nil
            Self.rerank(record, now: now, configuration: configuration)
            records.values[index].fast = FastPath(record)
        }
    }

    /// Removes one host.
    mutating func remove(_ host: HostName) {
        records.removeValue(forKey: host)
        noteRemoved(host)
        compactOrder()
    }

    /// Remembers until the next save that `host` was removed on purpose (so the save does not bring it back from the
    /// file), for at most as many hosts as the cache holds: past that, removals repeated between saves (a save that
    /// keeps failing, or none at all) would grow the set without end, and a host removed beyond it may come back from
    /// the file at the next save, as if another process had saved it.
    mutating func noteRemoved(_ host: HostName) {
        guard removedSinceSave.count < configuration.maximumHosts else { return }
        removedSinceSave.insert(host.name)
    }

    /// Removes every host `matches` names (an operator's flush of a name or a suffix), negative answers and scores
    /// with them; returns how many.
    mutating func removeHosts(where matches: (HostName) -> Bool) -> Int {
        let hosts = records.keys.filter(matches)
        for host in hosts {
            records.removeValue(forKey: host)
            noteRemoved(host)
        }
        if !hosts.isEmpty { compactOrder() }
        return hosts.count
    }

    /// Removes every host.
    mutating func removeAll() {
        records.removeAll()
        order.removeAll()
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
    package func exported(now: CacheInstant, saved: CacheFile.Moment) -> CacheFile {
        let wallNow = saved.wall
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
        return CacheFile(format: CacheFile.formatName, version: CacheFile.currentVersion, saved: saved, hosts: hosts)
    }

    /// Adds the hosts of a loaded file that are not already cached, skipping anything malformed and answers past
    /// the maximum staleness. Returns how many answers were loaded and how many were dropped.
    ///
    /// An answer keeps the life it had left at saving, less the time that passed since (``CacheFile/elapsed(at:)``),
    /// and never more than its TTL; answers of a file written "in the future" are loaded as just expired (served
    /// stale while refreshed), never as fresh.
    package mutating func load(_ file: CacheFile, now: CacheInstant, at moment: CacheFile.Moment) -> (
        loaded: Int, dropped: Int
    ) {
        var loaded = 0
        var dropped = file.skippedHosts
        let maximumStaleness = configuration.maximumStaleness.fractionalSeconds
        // A file without the time it was saved (hand-written): its expiry instants are taken as they are.
        let reference = file.savedAt > 0 ? file.savedAt : moment.wall
        let elapsed = file.savedAt > 0 ? file.elapsed(at: moment) : 0
        // The file lists the most recently used first; insert the oldest first so LRU order survives.
        for host in file.hosts.prefix(configuration.maximumHosts).reversed() {
            guard let name = try? HostName(host.name), records[name] == nil else {
                dropped += host.answers.count
                continue
            }
            let record = Record()
            for answer in host.answers {
                let addresses = answer.addresses.compactMap(IPAddress.init)
                let ttl = configuration.clamp(answer.ttl)
                // The life left at saving (at most the TTL), less the time since; none for a file from the future.
                let remaining = elapsed.map { min(answer.expiresAt - reference, Double(ttl)) - $0 } ?? 0
                guard let family = AddressFamily(rawValue: answer.family), answer.expiresAt.isFinite,
                    remaining.isFinite, !addresses.isEmpty, addresses.count == answer.addresses.count,
                    addresses.allSatisfy({ family == .any || $0.family == family }),
                    -remaining <= maximumStaleness,
                    !answer.origin.isEmpty, answer.origin.utf8.count <= 255
                else {
                    dropped += 1
                    continue
                }
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
