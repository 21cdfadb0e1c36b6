/// Where an address can be reached from, for the private-address guard of HTTP DNS answers.
package enum AddressScope: String, Sendable, Hashable, CustomStringConvertible {
    /// A globally routable unicast address (this includes the documentation ranges).
    case global
    /// A private network: 10/8, 172.16/12, 192.168/16, 100.64/10 (carrier-grade NAT), IPv6 fc00::/7 and the
    /// deprecated site-local fec0::/10.
    case privateNetwork = "private"
    /// Special-purpose space that no public name should map to: 192.0.0.0/24 (IETF protocol assignments),
    /// 198.18.0.0/15 (benchmarking, often used inside data centres) and 240.0.0.0/4 (reserved).
    case reserved
    /// The host itself: 127/8 or ::1.
    case loopback
    /// Link-local: 169.254/16 or fe80::/10.
    case linkLocal = "link-local"
    /// This network or no address: 0/8 or ::.
    case unspecified
    /// Multicast (224/4, ff00::/8) or the limited broadcast address; never a server.
    case multicast

    /// The scope's name: `global`, `private`, `reserved`, `loopback`, `link-local`, `unspecified`, `multicast`.
    package var description: String { rawValue }
}

extension IPAddress {
    /// The scope of the address. IPv6 forms that carry an IPv4 address have the scope of that address, so the
    /// guard cannot be sidestepped by writing a private address in IPv6 form: IPv4-mapped (`::ffff:a.b.c.d`),
    /// IPv4-translated (`::ffff:0:a.b.c.d`, RFC 2765), IPv4-compatible (`::a.b.c.d`), NAT64 (`64:ff9b::a.b.c.d`,
    /// RFC 6052) and 6to4 (`2002:aabb:ccdd::/48`, RFC 3056). The local-use NAT64 prefix `64:ff9b:1::/48`
    /// (RFC 8215) is a private network's, and the discard-only `100::/64` (RFC 6666) is reserved.
    package var scope: AddressScope {
        switch storage {
        case .v4(let value):
            return Self.scope(ofIPv4: value)
        case .v6(let high, let low):
            if high == 0, low == 0 { return .unspecified }
            if high == 0, low == 1 { return .loopback }
            if high == 0, low >> 32 == 0xffff || low >> 32 == 0 || low >> 32 == 0xffff_0000 {
                return Self.scope(ofIPv4: UInt32(truncatingIfNeeded: low))
            }
            if high == 0x0064_ff9b_0000_0000, low >> 32 == 0 {
                return Self.scope(ofIPv4: UInt32(truncatingIfNeeded: low))
            }
            if high >> 16 == 0x0064_ff9b_0001 { return .privateNetwork }
            if high == 0x0100_0000_0000_0000 { return .reserved }
            let top = high >> 48
            if top == 0x2002 { return Self.scope(ofIPv4: UInt32(truncatingIfNeeded: high >> 16)) }
            if top & 0xfe00 == 0xfc00 { return .privateNetwork }
            if top & 0xffc0 == 0xfe80 { return .linkLocal }
            if top & 0xffc0 == 0xfec0 { return .privateNetwork }
            if top & 0xff00 == 0xff00 { return .multicast }
            return .global
        }
    }

    /// `true` unless the address is `AddressScope.global`: the addresses an HTTP DNS answer for a public
    /// name must not carry unless the provider allows it.
    package var isNonPublic: Bool { scope != .global }

    private static func scope(ofIPv4 value: UInt32) -> AddressScope {
        switch value >> 24 {
        case 0: return .unspecified
        case 10: return .privateNetwork
        case 127: return .loopback
        case 224...239: return .multicast
        default: break
        }
        if value == 0xffff_ffff { return .multicast }
        if value & 0xfff0_0000 == 0xac10_0000 { return .privateNetwork }  // 172.16/12
        if value & 0xffff_0000 == 0xc0a8_0000 { return .privateNetwork }  // 192.168/16
        if value & 0xffc0_0000 == 0x6440_0000 { return .privateNetwork }  // 100.64/10
        if value & 0xffff_0000 == 0xa9fe_0000 { return .linkLocal }  // 169.254/16
        if value & 0xffff_ff00 == 0xc000_0000 { return .reserved }  // 192.0.0/24
        if value & 0xfffe_0000 == 0xc612_0000 { return .reserved }  // 198.18/15
        if value >> 28 == 0xf { return .reserved }  // 240/4
        return .global
    }
}
