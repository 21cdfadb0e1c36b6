public import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients
extension ResolutionSource {
    /// An answer served from the IP cache while it was fresh.
    public static let cache: ResolutionSource = "cache"
}

/// One address of a host with its place in the ranking.
public struct RankedAddress: Sendable, Hashable, CustomStringConvertible {
    /// The address.
    public var ip: IPAddress
    /// Its place, 1 for the best.
    public var rank: Int
    /// Its score at the time of the lookup: an expected connect time in milliseconds plus a decaying failure
    /// penalty. Lower is better. For an unmeasured address this is `ScoringPolicy.unmeasuredMilliseconds`.
    public var score: Double
    /// The moving average of measured connect latencies, in milliseconds; `nil` when never measured.
    public var latencyMilliseconds: Double?
    /// Successful connects measured (probes and reports).
    package var successes: Int
    /// Failed connects measured (probes and reports).
    package var failures: Int
    /// The moving average of the time to the first response byte of real requests, in milliseconds (kept apart
    /// from connect times, which it would not be comparable with); `nil` when no request was measured.
    var firstByteMilliseconds: Double?
    /// Whether the address is backing off after failures: it ranks behind every address that is not, and is tried
    /// again once the back-off ends, it answers a probe, or no other address is left.
    package var isBackingOff: Bool
    /// The decaying failure penalty included in ``score``, in milliseconds.
    package var penaltyMilliseconds: Double
    /// For an address synthesized under the network's NAT64 prefix (RFC 6052) on a host without an IPv4 route, the
    /// IPv4 address of the answer it reaches; `nil` for an address as answered.
    public var synthesizedFrom: IPAddress? = nil

    /// Creates a ranked address.
    init(
        ip: IPAddress, rank: Int, score: Double, latencyMilliseconds: Double?, successes: Int, failures: Int,
        firstByteMilliseconds: Double? = nil, isBackingOff: Bool = false, penaltyMilliseconds: Double = 0
    ) {
        self.ip = ip
        self.rank = rank
        self.score = score
        self.latencyMilliseconds = latencyMilliseconds
        self.successes = successes
        self.failures = failures
        self.firstByteMilliseconds = firstByteMilliseconds
        self.isBackingOff = isBackingOff
        self.penaltyMilliseconds = penaltyMilliseconds
    }

    /// Whether a connect to this address was ever measured.
    package var isMeasured: Bool { latencyMilliseconds != nil || failures > 0 || firstByteMilliseconds != nil }

    /// Whether the address has proven itself: it answered (a probe, a race or a request) and is not carrying a
    /// failure penalty. A connection to a proven address is made directly; others are raced.
    package var isProven: Bool { successes > 0 && !isBackingOff && penaltyMilliseconds < 1 }

    /// Whether the address was synthesized under a NAT64 prefix (``synthesizedFrom``).
    package var isSynthesized: Bool { synthesizedFrom != nil }

    /// `#rank IP (score N ms)`, with `synthesized from IPv4` for a NAT64 address.
    public var description: String {
        "#\(rank) \(ip) (score \(Int(score.rounded())) ms"
            + (synthesizedFrom.map { ", synthesized from \($0))" } ?? ")")
    }
}

/// The answer of the host resolver: the addresses best first, where they came from and how fresh they are.
public struct RankedResolution: Sendable, Hashable {
    /// How the answer was obtained.
    public enum Freshness: String, Sendable, Hashable {
        /// From an upstream source just now.
        case upstream
        /// From the cache, within its TTL.
        case cache
        /// From the cache past its TTL (within the maximum staleness), because the entry is being refreshed or
        /// every upstream failed.
        case stale
        /// From the overrides.
        case override
        /// An IP literal or `localhost`; nothing was asked.
        case local
    }

    /// The host as asked (normalised).
    package var host: String
    /// The family asked for.
    package var family: AddressFamily
    /// The addresses, best first (after the dual-stack policy); never empty.
    public var addresses: [RankedAddress]
    /// The source that produced the addresses: `cares`, a provider's name, `override`, `literal`, `localhost`.
    public var origin: ResolutionSource
    /// The seconds left of the TTL; 0 when stale.
    public var ttl: UInt32
    /// How the answer was obtained.
    public var freshness: Freshness
    /// How many seconds past its TTL a stale answer is; 0 otherwise.
    package var staleSeconds: UInt32
    /// Which upstream gave the answer, as the pipeline names it (`cares(127.0.0.1:5353)`,
    /// `doh(https://…)`), when the pipeline knows; `nil` for local answers and entries of older cache files.
    package var upstream: String?
    /// The TTL the upstream gave, when the cache's bounds (`cache.minTtlSeconds`, `cache.maxTtlSeconds`) changed it
    /// into ``ttl``'s; `nil` when the TTL is the upstream's own.
    package var clampedFrom: UInt32?

    /// Creates a ranked resolution.
    init(
        host: String,
        family: AddressFamily,
        addresses: [RankedAddress],
        origin: ResolutionSource,
        ttl: UInt32,
        freshness: Freshness,
        staleSeconds: UInt32 = 0,
        upstream: String? = nil
    ) {
        self.host = host
        self.family = family
        self.addresses = addresses
        self.origin = origin
        self.ttl = ttl
        self.freshness = freshness
        self.staleSeconds = staleSeconds
        self.upstream = upstream
    }

    /// Wraps a plain resolution without measurements: addresses ranked in the order given, each with the
    /// unmeasured score of `ScoringPolicy.default`; the TTL is the smallest of the addresses'.
    package init(unscored resolution: Resolution, family: AddressFamily, freshness: Freshness) {
        let unmeasured = ScoringPolicy.default.unmeasuredMilliseconds
        self.init(
            host: resolution.host,
            family: family,
            addresses: resolution.addresses.enumerated().map { index, address in
                RankedAddress(
                    ip: address.ip, rank: index + 1, score: unmeasured, latencyMilliseconds: nil, successes: 0,
                    failures: 0)
            },
            origin: resolution.addresses.first?.source ?? "unknown",
            ttl: resolution.addresses.map(\.ttl).min() ?? 0,
            freshness: freshness
        )
    }

    /// The best address (`nil` only for a hand-made resolution without addresses).
    public var best: IPAddress? { addresses.first?.ip }

    /// Whether the answer is served past its TTL.
    package var isStale: Bool { freshness == .stale }

    /// The source to show for this answer: `ResolutionSource.cache` for fresh cache hits, `stale` for stale
    /// ones, otherwise the origin.
    package var source: ResolutionSource {
        switch freshness {
        case .cache: .cache
        case .stale: "stale"
        default: origin
        }
    }

    /// The plain resolution: the addresses in rank order, each with the remaining TTL and the origin.
    var resolution: Resolution {
        Resolution(host: host, addresses: addresses.map { ResolvedAddress(ip: $0.ip, ttl: ttl, source: origin) })
    }
}
