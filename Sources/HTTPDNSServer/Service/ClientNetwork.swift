import HTTPDNS

/// How much of a client's address names its network for rate and connection limits.
///
/// One client network is the unit of every bound of docs/security.md: an IPv4 /24 and an IPv6 /48 by default, the
/// same for connections, rate buckets and upstream places. An IPv6 end site usually gets a /56 or a /48 and can use
/// every address in it, and one IPv4 holder often has a whole /24, so counting by anything longer would let one
/// site take 256 or 65,536 places.
public struct ClientPrefixes: Sendable, Hashable {
    /// The prefix length an IPv4 client is counted by (8 to 32).
    public var ipv4: Int
    /// The prefix length an IPv6 client is counted by (16 to 128).
    public var ipv6: Int

    /// IPv4 /24 and IPv6 /48 by default.
    public init(ipv4: Int = 24, ipv6: Int = 48) {
        self.ipv4 = min(max(ipv4, 8), 32)
        self.ipv6 = min(max(ipv6, 16), 128)
    }

    /// The prefix of the wider IPv6 block whose networks share a quarter of each global bound under pressure:
    /// sixteen bits shorter than ``ipv6`` (a /32 for /48 networks), kept between /32 (an allocation to a carrier)
    /// and /48 (one end site), and never longer than ``ipv6`` itself. IPv6 networks are cheap to have (one /32
    /// holds 65,536 /48s), so sixteen of them, enough to fill a global bound, must come from at least four blocks.
    var ipv6Aggregate: Int { min(min(max(ipv6 - 16, 32), 48), ipv6) }
}

/// The network a client is counted by for rate and connection limits: its address cut to the configured prefix
/// (an IPv4 client of a dual-stack listener, ::ffff:a.b.c.d, is that IPv4 address).
enum ClientNetwork: Hashable, Sendable {
    case v4(UInt32)
    case v6(UInt64, UInt64)
    /// No address to go by.
    case shared

    init(_ client: IPAddress?, prefixes: ClientPrefixes = ClientPrefixes()) {
        guard let client else {
            self = .shared
            return
        }
        let bytes = client.bytes
        if bytes.count == 4 || Self.isMappedIPv4(bytes) {
            let value = bytes.suffix(4).reduce(0) { $0 << 8 | UInt32($1) }
            let bits = prefixes.ipv4
            self = .v4(bits >= 32 ? value : value & ~(UInt32.max >> UInt32(bits)))
        } else {
            let high = bytes.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
            let low = bytes.suffix(8).reduce(0) { $0 << 8 | UInt64($1) }
            self = .v6(Self.mask(high, keeping: prefixes.ipv6), Self.mask(low, keeping: prefixes.ipv6 - 64))
        }
    }

    /// The IPv6 block this network belongs to (``ClientPrefixes/ipv6Aggregate``), whose networks together hold at
    /// most ``aggregateShare`` times one network's bound; `nil` for IPv4 and `.shared` (an IPv4 /24 costs its holder
    /// more, and no aggregate applies).
    func aggregate(_ prefixes: ClientPrefixes) -> ClientNetwork? {
        guard case .v6(let high, let low) = self else { return nil }
        let bits = prefixes.ipv6Aggregate
        return .v6(Self.mask(high, keeping: bits), Self.mask(low, keeping: bits - 64))
    }

    /// How many networks' worth of a bound one IPv6 block (``aggregate(_:)``) holds at most: four, a quarter of a
    /// global bound that is sixteen networks' shares.
    static let aggregateShare = 4

    private static func mask(_ value: UInt64, keeping bits: Int) -> UInt64 {
        bits >= 64 ? value : bits <= 0 ? 0 : value & ~(UInt64.max >> UInt64(bits))
    }

    private static func isMappedIPv4(_ bytes: [UInt8]) -> Bool {
        bytes.count == 16 && bytes.prefix(10).allSatisfy { $0 == 0 } && bytes[10] == 0xff && bytes[11] == 0xff
    }
}
