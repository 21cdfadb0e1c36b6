#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    package import Musl
#elseif canImport(Darwin)
    package import Darwin
#endif

/// The address family of an IP address, or a request for one or both families; its raw value (and how it prints) is
/// its name as used in JSON and on the command line: `ipv4`, `ipv6` or `any`.
public enum AddressFamily: String, Sendable, Hashable, CaseIterable {
    /// IPv4 (`A` records).
    case ipv4
    /// IPv6 (`AAAA` records).
    case ipv6
    /// Both families (an `A` and an `AAAA` query).
    case any
}

/// An IPv4 or IPv6 address, stored in network byte order.
///
/// Parse one from text with ``init(_:)``; ``description`` gives the canonical text form
/// (dotted quad for IPv4, RFC 5952 compressed form for IPv6).
public struct IPAddress: Hashable, Sendable, CustomStringConvertible, Comparable {
    @usableFromInline
    enum Storage: Hashable, Sendable {
        /// The four bytes as a big-endian integer.
        case v4(UInt32)
        /// The sixteen bytes as two big-endian integers.
        case v6(UInt64, UInt64)
    }

    @usableFromInline
    let storage: Storage

    /// Creates an IPv4 address from its four bytes, most significant first.
    package init(ipv4 a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8) {
        storage = .v4(UInt32(a) << 24 | UInt32(b) << 16 | UInt32(c) << 8 | UInt32(d))
    }

    /// Creates an address from its raw bytes in network order: 4 bytes for IPv4, 16 for IPv6.
    /// - Returns: `nil` when `bytes` has any other length.
    package init?<Bytes: Collection>(bytes: Bytes) where Bytes.Element == UInt8 {
        switch bytes.count {
        case 4:
            storage = .v4(bytes.reduce(0) { $0 << 8 | UInt32($1) })
        case 16:
            let high = bytes.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            let low = bytes.dropFirst(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            storage = .v6(high, low)
        default:
            return nil
        }
    }

    /// Parses an IPv4 address (`192.0.2.1`) or an IPv6 address (`2001:db8::1`, optionally in brackets).
    ///
    /// Zone identifiers (`fe80::1%eth0`) are not accepted.
    /// - Returns: `nil` when `text` is not an IP literal.
    public init?(_ text: some StringProtocol) {
        // Looked at as UTF-8 bytes only: no Character is formed (host names are the usual text here, and each is
        // turned away before anything is allocated).
        var literal = Substring(text)
        let colon = UInt8(ascii: ":")
        if literal.utf8.first == UInt8(ascii: "["), literal.utf8.last == UInt8(ascii: "]") {
            literal = literal.dropFirst().dropLast()
            guard literal.utf8.contains(colon) else { return nil }
        }
        guard let last = literal.utf8.last, literal.utf8.count <= 45 else { return nil }
        let isV6 = literal.utf8.contains(colon)
        // A dotted quad ends with a digit.
        if !isV6, !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(last) { return nil }
        var raw = [UInt8](repeating: 0, count: isV6 ? 16 : 4)
        // inet_pton accepts only the strict dotted-quad form for IPv4, unlike inet_aton.
        guard inet_pton(isV6 ? AF_INET6 : AF_INET, String(literal), &raw) == 1, let parsed = IPAddress(bytes: raw)
        else {
            return nil
        }
        self = parsed
    }

    /// Parses an IP literal from raw bytes without allocating (no brackets, no zone identifier).
    package init?(literalBytes bytes: UnsafeBufferPointer<UInt8>) {
        guard !bytes.isEmpty, bytes.count <= 45 else { return nil }
        let isV6 = bytes.contains(UInt8(ascii: ":"))
        let parsed = withUnsafeTemporaryAllocation(of: CChar.self, capacity: 46) { text -> IPAddress? in
            for (index, byte) in bytes.enumerated() { text[index] = CChar(bitPattern: byte) }
            text[bytes.count] = 0
            return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 16) { raw -> IPAddress? in
                guard inet_pton(isV6 ? AF_INET6 : AF_INET, text.baseAddress, raw.baseAddress) == 1 else { return nil }
                return IPAddress(bytes: UnsafeBufferPointer(rebasing: raw[0..<(isV6 ? 16 : 4)]))
            }
        }
        guard let parsed else { return nil }
        self = parsed
    }

    /// The family of this address: ``AddressFamily/ipv4`` or ``AddressFamily/ipv6``.
    public var family: AddressFamily {
        switch storage {
        case .v4: .ipv4
        case .v6: .ipv6
        }
    }

    /// The address bytes in network order (4 or 16 bytes).
    package var bytes: [UInt8] {
        switch storage {
        case .v4(let value):
            return withUnsafeBytes(of: value.bigEndian) { Array($0) }
        case .v6(let high, let low):
            return withUnsafeBytes(of: high.bigEndian) { Array($0) } + withUnsafeBytes(of: low.bigEndian) { Array($0) }
        }
    }

    /// The canonical text form of the address.
    public var description: String {
        var raw = bytes
        let family = raw.count == 4 ? AF_INET : AF_INET6
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let ok = inet_ntop(family, &raw, &buffer, socklen_t(buffer.count)) != nil
        precondition(ok, "inet_ntop cannot fail for a 4 or 16 byte address")
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The address as it appears in a URL host or a `host:port` pair: IPv6 in brackets.
    package var urlHost: String {
        switch storage {
        case .v4: description
        case .v6: "[\(description)]"
        }
    }

    /// Orders IPv4 before IPv6, then by numeric value.
    public static func < (lhs: IPAddress, rhs: IPAddress) -> Bool {
        switch (lhs.storage, rhs.storage) {
        case (.v4(let l), .v4(let r)): l < r
        case (.v4, .v6): true
        case (.v6, .v4): false
        case (.v6(let lh, let ll), .v6(let rh, let rl)): (lh, ll) < (rh, rl)
        }
    }
}

extension IPAddress {
    /// Creates an IPv4 address from an `in_addr.s_addr` value (network byte order in memory).
    package init(ipv4Network value: UInt32) {
        self.storage = .v4(UInt32(bigEndian: value))
    }
}
