/// A NAT64 prefix (RFC 6052): an IPv6 prefix of 32, 40, 48, 56, 64 or 96 bits under which a NAT64 gateway reaches
/// every IPv4 address, embedded in the bits after the prefix (skipping bits 64 to 71, the "u" octet, which stay
/// zero).
public struct NAT64Prefix: Sendable, Hashable, CustomStringConvertible {
    /// The prefix lengths RFC 6052 allows.
    static let lengths = [32, 40, 48, 56, 64, 96]
    /// The well-known prefix `64:ff9b::/96`.
    static let wellKnown = NAT64Prefix(IPNetwork("64:ff9b::/96")!)!
    /// The well-known IPv4 addresses of `ipv4only.arpa` (RFC 7050), which discovery finds embedded in the answer.
    static let wellKnownIPv4 = [IPAddress(ipv4: 192, 0, 0, 170), IPAddress(ipv4: 192, 0, 0, 171)]

    /// The prefix as an IPv6 network.
    let network: IPNetwork

    /// `network` as a NAT64 prefix; `nil` unless it is IPv6 with an RFC 6052 length and its bits 64 to 71 are zero.
    init?(_ network: IPNetwork) {
        guard network.address.family == .ipv6, Self.lengths.contains(network.prefixLength) else { return nil }
        if network.prefixLength > 64, network.address.bytes[8] != 0 { return nil }
        self.network = network
    }

    /// Parses `64:ff9b::/96`.
    public init?(_ text: String) {
        guard let network = IPNetwork(text) else { return nil }
        self.init(network)
    }

    /// The byte positions of the embedded IPv4 address for this prefix length (RFC 6052 section 2.2).
    private var positions: [Int] {
        let start = network.prefixLength / 8
        // Four bytes from the end of the prefix, jumping over byte 8 (the u octet).
        return Array((start..<17).filter { $0 != 8 }.prefix(4))
    }

    /// The IPv6 address that reaches `ipv4` through this prefix; `nil` for an IPv6 `ipv4`.
    package func synthesize(_ ipv4: IPAddress) -> IPAddress? {
        guard ipv4.family == .ipv4 else { return nil }
        var bytes = network.address.bytes
        for (position, byte) in zip(positions, ipv4.bytes) { bytes[position] = byte }
        return IPAddress(bytes: bytes)
    }

    /// The IPv4 address embedded in `ipv6` when `ipv6` lies under this prefix (its u octet zero), else `nil`.
    package func embedded(in ipv6: IPAddress) -> IPAddress? {
        guard network.contains(ipv6) else { return nil }
        let bytes = ipv6.bytes
        if network.prefixLength < 96, bytes[8] != 0 { return nil }
        return IPAddress(bytes: positions.map { bytes[$0] })
    }

    /// `64:ff9b::/96`.
    public var description: String { network.description }

    /// The prefixes that AAAA answers of `ipv4only.arpa` reveal (RFC 7050 section 3): for each address, every
    /// length at which one of the well-known IPv4 addresses sits embedded, shortest first, each prefix once. An
    /// answer where neither is found (a resolver that is not a DNS64, or a forged answer) reveals none.
    package static func discovered(in addresses: [IPAddress]) -> [NAT64Prefix] {
        var found: [NAT64Prefix] = []
        for address in addresses where address.family == .ipv6 {
            for length in lengths {
                guard let candidate = IPNetwork(address.description + "/\(length)").flatMap(NAT64Prefix.init),
                    let ipv4 = candidate.embedded(in: address), wellKnownIPv4.contains(ipv4)
                else { continue }
                if !found.contains(candidate) { found.append(candidate) }
                break
            }
        }
        return found
    }
}
