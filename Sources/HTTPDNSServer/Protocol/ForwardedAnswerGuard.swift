import HTTPDNS

/// The private-address guard for relayed answers of other types: the addresses an answer hands out, wherever they
/// stand (A and AAAA records in any section, such as the glue beside SRV or MX, and the `ipv4hint` and `ipv6hint`
/// of SVCB and HTTPS records), checked as the resolver checks A and AAAA answers.
package enum ForwardedAnswerGuard {
    /// Whether `message` hands out an address that is not public (private, loopback, link-local, …), or cannot be
    /// walked (an answer that cannot be read is not relayed either).
    package static func handsOutGuardedAddress(_ message: [UInt8]) -> Bool {
        var guarded = false
        let readable = DNSMessageWalk.forEachRecord(message) { start in
            let type = Int(message[start]) << 8 | Int(message[start + 1])
            let data = start + 10
            let end = data + (Int(message[start + 8]) << 8 | Int(message[start + 9]))
            switch type {
            case 1, 28: guarded = isGuarded(message[data..<end])
            case 64, 65: guarded = hintsGuarded(message, data: data, end: end)
            default: break
            }
            return !guarded
        }
        return guarded || !readable
    }

    /// An address record's data that is not a public address (or not an address at all).
    private static func isGuarded(_ bytes: ArraySlice<UInt8>) -> Bool {
        guard bytes.count == 4 || bytes.count == 16, let address = IPAddress(bytes: Array(bytes)) else { return true }
        return address.isNonPublic
    }

    /// Whether an SVCB or HTTPS record's data (RFC 9460: priority, target name, then key, length, value
    /// parameters) holds a guarded address in its `ipv4hint` (4) or `ipv6hint` (6), or cannot be read.
    private static func hintsGuarded(_ message: [UInt8], data: Int, end: Int) -> Bool {
        guard data + 2 <= end, var parameter = DNSMessageWalk.skipName(message, from: data + 2) else { return true }
        while parameter < end {
            guard parameter + 4 <= end else { return true }
            let key = Int(message[parameter]) << 8 | Int(message[parameter + 1])
            let length = Int(message[parameter + 2]) << 8 | Int(message[parameter + 3])
            let value = parameter + 4
            guard value + length <= end else { return true }
            if key == 4 || key == 6 {
                let size = key == 4 ? 4 : 16
                guard length % size == 0 else { return true }
                for at in stride(from: value, to: value + length, by: size) where isGuarded(message[at..<at + size]) {
                    return true
                }
            }
            parameter = value + length
        }
        return false
    }
}
