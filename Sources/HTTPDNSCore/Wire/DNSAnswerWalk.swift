/// The A and AAAA records of a DNS answer, read in Swift without allocating beyond the result: how
/// ``DNSWireMessage`` and the c-ares module read every answer.
///
/// It gives exactly what c-ares 1.18's `ares_parse_a_reply` / `ares_parse_aaaa_reply` give, by the same rules:
/// - one question, whose name starts the chain;
/// - answer records in order: an `IN` record of the type asked for, with data of the address's length, whose owner
///   is the current name (ASCII case aside) adds its address; any `IN` CNAME makes its target the current name;
/// - each address's TTL is at most the smallest CNAME TTL, and TTLs of 2^31 s or more read as 0.
///
/// Like c-ares, it refuses the whole answer (`nil`, which c-ares calls `ARES_EBADRESP`) when a CNAME's target is not
/// a host name (a character other than letters, digits, `-`, `_` and `/`; owner names may hold any byte and
/// are compared byte for byte, ASCII case aside, but for c-ares's one quirk kept in ``sameAsCString(_:_:_:)``),
/// when a name takes more than
/// ``DNSMessageWalk/maximumPointers`` compression pointers, or when anything runs past the end. The tests and the
/// fuzz target `answer-walk` hold it to c-ares's own parsers, byte for byte, both ways.
package enum DNSAnswerWalk {
    /// The longest run of compression pointers followed in one name.
    private static let maximumPointers = DNSMessageWalk.maximumPointers

    /// The addresses of `type` in `message`, at most `limit`: empty when it has none (`ARES_ENODATA`), `nil` when
    /// the message is malformed or names something other than a host (`ARES_EBADRESP`).
    package static func addresses(
        in message: UnsafeBufferPointer<UInt8>, type: DNSRecordType, source: ResolutionSource, limit: Int
    ) -> [ResolvedAddress]? {
        let count = message.count
        guard count >= DNSWireMessage.headerLength else { return nil }
        guard message[4] == 0, message[5] == 1 else { return nil }
        let answers = Int(message[6]) << 8 | Int(message[7])
        guard let questionEnd = nameEnd(message, from: DNSWireMessage.headerLength),
            questionEnd + 4 <= count
        else { return nil }
        var current = DNSWireMessage.headerLength
        var offset = questionEnd + 4
        var addresses: [ResolvedAddress] = []
        var smallestCNAMETTL = Int32.max
        let wantedType = UInt16(type.rawValue)
        let addressLength = type == .a ? 4 : 16
        for _ in 0..<answers {
            let owner = offset
            guard let end = nameEnd(message, from: owner), end + 10 <= count else { return nil }
            let recordType = UInt16(message[end]) << 8 | UInt16(message[end + 1])
            let recordClass = UInt16(message[end + 2]) << 8 | UInt16(message[end + 3])
            let ttl = Int32(
                bitPattern: UInt32(message[end + 4]) << 24 | UInt32(message[end + 5]) << 16
                    | UInt32(message[end + 6]) << 8 | UInt32(message[end + 7]))
            let length = Int(message[end + 8]) << 8 | Int(message[end + 9])
            let data = end + 10
            guard data + length <= count else { return nil }
            if recordClass == 1 {
                if recordType == wantedType, length == addressLength {
                    guard let same = sameName(message, owner, current) else { return nil }
                    if same, addresses.count < limit {
                        guard let ip = address(message, at: data, type: type) else { return nil }
                        addresses.append(ResolvedAddress(ip: ip, ttl: UInt32(bitPattern: ttl), source: source))
                    }
                } else if recordType == 5 {
                    // c-ares follows every IN CNAME, whatever its owner, and reads its target from the message.
                    guard nameEnd(message, from: data, hostName: true) != nil else { return nil }
                    current = data
                    smallestCNAMETTL = min(smallestCNAMETTL, ttl)
                }
            }
            offset = data + length
        }
        for index in addresses.indices {
            let ttl = min(Int32(bitPattern: addresses[index].ttl), smallestCNAMETTL)
            addresses[index].ttl = UInt32(max(ttl, 0))
        }
        return addresses
    }

    /// The address in the record data at `data`.
    private static func address(_ message: UnsafeBufferPointer<UInt8>, at data: Int, type: DNSRecordType)
        -> IPAddress?
    {
        type == .a
            ? IPAddress(ipv4: message[data], message[data + 1], message[data + 2], message[data + 3])
            : IPAddress(bytes: UnsafeBufferPointer(rebasing: message[data..<data + 16]))
    }

    /// Where the encoded name at `start` ends in the record that holds it (after its last label or its first
    /// pointer); `nil` when anything is out of bounds or, for a `hostName`, a label holds another character than
    /// ``isHostNameCharacter(_:)`` allows.
    private static func nameEnd(_ message: UnsafeBufferPointer<UInt8>, from start: Int, hostName: Bool = false) -> Int?
    {
        var position = start
        var end: Int?
        var pointers = 0
        while true {
            guard position < message.count else { return nil }
            let length = Int(message[position])
            if length == 0 { return end ?? position + 1 }
            switch length & 0xC0 {
            case 0xC0:
                guard position + 1 < message.count else { return nil }
                let target = (length & 0x3F) << 8 | Int(message[position + 1])
                pointers += 1
                guard target < message.count, pointers <= maximumPointers else { return nil }
                if end == nil { end = position + 2 }
                position = target
            case 0:
                // c-ares wants the byte after the label inside the message too.
                guard position + length + 1 < message.count else { return nil }
                if hostName {
                    for index in position + 1...position + length where !isHostNameCharacter(message[index]) {
                        return nil
                    }
                }
                position += length + 1
            default:
                return nil
            }
        }
    }

    /// Whether the names at `a` and `b` are the same, ASCII case aside; `nil` when one cannot be walked.
    private static func sameName(_ message: UnsafeBufferPointer<UInt8>, _ a: Int, _ b: Int) -> Bool? {
        var (left, right) = (a, b)
        var jumps = 0
        while true {
            guard let l = labelStart(message, left, &jumps), let r = labelStart(message, right, &jumps) else {
                return nil
            }
            let (leftLength, rightLength) = (Int(message[l]), Int(message[r]))
            // c-ares writes a label that is one zero byte as that byte, which ends its C string there.
            if (leftLength == 1 && message[l + 1] == 0) || (rightLength == 1 && message[r + 1] == 0) {
                return sameAsCString(message, a, b)
            }
            guard leftLength == rightLength else { return false }
            if leftLength == 0 { return true }
            for index in 1...leftLength where lowered(message[l + index]) != lowered(message[r + index]) {
                return false
            }
            left = l + leftLength + 1
            right = r + rightLength + 1
        }
    }

    /// ``sameName(_:_:_:)`` for names with a label that is one zero byte, as c-ares 1.18 decides it: each name
    /// written out as `ares_expand_name` writes it (labels joined by dots; a dot or backslash escaped with a
    /// backslash; other bytes outside printable ASCII as `\DDD`, except that a label of one zero byte is written as
    /// that byte, so the C string ends there) and the two compared with ASCII case aside (`strcasecmp`). Other
    /// zero bytes are escaped, so everywhere else comparing the labels' bytes gives the same answer.
    private static func sameAsCString(_ message: UnsafeBufferPointer<UInt8>, _ a: Int, _ b: Int) -> Bool? {
        guard let left = cString(message, a), let right = cString(message, b) else { return nil }
        return left == right
    }

    /// The name at `start` as c-ares's C string of it, lower-cased (see ``sameAsCString(_:_:_:)``).
    private static func cString(_ message: UnsafeBufferPointer<UInt8>, _ start: Int) -> [UInt8]? {
        var text: [UInt8] = []
        var position = start
        var jumps = 0
        var first = true
        while true {
            guard let label = labelStart(message, position, &jumps) else { return nil }
            let length = Int(message[label])
            if length == 0 { return text }
            if !first { text.append(UInt8(ascii: ".")) }
            first = false
            if length == 1, message[label + 1] == 0 { return text }
            for index in label + 1...label + length {
                let byte = message[index]
                if byte < 0x20 || byte > 0x7E {
                    text.append(UInt8(ascii: "\\"))
                    text.append(contentsOf: [byte / 100, byte / 10 % 10, byte % 10].map { UInt8(ascii: "0") + $0 })
                } else {
                    if byte == UInt8(ascii: ".") || byte == UInt8(ascii: "\\") { text.append(UInt8(ascii: "\\")) }
                    text.append(lowered(byte))
                }
            }
            position = label + length + 1
        }
    }

    /// The label at `position`, after following pointers; `nil` when out of bounds or looping.
    private static func labelStart(_ message: UnsafeBufferPointer<UInt8>, _ position: Int, _ jumps: inout Int) -> Int? {
        var position = position
        while position < message.count, message[position] & 0xC0 == 0xC0 {
            guard position + 1 < message.count else { return nil }
            jumps += 1
            guard jumps <= 2 * maximumPointers + 2 else { return nil }
            position = Int(message[position] & 0x3F) << 8 | Int(message[position + 1])
        }
        guard position < message.count, message[position] & 0xC0 == 0,
            position + Int(message[position]) < message.count
        else { return nil }
        return position
    }

    /// Whether c-ares takes `byte` in a host name (a CNAME's target): letters, digits, `-`, `_` and `/` (a dot inside a
    /// label, which c-ares would escape with a backslash, is refused; so is `*`). Found by holding the walk to c-ares.
    private static func isHostNameCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "/"):
            true
        default: false
        }
    }

    private static func lowered(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
    }
}
