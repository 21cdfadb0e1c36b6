/// DNS records as people read them: the presentation format of RFC 1035 §5.1 and of each type's RFC, as `dig` and
/// `kdig` print them, for `hostsctl resolve --type`. Types it does not know are shown in the generic form of
/// RFC 3597 (`\# LENGTH HEX`), and so is any record whose data does not read as its type says: a hostile server's
/// answer is shown, never trusted. Every read is bounds-checked; names follow at most
/// ``DNSMessageWalk/maximumPointers`` compression pointers; what it writes is printable ASCII only (anything else is
/// escaped as `\DDD`), so an answer cannot reach a terminal as control characters (the fuzz target `record-text`
/// holds it to both).
package enum DNSRecordText {
    /// One record of an answer.
    package struct Record: Sendable, Hashable {
        /// The owner name, with its trailing dot.
        package var name: String
        /// The type's number.
        package var type: UInt16
        /// The time to live, seconds.
        package var ttl: UInt32
        /// The data in presentation format.
        package var data: String

        /// A record.
        package init(name: String, type: UInt16, ttl: UInt32, data: String) {
            self.name = name
            self.type = type
            self.ttl = ttl
            self.data = data
        }

        /// The type's mnemonic (`TYPE65534` for one without).
        package var typeName: String { DNSRecordText.typeName(type) }
    }

    /// The response code and the answer section of a message.
    package struct Answer: Sendable, Hashable {
        /// The RCODE (the header's four bits).
        package var rcode: Int
        /// The answer section's records, in order.
        package var records: [Record]

        /// An answer.
        package init(rcode: Int, records: [Record]) {
            self.rcode = rcode
            self.records = records
        }
    }

    /// The types known by name (RFC 1035, 3596, 2782, 4034, 6698, 6844, 9460 and others in common use).
    static let types: [(name: String, code: UInt16)] = [
        ("A", 1), ("NS", 2), ("CNAME", 5), ("SOA", 6), ("PTR", 12), ("HINFO", 13), ("MX", 15), ("TXT", 16),
        ("AAAA", 28), ("SRV", 33), ("NAPTR", 35), ("DNAME", 39), ("DS", 43), ("SSHFP", 44), ("RRSIG", 46),
        ("NSEC", 47), ("DNSKEY", 48), ("TLSA", 52), ("CDS", 59), ("SVCB", 64), ("HTTPS", 65), ("SPF", 99),
        ("ANY", 255), ("URI", 256), ("CAA", 257),
    ]

    /// The number of a type given as its mnemonic (any case), `TYPEnnn` (RFC 3597) or a number; `nil` for none.
    package static func typeCode(_ text: String) -> UInt16? {
        let upper = text.uppercased()
        if let known = types.first(where: { $0.name == upper }) { return known.code }
        if upper.hasPrefix("TYPE"), let code = UInt16(upper.dropFirst(4)) { return code }
        return UInt16(upper)
    }

    /// The mnemonic of `code`, or `TYPEnnn`.
    package static func typeName(_ code: UInt16) -> String {
        types.first(where: { $0.code == code })?.name ?? "TYPE\(code)"
    }

    /// A recursive query for `name` of `type` with an OPT record (the package's UDP payload size), ID 0.
    package static func query(for name: HostName, type: UInt16) -> [UInt8] {
        var query = DNSWireMessage.query(for: name, type: .a)
        query[query.count - 4] = UInt8(type >> 8)
        query[query.count - 3] = UInt8(type & 0xFF)
        return DNSMessageWalk.appendingOPTRecord(carrying: [], to: query)
    }

    /// The name a reverse lookup of `ip` asks for: `4.3.2.1.in-addr.arpa`, or 32 nibbles under `ip6.arpa`.
    package static func reverseName(_ ip: IPAddress) -> String {
        let bytes = ip.bytes
        if bytes.count == 4 { return bytes.reversed().map(String.init).joined(separator: ".") + ".in-addr.arpa" }
        let digits = Array("0123456789abcdef")
        let nibbles = bytes.reversed().flatMap { [digits[Int($0 & 0x0F)], digits[Int($0 >> 4)]] }
        return nibbles.map(String.init).joined(separator: ".") + ".ip6.arpa"
    }

    /// The RCODE and answer section of `message`; `nil` when it is not a response that can be walked.
    package static func answer(_ message: [UInt8]) -> Answer? {
        guard message.count >= 12, message[2] & 0x80 != 0 else { return nil }
        let questions = Int(message[4]) << 8 | Int(message[5])
        let answers = Int(message[6]) << 8 | Int(message[7])
        var offset = 12
        for _ in 0..<questions {
            guard let end = DNSMessageWalk.skipName(message, from: offset), end + 4 <= message.count else { return nil }
            offset = end + 4
        }
        var records: [Record] = []
        for _ in 0..<answers {
            guard let (owner, end) = name(message, at: offset), end + 10 <= message.count else { return nil }
            let type = UInt16(message[end]) << 8 | UInt16(message[end + 1])
            let ttl = message[end + 4..<end + 8].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            let length = Int(message[end + 8]) << 8 | Int(message[end + 9])
            let data = end + 10
            guard data + length <= message.count else { return nil }
            // OPT has no place in the answer section; anything else is shown.
            if type != 41 {
                let text = rdata(type, message, data..<data + length) ?? generic(message[data..<data + length])
                records.append(Record(name: owner, type: type, ttl: ttl, data: text))
            }
            offset = data + length
        }
        return Answer(rcode: Int(message[3] & 0x0F), records: records)
    }

    /// The names of the CNAME chain from `name` in `records`, in order (`name` first); at most 16 links.
    package static func chain(from name: String, in records: [Record]) -> [String] {
        var chain = [name]
        var current = name.lowercased()
        for _ in 0..<16 {
            guard let link = records.first(where: { $0.type == 5 && $0.name.lowercased() == current }),
                !chain.contains(where: { $0.lowercased() == link.data.lowercased() })
            else { break }
            chain.append(link.data)
            current = link.data.lowercased()
        }
        return chain
    }

    // MARK: Reading

    /// The name at `start` in presentation form (trailing dot; `.`, `\` and bytes outside printable ASCII escaped)
    /// and where it ends in the record that holds it.
    static func name(_ message: [UInt8], at start: Int) -> (name: String, end: Int)? {
        guard let (wire, end) = DNSMessageWalk.expandedName(message, at: start) else { return nil }
        var labels: [String] = []
        var position = 0
        while wire[position] != 0 {
            let length = Int(wire[position])
            // A space is `\032` in a name, as dig writes it: a name never splits a line into fields.
            labels.append(escaped(wire[position + 1...position + length], special: [UInt8(ascii: ".")], spaces: true))
            position += 1 + length
        }
        return (labels.isEmpty ? "." : labels.joined(separator: ".") + ".", end)
    }

    /// `bytes` with `\`, the `special` bytes and anything outside printable ASCII escaped (`\.`, `\DDD`), and with
    /// `spaces` the space too (`\032`).
    static func escaped(_ bytes: ArraySlice<UInt8>, special: Set<UInt8>, spaces: Bool = false) -> String {
        var text = ""
        for byte in bytes {
            if byte < 0x21 && (byte != 0x20 || spaces) || byte > 0x7E {
                let digits = String(byte)
                text += "\\" + String(repeating: "0", count: 3 - digits.count) + digits
            } else if byte == UInt8(ascii: "\\") || special.contains(byte) {
                text += "\\" + String(UnicodeScalar(byte))
            } else {
                text += String(UnicodeScalar(byte))
            }
        }
        return text
    }

    /// RFC 3597's generic form: `\# LENGTH HEX`.
    static func generic(_ data: ArraySlice<UInt8>) -> String {
        data.isEmpty ? "\\# 0" : "\\# \(data.count) " + hex(data)
    }

    static func hex(_ bytes: ArraySlice<UInt8>) -> String {
        bytes.map { byte in
            let digits = String(byte, radix: 16, uppercase: true)
            return digits.count == 1 ? "0" + digits : digits
        }.joined()
    }

    /// A 16-bit number at `offset`.
    static func number(_ message: [UInt8], _ offset: Int) -> Int {
        Int(message[offset]) << 8 | Int(message[offset + 1])
    }

    /// The data of a record of `type` at `range`, `nil` when the type is not known here or the data does not read
    /// as it should.
    static func rdata(_ type: UInt16, _ message: [UInt8], _ range: Range<Int>) -> String? {
        let data = message[range]
        let start = range.lowerBound
        /// A name that must fill the data to its end.
        func names(_ count: Int, from offset: Int) -> ([String], Int)? {
            var found: [String] = []
            var position = offset
            for _ in 0..<count {
                guard position < range.upperBound, let (text, end) = name(message, at: position),
                    end <= range.upperBound
                else { return nil }
                found.append(text)
                position = end
            }
            return (found, position)
        }
        switch type {
        case 1:
            return data.count == 4 ? data.map(String.init).joined(separator: ".") : nil
        case 28:
            return data.count == 16 ? IPAddress(bytes: Array(data))?.description : nil
        case 2, 5, 12, 39:
            guard let (found, end) = names(1, from: start), end == range.upperBound else { return nil }
            return found[0]
        case 15:
            guard data.count > 2, let (found, end) = names(1, from: start + 2), end == range.upperBound else {
                return nil
            }
            return "\(number(message, start)) \(found[0])"
        case 16, 99:
            return characterStrings(data)
        case 6:
            guard let (found, end) = names(2, from: start), end + 20 == range.upperBound else { return nil }
            let numbers = stride(from: end, to: end + 20, by: 4).map { offset in
                message[offset..<offset + 4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            }
            return ([found[0], found[1]] + numbers.map(String.init)).joined(separator: " ")
        case 33:
            guard data.count > 6, let (found, end) = names(1, from: start + 6), end == range.upperBound else {
                return nil
            }
            return "\(number(message, start)) \(number(message, start + 2)) \(number(message, start + 4)) \(found[0])"
        case 257:
            guard data.count >= 2, data.count >= 2 + Int(message[start + 1]) else { return nil }
            let tagEnd = start + 2 + Int(message[start + 1])
            let tag = escaped(message[start + 2..<tagEnd], special: [34])
            return "\(message[start]) \(tag) \"\(escaped(message[tagEnd..<range.upperBound], special: [34]))\""
        case 43, 59:
            guard data.count > 4 else { return nil }
            return "\(number(message, start)) \(message[start + 2]) \(message[start + 3]) "
                + hex(message[start + 4..<range.upperBound])
        case 44:
            guard data.count > 2 else { return nil }
            return "\(message[start]) \(message[start + 1]) " + hex(message[start + 2..<range.upperBound])
        case 52:
            guard data.count > 3 else { return nil }
            return "\(message[start]) \(message[start + 1]) \(message[start + 2]) "
                + hex(message[start + 3..<range.upperBound])
        case 64, 65:
            return serviceBinding(message, range)
        default:
            return nil
        }
    }

    /// TXT data: each character-string quoted, with `"` and `\` escaped.
    static func characterStrings(_ data: ArraySlice<UInt8>) -> String? {
        var strings: [String] = []
        var position = data.startIndex
        while position < data.endIndex {
            let length = Int(data[position])
            guard position + 1 + length <= data.endIndex else { return nil }
            strings.append("\"" + escaped(data[position + 1..<position + 1 + length], special: [34]) + "\"")
            position += 1 + length
        }
        return strings.joined(separator: " ")
    }
}

extension DNSRecordText {
    /// The SvcParamKeys of RFC 9460 and RFC 9461 (and RFC 9540's `ohttp`), by number.
    static let serviceKeys: [UInt16: String] = [
        0: "mandatory", 1: "alpn", 2: "no-default-alpn", 3: "port", 4: "ipv4hint", 5: "ech", 6: "ipv6hint",
        7: "dohpath", 8: "ohttp",
    ]

    /// SVCB and HTTPS data (RFC 9460 §2.1): the priority, the target and each parameter as `key=value`; `nil` when
    /// ``ServiceBinding`` refuses the data (keys out of order, a value of the wrong shape, a compressed target).
    static func serviceBinding(_ message: [UInt8], _ range: Range<Int>) -> String? {
        guard let binding = try? ServiceBinding(rdata: message[range]),
            let (target, _) = name(message, at: range.lowerBound + 2)
        else { return nil }
        var parts = ["\(binding.priority)", target]
        for key in binding.parameters.keys.sorted() {
            guard let text = serviceParameter(key, binding.parameters[key]?[...] ?? []) else { return nil }
            parts.append(text)
        }
        return parts.joined(separator: " ")
    }

    /// One SvcParam as `key=value` (`key` alone for one without a value).
    static func serviceParameter(_ key: UInt16, _ value: ArraySlice<UInt8>) -> String? {
        let name = serviceKeys[key] ?? "key\(key)"
        switch key {
        case 0:
            guard !value.isEmpty, value.count % 2 == 0 else { return nil }
            let keys = stride(from: value.startIndex, to: value.endIndex, by: 2).map { offset in
                let code = UInt16(value[offset]) << 8 | UInt16(value[offset + 1])
                return serviceKeys[code] ?? "key\(code)"
            }
            return "\(name)=" + keys.joined(separator: ",")
        case 1:
            var ids: [String] = []
            var position = value.startIndex
            while position < value.endIndex {
                let length = Int(value[position])
                guard length > 0, position + 1 + length <= value.endIndex else { return nil }
                ids.append(escaped(value[position + 1..<position + 1 + length], special: [44, 34]))
                position += 1 + length
            }
            return ids.isEmpty ? nil : "\(name)=\"" + ids.joined(separator: ",") + "\""
        case 2, 8:
            return value.isEmpty ? name : nil
        case 3:
            guard value.count == 2 else { return nil }
            return "\(name)=\(Int(value[value.startIndex]) << 8 | Int(value[value.startIndex + 1]))"
        case 4, 6:
            let size = key == 4 ? 4 : 16
            guard !value.isEmpty, value.count % size == 0 else { return nil }
            let addresses = stride(from: value.startIndex, to: value.endIndex, by: size).compactMap { offset in
                IPAddress(bytes: Array(value[offset..<offset + size]))?.description
            }
            return "\(name)=" + addresses.joined(separator: ",")
        case 5:
            return "\(name)=" + base64(value)
        default:
            return "\(name)=\"" + escaped(value, special: [34]) + "\""
        }
    }

    /// `bytes` in base64 (RFC 4648, padded).
    static func base64(_ bytes: ArraySlice<UInt8>) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        var text = ""
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let chunk = Array(bytes[index..<min(index + 3, bytes.endIndex)])
            let value = chunk.enumerated().reduce(0) { $0 | Int($1.element) << (16 - 8 * $1.offset) }
            for position in 0..<4 {
                text.append(position <= chunk.count ? alphabet[value >> (18 - 6 * position) & 0x3F] : "=")
            }
            index += 3
        }
        return text
    }
}
