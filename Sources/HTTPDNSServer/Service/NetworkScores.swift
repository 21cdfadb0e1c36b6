import HTTPDNS
import Synchronization

/// What clients of each network measured for the addresses of a name (signed or trusted `POST /report`s), so that a
/// client gets the addresses ordered by what its own network saw: the steering no resolver offers.
///
/// Each network's connect times per address are smoothed (exponentially, a new report weighing 0.3), and each
/// failure adds ``failurePenaltyMilliseconds`` until as many successes have been reported. An address the network
/// has not measured keeps the server's own score (its probes and the median of all networks' reports), so a
/// network's reports move only its own order, and move it at once: one report of a faster time puts that address
/// ahead of the server's choice for that network. Measurements older than ``Limits/window`` are forgotten.
///
/// Bounded: ``Limits/maximumNetworksPerName`` networks a name (the least recently reporting goes),
/// ``Limits/maximumAddresses`` addresses a network, ``Limits/maximumNames`` names (an arbitrary one goes).
/// ``generation`` grows when a name first gets a network's scores, so encoded answers kept without regard to the
/// client's network end at once.
package final class NetworkScores: Sendable {
    struct Limits: Sendable, Hashable {
        var window: Duration = .seconds(3_600)
        var maximumNames = 10_000
        var maximumNetworksPerName = 64
        var maximumAddresses = 32
    }

    /// What a failure costs an address in its network's order, until a success is reported for each.
    package static let failurePenaltyMilliseconds = 1_000.0
    /// How much a new connect time weighs against the smoothed one.
    static let weight = 0.3

    private struct Score {
        var milliseconds: Double?
        var failures: Int
        var updated: ContinuousClock.Instant
    }

    private struct Network {
        var scores: [IPAddress: Score] = [:]
        var updated: ContinuousClock.Instant
    }

    let limits: Limits
    private let table = Locked([String: [IPNetwork: Network]]())
    private let changes = Atomic<UInt64>(0)

    init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// Grows when a name first gets scores of a network.
    var generation: UInt64 { changes.load(ordering: .acquiring) }

    /// Names with scores of some network, and the networks they hold (for `/metrics`).
    var size: (names: Int, networks: Int) {
        table.withLock { table in (table.count, table.values.reduce(0) { $0 + $1.count }) }
    }

    /// Whether any network has scores for `host` (its answers then depend on the asking network).
    func hasScores(_ host: String) -> Bool {
        table.withLock { $0[host] != nil }
    }

    /// The networks with scores for `host`, in no order (for the operator's steering view).
    func networks(reporting host: String) -> [IPNetwork] {
        table.withLock { $0[host].map { Array($0.keys) } ?? [] }
    }

    /// Records a report from `network`: a connect time, or a failure (`nil`).
    func record(
        host: String, network: IPNetwork, address: IPAddress, connect: Duration?, now: ContinuousClock.Instant = .now
    ) {
        update(host: host, network: network, address: address, now: now) { score in
            if let connect {
                let milliseconds = connect.fractionalMilliseconds
                score.milliseconds = score.milliseconds.map { $0 + Self.weight * (milliseconds - $0) } ?? milliseconds
                score.failures = max(score.failures - 1, 0)
            } else {
                score.failures = min(score.failures + 1, 10)
            }
            score.updated = now
        }
    }

    /// Puts back a persisted measurement.
    private func store(
        host: String, network: IPNetwork, address: IPAddress, milliseconds: Double?, failures: Int,
        updated: ContinuousClock.Instant
    ) {
        update(host: host, network: network, address: address, now: updated) { score in
            score = Score(milliseconds: milliseconds, failures: failures, updated: updated)
        }
    }

    /// Changes the score of `address` in `network` for `host` within the table's bounds.
    private func update(
        host: String, network: IPNetwork, address: IPAddress, now: ContinuousClock.Instant,
        _ change: (inout Score) -> Void
    ) {
        let isNew = table.withLock { table -> Bool in
            let isNew = table[host] == nil
            if isNew, table.count >= limits.maximumNames { table.remove(at: table.startIndex) }
            var networks = table[host] ?? [:]
            if networks[network] == nil, networks.count >= limits.maximumNetworksPerName,
                let oldest = networks.min(by: { $0.value.updated < $1.value.updated })?.key
            {
                networks[oldest] = nil
            }
            var entry = networks[network] ?? Network(updated: now)
            entry.scores = entry.scores.filter { now - $0.value.updated < limits.window }
            var score = entry.scores[address] ?? Score(milliseconds: nil, failures: 0, updated: now)
            change(&score)
            if entry.scores[address] == nil, entry.scores.count >= limits.maximumAddresses,
                let oldest = entry.scores.min(by: { $0.value.updated < $1.value.updated })?.key
            {
                entry.scores[oldest] = nil
            }
            entry.scores[address] = score
            entry.updated = max(entry.updated, score.updated)
            networks[network] = entry
            table[host] = networks
            return isNew
        }
        if isNew { changes.add(1, ordering: .releasing) }
    }

    /// `addresses` (ranked by the server) in the order `network` measured: each address by its network score
    /// where the network measured it, by the server's score otherwise; `nil` when the network has no scores for
    /// `host` (the server's order stands).
    func order(
        _ addresses: [RankedAddress], host: String, network: IPNetwork, now: ContinuousClock.Instant = .now
    ) -> [RankedAddress]? {
        let scores = table.withLock { $0[host]?[network]?.scores }
        guard let scores, !scores.isEmpty else { return nil }
        func effective(_ address: RankedAddress) -> Double {
            guard let score = scores[address.ip], now - score.updated < limits.window else { return address.score }
            return (score.milliseconds ?? address.score) + Double(score.failures) * Self.failurePenaltyMilliseconds
        }
        // Stable: addresses that compare equal keep the server's order.
        return addresses.enumerated().sorted { left, right in
            let (a, b) = (effective(left.element), effective(right.element))
            return a != b ? a < b : left.offset < right.offset
        }.map(\.element)
    }
}

// MARK: - Persistence

extension NetworkScores {
    /// The file the scores are kept in beside the cache file at `cachePath` (saved and loaded with it by
    /// `hostsctl serve`, read by `hostsctl cache show --network`).
    package static func path(forCache cachePath: String) -> String { cachePath + ".networks" }

    /// One network's measurement of one address, as written to the file.
    package struct Record: Codable, Hashable, Sendable {
        /// The name.
        package var host: String
        /// The client network, `ADDRESS/LENGTH`.
        package var network: String
        /// The address measured.
        package var address: String
        /// The smoothed connect time, when a connect succeeded.
        package var connectMs: Double?
        /// Failures not yet balanced by successes.
        package var failures: Int
        /// Seconds since the last report, when the file was written.
        package var ageSeconds: Double
    }

    /// The file's contents: when it was written (wall clock, seconds since 1970) and the records.
    package struct Snapshot: Codable, Sendable {
        /// The format's version.
        var version = 1
        /// When the file was written.
        package var savedAt: Double
        /// The boot it was written in (absent in files of older releases).
        var bootID: String?
        /// The boot clock when it was written (absent in files of older releases).
        var bootSeconds: Double?
        /// Every measurement.
        package var scores: [Record]

        /// When the file was written, by the clocks that outlive the process.
        var saved: CacheFile.Moment {
            CacheFile.Moment(wall: savedAt, bootID: bootID, bootSeconds: bootSeconds)
        }
    }

    /// Every measurement still inside the window.
    func snapshot(now: ContinuousClock.Instant = .now, at moment: CacheFile.Moment) -> Snapshot {
        let records = table.withLock { table in
            table.flatMap { host, networks in
                networks.flatMap { network, entry in
                    entry.scores.compactMap { address, score -> Record? in
                        let age = now - score.updated
                        guard age < limits.window else { return nil }
                        return Record(
                            host: host, network: network.description, address: address.description,
                            connectMs: score.milliseconds, failures: score.failures,
                            ageSeconds: Double(age.components.seconds))
                    }
                }
            }
        }
        return Snapshot(
            savedAt: moment.wall, bootID: moment.bootID, bootSeconds: moment.storedBootSeconds,
            scores: records.sorted { ($0.host, $0.network) < ($1.host, $1.network) })
    }

    /// Takes back what a snapshot written some time before `moment` holds (measured by the boot clock within one
    /// boot, else the wall clock: ``CacheFile/Moment/elapsed(since:)``), each measurement as old as it was then
    /// plus that time; records past the window, unreadable ones and a snapshot from the future (a clock set back)
    /// are dropped, and the table's bounds apply as for reports.
    /// - Returns: How many measurements were taken.
    @discardableResult
    func restore(_ snapshot: Snapshot, now: ContinuousClock.Instant = .now, at moment: CacheFile.Moment) -> Int {
        guard snapshot.version == 1, let elapsed = moment.elapsed(since: snapshot.saved), elapsed.isFinite else {
            return 0
        }
        var taken = 0
        for record in snapshot.scores {
            let age = elapsed + max(record.ageSeconds, 0)
            guard age.isFinite, age < Double(limits.window.components.seconds), let network = IPNetwork(record.network),
                let address = IPAddress(record.address), record.host.utf8.count <= 255
            else { continue }
            let updated = now - .seconds(age)
            let failures = min(max(record.failures, 0), 10)
            let milliseconds = record.connectMs.flatMap { $0.isFinite && $0 >= 0 && $0 <= 60_000 ? $0 : nil }
            store(
                host: record.host, network: network, address: address, milliseconds: milliseconds, failures: failures,
                updated: updated)
            taken += 1
        }
        return taken
    }
}
