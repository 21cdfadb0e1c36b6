/// RFC 1035 queries and answers for A and AAAA, built and read in Swift by c-ares's rules: the one reader of DNS
/// answers for the DoH clients, the ECS queries and c-ares's own answers.
///
/// Queries are the bytes `ares_create_query` makes, with message ID 0 (RFC 8484 §4.1, so answers cache well in
/// HTTP). Answers are checked here for what c-ares's parsers ignore: the header flags, the RCODE and the question;
/// the records are then read by ``DNSAnswerWalk`` (as `ares_parse_a_reply` / `ares_parse_aaaa_reply` read them;
/// the c-ares module keeps those parsers as the reference the tests hold the walk to).
package enum DNSWireMessage {
    /// The length of a DNS header.
    static let headerLength = 12
    /// The Internet class, `IN`.
    package static let classIN: Int32 = 1
    /// At most this many addresses are taken from one answer (of any API: the JSON and vendor answers too).
    package static let maximumAddresses = 256

    /// Builds a recursive query for `name` with the given record type and ID 0: the bytes c-ares's
    /// `ares_create_query` makes, written in one array (a `HostName` is already a valid sequence of labels).
    package static func query(for name: HostName, type: DNSRecordType) -> [UInt8] {
        let text = name.name.utf8
        var query = [UInt8]()
        query.reserveCapacity(headerLength + text.count + 6)
        // ID 0, a standard query with recursion desired, one question.
        query.append(contentsOf: [0, 0, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0] as [UInt8])
        var lengthAt = query.count
        query.append(0)
        for byte in text {
            if byte == UInt8(ascii: ".") {
                query[lengthAt] = UInt8(query.count - lengthAt - 1)
                lengthAt = query.count
                query.append(0)
            } else {
                query.append(byte)
            }
        }
        query[lengthAt] = UInt8(query.count - lengthAt - 1)
        query.append(contentsOf: [0, UInt8(type.rawValue >> 8), UInt8(type.rawValue & 0xFF), 0, UInt8(classIN)])
        return query
    }

    /// Checks an answer to the query ``query(for:type:)`` built and extracts its addresses.
    ///
    /// - Returns: The addresses with TTLs (the smallest TTL along a CNAME chain).
    /// - Throws: ``HTTPDNSError`` with `badResponse` (malformed, truncated, not a response), `questionMismatch`,
    ///   `notFound` (NXDOMAIN), `serverFailure`, `refused`, `formatError`, `notImplemented`, or `noData`
    ///   (success without a record of the type asked for, e.g. a CNAME-only answer).
    /// - Parameter query: The query sent, when the caller has it: an answer whose question is the query's (ASCII
    ///   case aside) is then accepted by comparing bytes, without decoding the name.
    package static func addresses(
        in message: [UInt8],
        for name: HostName,
        type: DNSRecordType,
        source: ResolutionSource,
        query: [UInt8]? = nil
    ) throws(HTTPDNSError) -> [ResolvedAddress] {
        let result = message.withUnsafeBufferPointer { bytes in
            Result { () throws(HTTPDNSError) -> [ResolvedAddress] in
                try check(bytes, name: name, type: type, query: query)
                guard
                    let addresses = DNSAnswerWalk.addresses(
                        in: bytes, type: type, source: source, limit: maximumAddresses)
                else {
                    throw HTTPDNSError(code: .badResponse, message: "DNS response is malformed", host: name.name)
                }
                guard !addresses.isEmpty else {
                    throw HTTPDNSError(
                        code: .noData, message: "DNS response has no \(type == .a ? "A" : "AAAA") record",
                        host: name.name)
                }
                return addresses
            }
        }
        return try result.get()
    }

    /// Validates header, question and RCODE.
    private static func check(
        _ bytes: UnsafeBufferPointer<UInt8>, name: HostName, type: DNSRecordType, query: [UInt8]?
    ) throws(HTTPDNSError) {
        func fail(_ code: HTTPDNSError.Code, _ message: String) -> HTTPDNSError {
            HTTPDNSError(code: code, message: message, host: name.name)
        }
        guard bytes.count >= headerLength else {
            throw fail(.badResponse, "DNS message of \(bytes.count) bytes is shorter than a header")
        }
        let id = UInt16(bytes[0]) << 8 | UInt16(bytes[1])
        let flags = UInt16(bytes[2]) << 8 | UInt16(bytes[3])
        let questions = UInt16(bytes[4]) << 8 | UInt16(bytes[5])
        guard flags & 0x8000 != 0 else { throw fail(.badResponse, "DNS message is a query, not a response") }
        guard (flags >> 11) & 0xf == 0 else {
            throw fail(.badResponse, "DNS response has opcode \((flags >> 11) & 0xf)")
        }
        guard flags & 0x0200 == 0 else { throw fail(.badResponse, "DNS response is truncated (TC set)") }
        guard id == 0 else { throw fail(.questionMismatch, "DNS response has ID \(id), the query had 0") }
        let rcode = flags & 0xf
        // A FORMERR or NOTIMP answer may come without the question; anything else must echo it.
        if questions != 0 || rcode == 0 {
            guard questions == 1 else {
                throw fail(.questionMismatch, "DNS response carries \(questions) questions, the query had 1")
            }
            if let query, sameQuestion(bytes, query) {
                // The question asked, echoed: nothing more to check.
            } else {
                try checkQuestion(bytes, name: name, type: type)
            }
        }
        switch rcode {
        case 0: return
        case 1: throw fail(.formatError, "the server could not parse the query (FORMERR)")
        case 2: throw fail(.serverFailure, "the server failed to answer (SERVFAIL)")
        case 3: throw fail(.notFound, "the name does not exist (NXDOMAIN)")
        case 4: throw fail(.notImplemented, "the server does not implement the query (NOTIMP)")
        case 5: throw fail(.refused, "the server refused the query (REFUSED)")
        default: throw fail(.badResponse, "DNS response has RCODE \(rcode)")
        }
    }

    /// Whether the answer's question is the query's, byte for byte but for the case of ASCII letters (a server may
    /// echo the name in another case).
    private static func sameQuestion(_ bytes: UnsafeBufferPointer<UInt8>, _ query: [UInt8]) -> Bool {
        // The query: header, then its one question, then (with EDNS) an OPT record.
        guard query.count > headerLength, let nameEnd = DNSMessageWalk.skipName(query, from: headerLength) else {
            return false
        }
        let end = nameEnd + 4
        guard end <= query.count, end <= bytes.count else { return false }
        for index in headerLength..<nameEnd {
            let (a, b) = (bytes[index], query[index])
            guard a == b || (a | 0x20 == b | 0x20 && (a | 0x20) >= UInt8(ascii: "a") && (a | 0x20) <= UInt8(ascii: "z"))
            else { return false }
        }
        // The type and class exactly.
        return (nameEnd..<end).allSatisfy { bytes[$0] == query[$0] }
    }

    /// Reads the question's name and compares it (ASCII case aside; no other folding), its type and its class with what was asked.
    private static func checkQuestion(
        _ bytes: UnsafeBufferPointer<UInt8>,
        name: HostName,
        type: DNSRecordType
    ) throws(HTTPDNSError) {
        guard let (asked, end) = DNSMessageWalk.name(in: bytes, at: headerLength) else {
            throw HTTPDNSError(code: .badResponse, message: "DNS response has a malformed question", host: name.name)
        }
        guard end + 4 <= bytes.count else {
            throw HTTPDNSError(code: .badResponse, message: "DNS response question is truncated", host: name.name)
        }
        let questionType = Int32(bytes[end]) << 8 | Int32(bytes[end + 1])
        let questionClass = Int32(bytes[end + 2]) << 8 | Int32(bytes[end + 3])
        guard asked == name.name, questionType == type.rawValue, questionClass == classIN else {
            throw HTTPDNSError(
                code: .questionMismatch,
                message:
                    "DNS response answers \(HostName.printable(asked)) type \(questionType) class \(questionClass), "
                    + "not \(name.name) type \(type.rawValue)",
                host: name.name
            )
        }
    }
}
