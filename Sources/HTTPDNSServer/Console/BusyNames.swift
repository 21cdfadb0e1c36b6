import HTTPDNSCore
import Synchronization

/// The names clients ask for most, for the operator's console (`/stats.json`, the dashboard, `hostsctl top`).
///
/// Names cannot be metric labels (a label per name would grow `/metrics` without bound), so this is the one count the
/// console keeps apart from the metrics. It costs the answer path one relaxed atomic add per request: one request in
/// ``sampleEvery`` is counted in a table of at most ``capacity`` names. A full table gives a new name the place of
/// the least counted one, which it inherits the count of plus one (the "space-saving" summary of Metwally et al.):
/// one entry goes, never more, so names asked often stay and a flood of new names (a random subdomain attack) only
/// churns the bottom of the table. Only host names are counted: a question that is not one (control characters,
/// escape sequences for the operator's terminal, bytes past ASCII) never reaches the console.
final class BusyNames: Sendable {
    /// One name and how often it was asked.
    struct Entry: Sendable, Hashable {
        /// The name.
        var name: String
        /// The requests for it, estimated from the sample.
        var requests: Double
        /// Its share of the sampled requests.
        var share: Double
    }

    /// One request in this many is counted.
    let sampleEvery: UInt64
    /// The most names kept.
    let capacity: Int
    private let requests = Atomic<UInt64>(0)
    private let table = Locked(Table())

    private struct Table {
        var counts: [String: UInt64] = [:]
        var sampled: UInt64 = 0
    }

    init(sampleEvery: UInt64 = 16, capacity: Int = 512) {
        self.sampleEvery = max(sampleEvery, 1)
        self.capacity = max(capacity, 1)
    }

    /// Counts a request for `name`, in any case (one in ``sampleEvery`` reaches the table).
    func observe(_ name: String) {
        let count = requests.wrappingAdd(1, ordering: .relaxed).newValue
        guard count % sampleEvery == 0 else { return }
        guard let host = try? HostName(name) else { return }
        let capacity = self.capacity
        let name = host.name
        table.withLock { table in
            table.sampled += 1
            if let known = table.counts[name] {
                table.counts[name] = known + 1
                return
            }
            var inherited: UInt64 = 0
            if table.counts.count >= capacity, let least = table.counts.min(by: { $0.value < $1.value }) {
                table.counts[least.key] = nil
                inherited = least.value
            }
            table.counts[name] = inherited + 1
        }
    }

    /// The `limit` names asked most, most first.
    func top(_ limit: Int) -> [Entry] {
        let sampleEvery = Double(self.sampleEvery)
        return table.withLock { table in
            let total = Double(max(table.sampled, 1))
            return table.counts.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }.prefix(limit)
                .map { Entry(name: $0.key, requests: Double($0.value) * sampleEvery, share: Double($0.value) / total) }
        }
    }
}
