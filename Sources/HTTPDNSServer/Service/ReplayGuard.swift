import HTTPDNS

/// Signatures already used, each kept until its expiry, so that a signed request is taken once (a replayed report
/// is refused). Bounded: at the bound, expired entries are dropped; if none has expired, new signatures are refused
/// until one does (refusing is safe, forgetting one would let it be replayed).
final class ReplayGuard: Sendable {
    /// The most signatures remembered at once.
    let capacity: Int
    private let seen = Locked([String: Int64]())

    init(capacity: Int = 100_000) {
        self.capacity = max(capacity, 1)
    }

    /// Records `signature`, valid until `expiry` (Unix seconds); `false` when it was used already, or the table is
    /// full of unexpired signatures.
    func first(_ signature: String, expiry: Int64, now: Int64) -> Bool {
        seen.withLock { seen in
            guard seen[signature] == nil else { return false }
            if seen.count >= capacity { seen = seen.filter { $0.value >= now } }
            guard seen.count < capacity else { return false }
            seen[signature] = expiry
            return true
        }
    }
}
