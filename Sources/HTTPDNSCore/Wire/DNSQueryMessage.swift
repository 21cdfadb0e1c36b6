/// A DNS query as a DoH client sends it (RFC 8484 §4.1, RFC 1035 §4.1): the header and its one question.
///
/// Parsed by hand, without c-ares, because the server reads what clients send, not what a server answered: a
/// name is read label by label (no compression pointers, which a question never needs), and everything after the
/// question (EDNS options, other records) is ignored.
package struct DNSQueryMessage: Sendable, Hashable {
    /// The query ID, echoed in the answer.
    package var id: UInt16
    /// The opcode (0 is a standard query).
    package var opcode: UInt8
    /// Whether the client asked for recursion (echoed).
    package var recursionDesired: Bool
    /// The name asked for, ASCII letters lower-cased, without the trailing dot; empty when a label holds a dot (the
    /// service refuses it).
    package var name: String
    /// The question section exactly as sent (name, type, class), echoed in the answer.
    package var question: [UInt8]
    /// The record type (1 = A, 28 = AAAA, …).
    package var type: UInt16
    /// The class (1 = IN).
    package var questionClass: UInt16
    /// Whether the query carries an EDNS OPT record (RFC 6891): the answer then carries one too.
    package var usesEDNS: Bool

    /// The largest DNS message (RFC 1035 over TCP, RFC 8484).
    package static let maximumLength = 65_535

    /// Why a message cannot be read; the service answers HTTP 400 with it.
    package struct Malformed: Error, Hashable {
        /// What is wrong, for the 400 answer.
        package var reason: String

        /// A reason.
        package init(reason: String) { self.reason = reason }
    }

    /// Reads `bytes`.
    /// - Throws: ``Malformed`` for a message that is shorter than a header, a response rather than a query, has not
    ///   exactly one question, or a question that runs past the end or uses compression.
    package init(_ bytes: [UInt8]) throws(Malformed) {
        guard bytes.count >= 12 else { throw Malformed(reason: "a DNS message of \(bytes.count) bytes has no header") }
        guard bytes.count <= Self.maximumLength else { throw Malformed(reason: "the DNS message is too long") }
        let flags = UInt16(bytes[2]) << 8 | UInt16(bytes[3])
        guard flags & 0x8000 == 0 else { throw Malformed(reason: "the DNS message is a response, not a query") }
        let questions = UInt16(bytes[4]) << 8 | UInt16(bytes[5])
        guard questions == 1 else { throw Malformed(reason: "the DNS query has \(questions) questions, not 1") }
        var offset = 12
        // The name as text, written once: labels joined by dots, ASCII letters lower-cased and nothing else.
        var text: [UInt8] = []
        text.reserveCapacity(min(bytes.count - 12, 255))
        var nameLength = 0
        var usable = true
        while true {
            guard offset < bytes.count else { throw Malformed(reason: "the DNS question is truncated") }
            let length = Int(bytes[offset])
            offset += 1
            if length == 0 { break }
            guard length <= 63 else { throw Malformed(reason: "the DNS question uses compression or a long label") }
            guard offset + length <= bytes.count else { throw Malformed(reason: "the DNS question is truncated") }
            nameLength += length + 1
            guard nameLength <= 255 else { throw Malformed(reason: "the name in the DNS question is too long") }
            if !text.isEmpty { text.append(UInt8(ascii: ".")) }
            for byte in bytes[offset..<offset + length] {
                // A label holding a dot cannot be written as text without changing the name: such a name is refused.
                if byte == UInt8(ascii: ".") { usable = false }
                text.append(byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte)
            }
            offset += length
        }
        guard offset + 4 <= bytes.count else { throw Malformed(reason: "the DNS question is truncated") }
        id = UInt16(bytes[0]) << 8 | UInt16(bytes[1])
        opcode = UInt8((flags >> 11) & 0xf)
        recursionDesired = flags & 0x0100 != 0
        name = usable ? String(decoding: text, as: UTF8.self) : ""
        type = UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
        questionClass = UInt16(bytes[offset + 2]) << 8 | UInt16(bytes[offset + 3])
        question = Array(bytes[12..<offset + 4])
        usesEDNS = DNSTransportWire.ednsPayloadSize(bytes) != nil
    }
}

/// The answer to a ``DNSQueryMessage``, as RFC 1035 wire bytes.
package enum DNSAnswerMessage {
    /// RCODEs the service answers with.
    package enum ResponseCode: UInt16, Error, Sendable {
        case noError = 0
        case formatError = 1
        case serverFailure = 2
        case nameError = 3
        case notImplemented = 4
        case refused = 5
    }

    /// One address record.
    package struct Record: Sendable, Hashable {
        /// The address bytes: 4 for A, 16 for AAAA.
        package var data: [UInt8]
        /// The TTL in seconds.
        package var ttl: UInt32

        /// A record of `data` for `ttl` seconds.
        package init(data: [UInt8], ttl: UInt32) {
            self.data = data
            self.ttl = ttl
        }
    }

    /// The answer: the query's ID, opcode and RD echoed, RA set, the question echoed and each record pointing back
    /// at the question's name; an OPT record (version 0) when the query had one, carrying `clientSubnet` (the
    /// client's own ECS option with the scope of the answer, RFC 7871 §7.2.2) when given.
    /// `extendedError`: an Extended DNS Error (RFC 8914) for the OPT record, with the client's subnet option if any.
    package static func encode(
        answering query: DNSQueryMessage, code: ResponseCode, records: [Record],
        clientSubnet: (network: IPNetwork, scope: Int)? = nil, extendedError: ExtendedDNSError? = nil
    ) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(12 + query.question.count + records.count * 28)
        var flags: UInt16 = 0x8000 | UInt16(query.opcode & 0xf) << 11 | 0x0080 | code.rawValue
        if query.recursionDesired { flags |= 0x0100 }
        let answers = code == .noError ? records : []
        append(query.id, to: &out)
        append(flags, to: &out)
        append(1, to: &out)
        append(UInt16(answers.count), to: &out)
        append(0, to: &out)
        append(query.usesEDNS ? 1 : 0, to: &out)
        out += query.question
        for record in answers {
            append(0xC00C, to: &out)  // a pointer to the question's name, right after the header
            append(query.type, to: &out)
            append(1, to: &out)
            append(UInt16(record.ttl >> 16), to: &out)
            append(UInt16(record.ttl & 0xffff), to: &out)
            append(UInt16(record.data.count), to: &out)
            out += record.data
        }
        if query.usesEDNS {
            out += DNSMessageWalk.optRecord(
                carrying: (clientSubnet.map { EDNSClientSubnet.option($0.network, scope: $0.scope) } ?? [])
                    + (extendedError?.option ?? []))
        }
        return out
    }

    private static func append(_ word: UInt16, to out: inout [UInt8]) {
        out.append(UInt8(word >> 8))
        out.append(UInt8(word & 0xff))
    }
}
