import HTTPDNS
import Synchronization

/// Per-client token buckets: each client may make `burst` requests at once and `perSecond` more every second.
///
/// Clients are keyed by network (``ClientPrefixes``: an IPv4 /24, an IPv6 /48 by default), not by address, and by
/// whether their source address is verified: a UDP query's source can be forged, so UDP queries have buckets, limits
/// and tables of their own (``Limits/udpPerSecond``, on by default), and queries forged in a client's name, or from
/// a flood of made-up networks, empty or evict only UDP buckets, never those its TCP, DNS-over-TLS and HTTPS
/// requests draw on (those sources completed a handshake).
///
/// The buckets are spread over ``shardCount`` tables by network, each behind its own lock (half of them for UDP),
/// so that event loops answering different clients do not wait for one lock. Each table holds at most its share of
/// ``maximumClients``. When one is full, buckets that have filled up again (clients that went quiet) are dropped,
/// in one sweep at most once a second; if none has, the new client takes the place of one arbitrary bucket. A flood
/// of source networks therefore cannot grow memory, costs O(1) a request, and never makes another client share a
/// bucket (a client whose bucket was dropped starts again with a full one, so the flood can only make limits more
/// lenient, never refuse a well-behaved client).
final class RateLimiter: Sendable {
    /// Rates and bursts for verified sources and for UDP; a rate of 0 turns that kind's limiting off.
    struct Limits: Sendable, Hashable {
        var perSecond: Double
        var burst: Double
        var udpPerSecond: Double = 0
        var udpBurst: Double = 0
        var prefixes = ClientPrefixes()

        var isEnabled: Bool { perSecond > 0 || udpPerSecond > 0 }

        /// The rate and burst of one kind of source: UDP takes the stricter of its own limit and the general one
        /// (a source that may be forged never gets more than one that completed a handshake).
        func rate(unverified: Bool) -> (perSecond: Double, burst: Double) {
            guard unverified else { return (perSecond, burst) }
            switch (perSecond > 0, udpPerSecond > 0) {
            case (true, true): return perSecond < udpPerSecond ? (perSecond, burst) : (udpPerSecond, udpBurst)
            case (true, false): return (perSecond, burst)
            default: return (udpPerSecond, udpBurst)
            }
        }
    }

    private struct Bucket {
        var tokens: Double
        var updated: ContinuousClock.Instant
    }

    private struct Shard {
        /// The rate and burst of this shard's kind (copied into every shard, so a request takes one lock).
        var rate: (perSecond: Double, burst: Double)
        var buckets: [ClientNetwork: Bucket] = [:]
        var lastSweep: ContinuousClock.Instant?
    }

    /// Tables of buckets: the first half for verified sources, the second for UDP.
    static let shardCount = 16

    /// The most clients tracked one by one, both kinds together.
    let maximumClients: Int
    private let perShard: Int
    /// The prefixes clients are counted by, readable without a lock.
    private let prefixV4: Atomic<Int>
    private let prefixV6: Atomic<Int>
    private let shards: [Locked<Shard>]
    /// Whether limiting is on, readable without a lock: with it off a request costs one atomic load.
    private let enabled: Atomic<Bool>

    init(limits: Limits, maximumClients: Int = 100_000) {
        self.maximumClients = max(maximumClients, Self.shardCount)
        self.perShard = self.maximumClients / Self.shardCount
        self.prefixV4 = Atomic(limits.prefixes.ipv4)
        self.prefixV6 = Atomic(limits.prefixes.ipv6)
        self.shards = (0..<Self.shardCount).map { index in
            Locked(Shard(rate: limits.rate(unverified: index >= Self.shardCount / 2)))
        }
        self.enabled = Atomic(limits.isEnabled)
    }

    /// Replaces the limits (a settings reload); buckets keep their tokens, capped to the new burst (all are
    /// dropped when the prefixes change).
    func update(_ limits: Limits) {
        let samePrefixes =
            prefixV4.exchange(limits.prefixes.ipv4, ordering: .relaxed) == limits.prefixes.ipv4
            && prefixV6.exchange(limits.prefixes.ipv6, ordering: .relaxed) == limits.prefixes.ipv6
        for (index, shard) in shards.enumerated() {
            shard.withLock { shard in
                shard.rate = limits.rate(unverified: index >= Self.shardCount / 2)
                if !samePrefixes || shard.rate.perSecond <= 0 { shard.buckets = [:] }
            }
        }
        enabled.store(limits.isEnabled, ordering: .relaxed)
    }

    /// Takes one token for `client`; `unverified` for a source that may be forged (UDP).
    /// - Returns: `nil` when the request may go ahead, else how long until the next token (for `Retry-After`).
    func admit(_ client: IPAddress?, unverified: Bool = false, now: ContinuousClock.Instant? = nil) -> Duration? {
        guard enabled.load(ordering: .relaxed) else { return nil }
        let prefixes = ClientPrefixes(
            ipv4: prefixV4.load(ordering: .relaxed), ipv6: prefixV6.load(ordering: .relaxed))
        let network = ClientNetwork(client, prefixes: prefixes)
        let half = Self.shardCount / 2
        let index = (unverified ? half : 0) + Int(UInt(bitPattern: network.hashValue) % UInt(half))
        let now = now ?? .now
        let perShard = self.perShard
        return shards[index].withLock { shard -> Duration? in
            let (perSecond, burst) = shard.rate
            guard perSecond > 0 else { return nil }
            if shard.buckets[network] == nil, shard.buckets.count >= perShard {
                if shard.lastSweep.map({ now - $0 >= .seconds(1) }) ?? true {
                    shard.lastSweep = now
                    shard.buckets = shard.buckets.filter { _, bucket in
                        bucket.tokens + (now - bucket.updated).fractionalSeconds * perSecond < burst
                    }
                }
                if shard.buckets.count >= perShard { shard.buckets.remove(at: shard.buckets.startIndex) }
            }
            var bucket = shard.buckets[network] ?? Bucket(tokens: burst, updated: now)
            let elapsed = (now - bucket.updated).fractionalSeconds
            bucket.tokens = min(burst, bucket.tokens + elapsed * perSecond)
            bucket.updated = now
            defer { shard.buckets[network] = bucket }
            guard bucket.tokens >= 1 else {
                return .milliseconds(Int(((1 - bucket.tokens) / perSecond * 1000).rounded(.up)))
            }
            bucket.tokens -= 1
            return nil
        }
    }

    /// How many clients have a bucket, of both kinds.
    var trackedClients: Int { shards.reduce(0) { $0 + $1.withLock { $0.buckets.count } } }
}
