/// What the service does to a query before relaying it to the forwarder: every EDNS option of the client is removed
/// (its subnet: the server chooses what upstreams see; its cookie, padding and the rest: they belong to the client's
/// hop, and the relay cache's key does not hold them, so what went upstream must not depend on them), and reverse
/// lookups into guarded ranges are refused.
package enum ForwardedQuery {
    /// Why a message cannot be relayed.
    package struct Unreadable: Error {}

    /// `message` without any EDNS Client Subnet option (code 8) in its OPT record; the rest byte for byte.
    /// - Throws: ``Unreadable`` when the records after the question cannot be walked.
    package static func strippingClientSubnet(_ message: [UInt8], questionEnd: Int) throws(Unreadable) -> [UInt8] {
        try strippingOptions(message, questionEnd: questionEnd) { $0 == EDNSClientSubnet.optionCode }
    }

    /// `message` with an OPT record that carries no option but a forwarding marker (``ForwardingMarker``, which
    /// must travel on for loops to be seen), its payload size and flags kept, as relayed.
    /// - Throws: ``Unreadable`` when the records after the question cannot be walked.
    package static func strippingEveryOption(_ message: [UInt8], questionEnd: Int) throws(Unreadable) -> [UInt8] {
        try strippingOptions(message, questionEnd: questionEnd) { $0 != ForwardingMarker.optionCode }
    }

    /// `message` without the EDNS options whose code `removes` says; the rest byte for byte.
    /// - Throws: ``Unreadable`` when the records after the question cannot be walked.
    package static func strippingOptions(
        _ message: [UInt8], questionEnd: Int, removing removes: (UInt16) -> Bool
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
                if !removes(UInt16(code)) { options += message[cursor..<cursor + 4 + length] }
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
