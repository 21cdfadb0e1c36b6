package import HTTPDNS

/// DNS cookies (RFC 7873) with the interoperable server cookie of RFC 9018, so that a UDP client that comes back
/// proves its source address: a forger who never sees the server's answers cannot send a valid server cookie for a
/// victim's address, so a query that carries one counts as verified for the rate limit and the upstream places
/// (`ServiceRequest.verifiedSource`), as TCP does.
///
/// A server cookie is version 1, three reserved bytes, a timestamp (seconds) and SipHash-2-4, under this process's
/// random key, of the client cookie, the version, the reserved bytes, the timestamp and the client's address. It is
/// valid from an hour before now to five minutes ahead (RFC 9018 §4.3). Every answer to a query with a cookie
/// carries the client cookie and a new server cookie.
package struct DNSCookies: Sendable {
    /// The EDNS option code.
    static let optionCode: UInt16 = 10
    /// How old a server cookie may be, in seconds.
    static let lifetime: UInt32 = 3_600
    /// How far ahead a server cookie's timestamp may be, in seconds (clock skew between a fleet's servers).
    static let skew: UInt32 = 300

    private let key: (UInt64, UInt64)

    /// Cookies under a random key (a restart makes every server cookie invalid: clients then get a new one).
    package init() {
        var generator = SystemRandomNumberGenerator()
        key = (generator.next(), generator.next())
    }

    /// Cookies under `key` (tests, or a fleet that shares one so a client's cookie is valid on every server).
    init(key: (UInt64, UInt64)) {
        self.key = key
    }

    /// What a query carries.
    package enum Found: Equatable {
        /// No cookie option.
        case none
        /// A cookie option of a length RFC 7873 §5.2.2 does not allow, or a second one (FORMERR).
        case malformed
        /// A client cookie (8 bytes), a server cookie if any (8 to 32 bytes), and the query without the option.
        case cookie(client: [UInt8], server: [UInt8]?, stripped: [UInt8])
    }

    /// The cookie of `query`'s OPT record, if any, and the query without it.
    package static func find(in query: [UInt8]) -> Found {
        guard query.count >= 12, query[10] != 0 || query[11] != 0, let options = DNSMessageWalk.optOptions(query)
        else { return .none }
        var offset = options.lowerBound
        var cookie: Range<Int>?
        while offset + 4 <= options.upperBound {
            let code = UInt16(query[offset]) << 8 | UInt16(query[offset + 1])
            let length = Int(query[offset + 2]) << 8 | Int(query[offset + 3])
            guard offset + 4 + length <= options.upperBound else { return .none }
            if code == optionCode {
                // One COOKIE option a message (RFC 7873 §5.2): a second one, well formed or not, makes it malformed,
                // so that taking one out never leaves another behind.
                guard cookie == nil, length == 8 || (16...40).contains(length) else { return .malformed }
                cookie = offset..<offset + 4 + length
            }
            offset += 4 + length
        }
        guard let cookie else { return .none }
        let data = Array(query[cookie.lowerBound + 4..<cookie.upperBound])
        var stripped = query
        stripped.removeSubrange(cookie)
        let remaining = options.count - cookie.count
        stripped[options.lowerBound - 2] = UInt8(remaining >> 8)
        stripped[options.lowerBound - 1] = UInt8(remaining & 0xFF)
        return .cookie(client: Array(data[0..<8]), server: data.count > 8 ? Array(data[8...]) : nil, stripped: stripped)
    }

    /// Whether `server` is a server cookie this process made for `client` and `address`, and is still fresh.
    package func isValid(server: [UInt8], client: [UInt8], address: IPAddress?, now: UInt32) -> Bool {
        guard server.count == 16, server[0] == 1, let address else { return false }
        let timestamp = server[4..<8].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        // Serial-number arithmetic (RFC 1982): the timestamp wraps in 2106.
        let age = now &- timestamp
        guard age <= Self.lifetime || timestamp &- now <= Self.skew else { return false }
        let expected = hash(client: client, header: Array(server[0..<8]), address: address)
        var difference: UInt8 = 0
        for (a, b) in zip(server[8..<16], expected) { difference |= a ^ b }
        return difference == 0
    }

    /// The COOKIE option of an answer: `client` and a new server cookie for `address` at `now`.
    package func option(client: [UInt8], address: IPAddress?, now: UInt32) -> [UInt8] {
        let time = [UInt8(now >> 24), UInt8(now >> 16 & 0xFF), UInt8(now >> 8 & 0xFF), UInt8(now & 0xFF)]
        let header: [UInt8] = [1, 0, 0, 0] + time
        let hashed = address.map { hash(client: client, header: header, address: $0) } ?? Array(repeating: 0, count: 8)
        return [0, UInt8(Self.optionCode), 0, 24] + client + header + hashed
    }

    /// SipHash-2-4 of the client cookie, the server cookie's first 8 bytes and the address, big-endian bytes out.
    private func hash(client: [UInt8], header: [UInt8], address: IPAddress) -> [UInt8] {
        let value = SipHash24.hash(client + header + address.bytes, key: key)
        return (0..<8).map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) }
    }
}

/// SipHash-2-4 (Aumasson and Bernstein), the keyed hash RFC 9018 names for server cookies.
enum SipHash24 {
    static func hash(_ bytes: [UInt8], key: (UInt64, UInt64)) -> UInt64 {
        var v0: UInt64 = 0x736f_6d65_7073_6575 ^ key.0
        var v1: UInt64 = 0x646f_7261_6e64_6f6d ^ key.1
        var v2: UInt64 = 0x6c79_6765_6e65_7261 ^ key.0
        var v3: UInt64 = 0x7465_6462_7974_6573 ^ key.1
        func round() {
            v0 &+= v1
            v1 = v1 << 13 | v1 >> 51
            v1 ^= v0
            v0 = v0 << 32 | v0 >> 32
            v2 &+= v3
            v3 = v3 << 16 | v3 >> 48
            v3 ^= v2
            v0 &+= v3
            v3 = v3 << 21 | v3 >> 43
            v3 ^= v0
            v2 &+= v1
            v1 = v1 << 17 | v1 >> 47
            v1 ^= v2
            v2 = v2 << 32 | v2 >> 32
        }
        let whole = bytes.count / 8 * 8
        var index = 0
        while index < whole {
            var word: UInt64 = 0
            for byte in 0..<8 { word |= UInt64(bytes[index + byte]) << (8 * UInt64(byte)) }
            v3 ^= word
            round()
            round()
            v0 ^= word
            index += 8
        }
        var last = UInt64(bytes.count & 0xFF) << 56
        for byte in 0..<(bytes.count - whole) { last |= UInt64(bytes[whole + byte]) << (8 * UInt64(byte)) }
        v3 ^= last
        round()
        round()
        v0 ^= last
        v2 ^= 0xFF
        for _ in 0..<4 { round() }
        return v0 ^ v1 ^ v2 ^ v3
    }
}
