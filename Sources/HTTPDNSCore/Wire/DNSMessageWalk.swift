/// Walks the sections of a DNS message without parsing more than it must.
package enum DNSMessageWalk {
    /// Calls `body` with where each record after the question starts its fixed part (after the owner name: the type,
    /// the class at +2, the TTL at +4, the data length at +8, the data at +10), in order, until `body` returns
    /// `false`.
    /// - Returns: `false` when the message cannot be walked that far (a name or a record's data runs past the end).
    @discardableResult
    package static func forEachRecord(_ message: [UInt8], _ body: (Int) -> Bool) -> Bool {
        walk(message, body) != nil
    }

    /// Where the last section the header counts ends (bytes after it are not part of the message), or `nil` when the
    /// message cannot be walked that far.
    package static func sectionsEnd(_ message: [UInt8]) -> Int? {
        walk(message) { _ in true }
    }

    /// Walks the question and then the records, calling `body` as ``forEachRecord(_:_:)`` says. Returns where the
    /// walk stopped: after the last record, or at the start of the record `body` stopped at; `nil` when the message
    /// cannot be walked that far.
    private static func walk(_ message: [UInt8], _ body: (Int) -> Bool) -> Int? {
        guard message.count >= 12 else { return nil }
        let questions = Int(message[4]) << 8 | Int(message[5])
        let records =
            (Int(message[6]) << 8 | Int(message[7])) + (Int(message[8]) << 8 | Int(message[9]))
            + (Int(message[10]) << 8 | Int(message[11]))
        var offset = 12
        for _ in 0..<questions {
            guard let end = skipName(message, from: offset), end + 4 <= message.count else { return nil }
            offset = end + 4
        }
        for _ in 0..<records {
            guard let end = skipName(message, from: offset), end + 10 <= message.count else { return nil }
            let next = end + 10 + (Int(message[end + 8]) << 8 | Int(message[end + 9]))
            guard next <= message.count else { return nil }
            guard body(end) else { return offset }
            offset = next
        }
        return offset
    }

    /// Where the fixed part of the message's OPT record starts (its type, after the root name: class at +2, TTL with
    /// the DO flag at +4, data length at +8), or `nil` when it has none or cannot be walked to it.
    package static func optRecord(_ message: [UInt8]) -> Int? {
        var found: Int?
        forEachRecord(message) { start in
            if message[start] == 0, message[start + 1] == 41 { found = start }
            return found == nil
        }
        return found
    }

    /// The bytes of the OPT record's options, or `nil` without an OPT record (or one whose data runs past the end).
    package static func optOptions(_ message: [UInt8]) -> Range<Int>? {
        guard let opt = optRecord(message) else { return nil }
        let start = opt + 10
        let end = start + (Int(message[opt + 8]) << 8 | Int(message[opt + 9]))
        return end <= message.count ? start..<end : nil
    }

    /// `message` without its OPT record (the additional count one less); `message` itself when it has none, `nil` when
    /// it cannot be walked.
    package static func removingOPT(_ message: [UInt8]) -> [UInt8]? {
        guard sectionsEnd(message) != nil else { return nil }
        guard let opt = optRecord(message) else { return message }
        // The OPT record's owner is the root: one byte before its type.
        let end = opt + 10 + (Int(message[opt + 8]) << 8 | Int(message[opt + 9]))
        let additional = Int(message[10]) << 8 | Int(message[11])
        guard additional > 0, opt >= 13 else { return nil }
        var out = message
        out.removeSubrange((opt - 1)..<end)
        out[10] = UInt8((additional - 1) >> 8)
        out[11] = UInt8((additional - 1) & 0xFF)
        return out
    }

    /// `message` with `option` (code, length and data, as written on the wire) added at the end of its OPT record;
    /// `nil` when it has no OPT record, the OPT record does not end the message, or the options would pass 65,535
    /// bytes.
    package static func appendingOption(_ option: [UInt8], to message: [UInt8]) -> [UInt8]? {
        guard let options = optOptions(message), options.upperBound == message.count else { return nil }
        let length = options.count + option.count
        guard length <= 0xFFFF else { return nil }
        var result = message + option
        result[options.lowerBound - 2] = UInt8(length >> 8)
        result[options.lowerBound - 1] = UInt8(length & 0xFF)
        return result
    }

    /// An OPT record (RFC 6891) carrying `options` (each code, length and data, as written on the wire): the root
    /// name, type 41, the package's UDP payload size (``EDNSClientSubnet/payloadSize``) as its class, extended RCODE,
    /// version and flags 0. The one place the package writes an OPT record.
    package static func optRecord(carrying options: [UInt8] = []) -> [UInt8] {
        let size = EDNSClientSubnet.payloadSize
        return [
            0, 0, 41, UInt8(size >> 8), UInt8(size & 0xFF), 0, 0, 0, 0, UInt8(options.count >> 8),
            UInt8(options.count & 0xFF),
        ] + options
    }

    /// `message`, whose records end where it ends and which has no OPT record, with one carrying `options` after its
    /// records (the additional count one more).
    package static func appendingOPTRecord(carrying options: [UInt8], to message: [UInt8]) -> [UInt8] {
        var out = message
        let additional = (Int(out[10]) << 8 | Int(out[11])) + 1
        out[10] = UInt8(additional >> 8)
        out[11] = UInt8(additional & 0xFF)
        return out + optRecord(carrying: options)
    }

    /// The name at `start` written in full (its labels, then the root), and where it ends in the record that holds
    /// it; `nil` past the end, past ``DNSMessageWalk/maximumPointers`` pointers or past 255 bytes.
    package static func expandedName(_ message: [UInt8], at start: Int) -> (wire: [UInt8], end: Int)? {
        var wire: [UInt8] = []
        var position = start
        var end: Int?
        var pointers = 0
        while position < message.count {
            let length = Int(message[position])
            switch length & 0xC0 {
            case 0xC0:
                guard position + 1 < message.count, pointers < maximumPointers else { return nil }
                pointers += 1
                if end == nil { end = position + 2 }
                position = (length & 0x3F) << 8 | Int(message[position + 1])
            case 0:
                // At most 255 octets in all, the root's included: a label needs room for itself and the root.
                guard position + 1 + length <= message.count, wire.count + (length == 0 ? 1 : length + 2) <= 255
                else { return nil }
                wire += message[position...position + length]
                if length == 0 { return (wire, end ?? position + 1) }
                position += 1 + length
            default:
                return nil
            }
        }
        return nil
    }

    /// Where the name starting at `offset` ends (labels, or a compression pointer), `nil` when it runs past the end.
    package static func skipName(_ message: [UInt8], from start: Int) -> Int? {
        var offset = start
        while offset < message.count {
            let length = Int(message[offset])
            if length == 0 { return offset + 1 }
            if length & 0xC0 == 0xC0 { return offset + 2 <= message.count ? offset + 2 : nil }
            guard length <= 63 else { return nil }
            offset += 1 + length
        }
        return nil
    }

    /// The most compression pointers followed in one name.
    static let maximumPointers = 50

    /// The name at `start` with ASCII letters in lower case, its labels joined by dots (a dot or backslash inside a
    /// label escaped with a backslash, as c-ares writes names; the root is ""), and where it ends in the record that holds it (after its last label
    /// or its first pointer); `nil` when a label or pointer runs past the end, a label is not followed by another
    /// byte of the message, or the name takes more than ``maximumPointers`` pointers.
    static func name(in message: UnsafeBufferPointer<UInt8>, at start: Int) -> (text: String, end: Int)? {
        var position = start
        var end: Int?
        var pointers = 0
        var text: [UInt8] = []
        while true {
            guard position < message.count else { return nil }
            let length = Int(message[position])
            if length == 0 { break }
            switch length & 0xC0 {
            case 0xC0:
                guard position + 1 < message.count else { return nil }
                pointers += 1
                let target = (length & 0x3F) << 8 | Int(message[position + 1])
                guard target < message.count, pointers <= maximumPointers else { return nil }
                if end == nil { end = position + 2 }
                position = target
            case 0:
                guard position + length + 1 < message.count else { return nil }
                if !text.isEmpty { text.append(UInt8(ascii: ".")) }
                for byte in message[position + 1...position + length] {
                    if byte == UInt8(ascii: ".") || byte == UInt8(ascii: "\\") { text.append(UInt8(ascii: "\\")) }
                    text.append(byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte)
                }
                position += length + 1
            default:
                return nil
            }
        }
        return (String(decoding: text, as: UTF8.self), end ?? position + 1)
    }
}
