package import HTTPDNS

/// What the service does to a query before relaying it to the forwarder: a client's EDNS Client Subnet option is
/// removed (the server's own network is what upstreams see), and reverse lookups into guarded ranges are refused.
package enum ForwardedQuery {
    /// Why a message cannot be relayed.
    package struct Unreadable: Error {}

    /// `message` without any EDNS Client Subnet option (code 8) in its OPT record; the rest byte for byte.
    /// - Throws: ``Unreadable`` when the records after the question cannot be walked.
    package static func strippingClientSubnet(_ message: [UInt8], questionEnd: Int) throws(Unreadable) -> [UInt8] {
        try strippingOptions(message, questionEnd: questionEnd, codes: [EDNSClientSubnet.optionCode])
    }

    /// `message` without the EDNS options of `codes` in its OPT record; the rest byte for byte.
    /// - Throws: ``Unreadable`` when the records after the question cannot be walked.
    static func strippingOptions(
        _ message: [UInt8], questionEnd: Int, codes: Set<UInt16>
    ) throws(Unreadable) -> [UInt8] {
        guard message.count >= 12 else { throw Unreadable() }
        func count(_ at: Int) -> Int { Int(message[at]) << 8 | Int(message[at + 1]) }
        let records = count(6) + count(8) + count(10)
        var out = Array(message[0..<questionEnd])
        var offset = questionEnd
        for _ in 0..<records {
            let start = offset
            guard let owner = DNSMessageWalk.skipName(message, from: offset), owner + 10 <= message.count else {
                throw Unreadable()
            }
            offset = owner
            let type = count(offset)
            let dataLength = count(offset + 8)
            let dataStart = offset + 10
            guard dataStart + dataLength <= message.count else { throw Unreadable() }
            guard type == 41 else {
                out += message[start..<dataStart + dataLength]
                offset = dataStart + dataLength
                continue
            }
            var options: [UInt8] = []
            var cursor = dataStart
            while cursor < dataStart + dataLength {
                guard cursor + 4 <= dataStart + dataLength else { throw Unreadable() }
                let code = count(cursor)
                let length = count(cursor + 2)
                guard cursor + 4 + length <= dataStart + dataLength else { throw Unreadable() }
                if !codes.contains(UInt16(code)) { options += message[cursor..<cursor + 4 + length] }
                cursor += 4 + length
            }
            out += message[start..<offset + 8]
            out.append(UInt8(options.count >> 8))
            out.append(UInt8(options.count & 0xFF))
            out += options
            offset = dataStart + dataLength
        }
        out += message[offset...]
        return out
    }

    /// The address range a reverse-lookup name (`4.3.2.1.in-addr.arpa`, nibbles under `ip6.arpa`) points into, as
    /// its first address (the labels given, the rest zero); `nil` for any other name.
    package static func reverseTarget(_ name: String) -> IPAddress? {
        let labels = name.split(separator: ".", omittingEmptySubsequences: false)
        if name.hasSuffix(".in-addr.arpa") || name == "in-addr.arpa" {
            let octets = labels.dropLast(2).reversed().compactMap { UInt8($0) }
            guard octets.count == labels.count - 2, octets.count <= 4 else { return nil }
            return IPAddress(bytes: octets + [UInt8](repeating: 0, count: 4 - octets.count))
        }
        if name.hasSuffix(".ip6.arpa") || name == "ip6.arpa" {
            let nibbles = labels.dropLast(2).reversed().compactMap { UInt8($0, radix: 16) }
            guard nibbles.count == labels.count - 2, nibbles.count <= 32,
                labels.dropLast(2).allSatisfy({ $0.count == 1 })
            else { return nil }
            let padded = nibbles + [UInt8](repeating: 0, count: 32 - nibbles.count)
            let bytes = stride(from: 0, to: 32, by: 2).map { padded[$0] << 4 | padded[$0 + 1] }
            return IPAddress(bytes: bytes)
        }
        return nil
    }
}
