import HTTPDNS
import Synchronization

/// The CPU a TLS handshake costs (a signature with the server's key, key agreement), bounded by accept rate: at
/// most ``perSecond`` new TLS connections a second in all, and a sixteenth of that from one client network (its
/// /24 or /48), each with a burst of twice its rate. A connection past either is closed at once, before any TLS
/// work, so a network that opens connections and abandons their handshakes takes at most its share of the cores
/// (the handshake deadline bounds how long each holds a place). Under pressure (the total's bucket below half) an
/// IPv6 block of sixteen networks' width (a /32) is held to a bucket of four networks' rate besides, so networks
/// from one cheap allocation take at most a quarter of the total when it is scarce, and a carrier's /32 is not
/// held back when it is not.
final class HandshakeBudget: Sendable {
    /// New TLS connections a second in all.
    let perSecond: Double
    private let networks: RateLimiter
    /// The IPv6 blocks' buckets (``ClientNetwork/aggregate(_:)``); IPv4 clients are never asked about.
    private let blocks: RateLimiter
    private let total: Mutex<(tokens: Double, updated: ContinuousClock.Instant)>

    /// A budget of `perSecond` handshakes a second in all; a network counted by `prefixes`.
    init(perSecond: Int, prefixes: ClientPrefixes) {
        self.perSecond = Double(max(perSecond, 16))
        let share = self.perSecond / 16
        // The network buckets are the limiter's verified kind (a TCP source completed its handshake).
        networks = RateLimiter(limits: .init(perSecond: share, burst: share * 2, prefixes: prefixes))
        let blockShare = share * Double(ClientNetwork.aggregateShare)
        blocks = RateLimiter(
            limits: .init(
                perSecond: blockShare, burst: blockShare * 2,
                prefixes: ClientPrefixes(ipv4: prefixes.ipv4, ipv6: prefixes.ipv6Aggregate)))
        total = Mutex((self.perSecond * 2, .now))
    }

    /// Takes one handshake for `client`; `false` when its network or the server is over its rate.
    func admit(_ client: IPAddress?, now: ContinuousClock.Instant = .now) -> Bool {
        guard networks.admit(client, now: now) == nil else { return false }
        let (rate, burst) = (perSecond, perSecond * 2)
        let scarce = total.withLock { bucket in
            bucket.tokens = min(burst, bucket.tokens + (now - bucket.updated).fractionalSeconds * rate)
            bucket.updated = now
            return bucket.tokens <= burst / 2
        }
        // The block's bucket is drawn on always (so it is spent when pressure comes), and decides only then.
        if case .v6 = ClientNetwork(client), blocks.admit(client, now: now) != nil, scarce { return false }
        return total.withLock { bucket in
            guard bucket.tokens >= 1 else { return false }
            bucket.tokens -= 1
            return true
        }
    }
}
