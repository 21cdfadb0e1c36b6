import HTTPDNS

/// Client reports (`POST /report`) weighed before they reach the server's scores, so that no one client moves an
/// address for everyone.
///
/// Each (host, address) keeps the latest report of each client network (``ClientPrefixes``), for
/// ``Limits/window``. A report changes nothing until ``Limits/minimumNetworks`` distinct networks have reported the
/// address within the window; then the server's score is fed the **median** connect time of those networks, or a
/// failure when more than half of them failed to connect. One network repeating itself only replaces its own entry,
/// so it can move the median at most one place, never outside what the others measured. Tables are bounded: at most
/// ``Limits/maximumNetworksPerAddress`` networks an address and ``Limits/maximumAddresses`` addresses (an arbitrary
/// entry makes room).
final class ReportAggregator: Sendable {
    struct Limits: Sendable, Hashable {
        var window: Duration = .seconds(300)
        var minimumNetworks = 3
        var maximumNetworksPerAddress = 32
        var maximumAddresses = 10_000
    }

    /// What the reports of one address amount to, once enough networks agree.
    enum Verdict: Equatable, Sendable {
        case connect(Duration)
        case failure
    }

    private struct Key: Hashable {
        var host: String
        var address: IPAddress
    }

    private struct Entry {
        /// `nil` for a failure.
        var connect: Duration?
        var time: ContinuousClock.Instant
    }

    let limits: Limits
    private let table = Locked([Key: [ClientNetwork: Entry]]())

    init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// Records `connect` (`nil`: a failure) for `address` of `host` from `network`.
    /// - Returns: What the server's score should be fed now, or `nil` while too few networks agree.
    func record(
        host: String, address: IPAddress, network: ClientNetwork, connect: Duration?,
        now: ContinuousClock.Instant = .now
    ) -> Verdict? {
        let key = Key(host: host, address: address)
        return table.withLock { table -> Verdict? in
            if table[key] == nil, table.count >= limits.maximumAddresses { table.remove(at: table.startIndex) }
            var entries = table[key] ?? [:]
            entries = entries.filter { now - $0.value.time < limits.window }
            entries[network] = Entry(connect: connect, time: now)
            if entries.count > limits.maximumNetworksPerAddress,
                let oldest = entries.min(by: { $0.value.time < $1.value.time })?.key
            {
                entries[oldest] = nil
            }
            table[key] = entries
            guard entries.count >= limits.minimumNetworks else { return nil }
            let connects = entries.values.compactMap(\.connect).sorted()
            if connects.count * 2 < entries.count { return .failure }
            guard !connects.isEmpty else { return nil }
            return .connect(connects[connects.count / 2])
        }
    }
}
