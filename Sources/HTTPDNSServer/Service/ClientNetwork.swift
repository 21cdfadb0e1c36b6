import HTTPDNS

/// The network a client is counted by for rate and connection limits: an IPv4 address (also when a dual-stack
/// listener sees it as ::ffff:a.b.c.d), or an IPv6 /64 (which one host usually owns, and can change addresses within
/// at will).
enum ClientNetwork: Hashable, Sendable {
    case v4(UInt32)
    case v6(UInt64)
    /// No address to go by (or, for the rate limiter, the bucket that clients share once its table is full).
    case shared

    init(_ client: IPAddress?) {
        guard let client else {
            self = .shared
            return
        }
        let bytes = client.bytes
        if bytes.count == 4 {
            self = .v4(bytes.reduce(0) { $0 << 8 | UInt32($1) })
        } else if bytes.prefix(10).allSatisfy({ $0 == 0 }), bytes[bytes.startIndex + 10] == 0xff,
            bytes[bytes.startIndex + 11] == 0xff
        {
            // An IPv4 client of a dual-stack listener (::ffff:a.b.c.d) is that IPv4 address, not one /64 shared by
            // every IPv4 client.
            self = .v4(bytes.suffix(4).reduce(0) { $0 << 8 | UInt32($1) })
        } else {
            self = .v6(bytes.prefix(8).reduce(0) { $0 << 8 | UInt64($1) })
        }
    }
}
