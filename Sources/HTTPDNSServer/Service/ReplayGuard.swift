import HTTPDNS

/// Signatures already used, each kept until its expiry, so that a signed request is taken once (a replayed report
/// is refused). Bounded: signatures leave in the order they came once expired (each look drops the expired ones at
/// the front: O(1) a report, never a scan of the table); at the bound with none expired, new signatures are refused
/// until one is (refusing is safe, forgetting one would let it be replayed). Report signatures are valid at most
/// a minute ahead, so an entry ahead of one that expired sooner only waits that long more.
final class ReplayGuard: Sendable {
    /// The most signatures remembered at once.
    let capacity: Int

    private struct State {
        var seen: [String: Int64] = [:]
        /// Signatures in the order they came, from `head` on.
        var order: [(signature: String, expiry: Int64)] = []
        var head = 0
    }

    private let state = Locked(State())

    init(capacity: Int = 100_000) {
        self.capacity = max(capacity, 1)
    }

    /// Records `signature`, valid until `expiry` (Unix seconds); `false` when it was used already, or the table is
    /// full of unexpired signatures.
    func first(_ signature: String, expiry: Int64, now: Int64) -> Bool {
        state.withLock { state in
            while state.head < state.order.count, state.order[state.head].expiry < now {
                state.seen[state.order[state.head].signature] = nil
                state.head += 1
            }
            if state.head > 1_024, state.head * 2 > state.order.count {
                state.order.removeFirst(state.head)
                state.head = 0
            }
            guard state.seen[signature] == nil, state.seen.count < capacity else { return false }
            state.seen[signature] = expiry
            state.order.append((signature, expiry))
            return true
        }
    }

    /// Signatures remembered now.
    var count: Int { state.withLock { $0.seen.count } }
}
