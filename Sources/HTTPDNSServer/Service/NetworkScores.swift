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
final class NetworkScores: Sendable {
    struct Limits: Sendable, Hashable {
        var window: Duration = .seconds(3_600)
        var maximumNames = 10_000
        var maximumNetworksPerName = 64
        var maximumAddresses = 32
    }

    /// What a failure costs an address in its network's order, until a success is reported for each.
    static let failurePenaltyMilliseconds = 1_000.0
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

    /// Records a report from `network`: a connect time, or a failure (`nil`).
    func record(
        host: String, network: IPNetwork, address: IPAddress, connect: Duration?, now: ContinuousClock.Instant = .now
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
            if let connect {
                let milliseconds = connect.fractionalMilliseconds
                score.milliseconds = score.milliseconds.map { $0 + Self.weight * (milliseconds - $0) } ?? milliseconds
                score.failures = max(score.failures - 1, 0)
            } else {
                score.failures = min(score.failures + 1, 10)
            }
            score.updated = now
            if entry.scores[address] == nil, entry.scores.count >= limits.maximumAddresses,
                let oldest = entry.scores.min(by: { $0.value.updated < $1.value.updated })?.key
            {
                entry.scores[oldest] = nil
            }
            entry.scores[address] = score
            entry.updated = now
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
