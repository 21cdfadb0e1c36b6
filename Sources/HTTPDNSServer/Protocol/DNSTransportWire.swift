import HTTPDNS

/// What the plain DNS and DNS-over-TLS listeners send for a service answer: the DNS message of a DoH answer as it
/// is, an error turned into the DNS error a resolver expects, and over UDP an answer cut to what the client can take
/// and what a spoofed source may be sent.
package enum DNSTransportWire {
    /// How much larger than its query a UDP answer may be: a spoofed query may make the server send at most this
    /// many times its size to the victim (an A or AAAA answer of 8 addresses is 5–9 times a plain query). A larger
    /// answer is sent truncated (TC), and a real client asks again over TCP.
    static let amplificationFactor = 10

    /// The DNS message to send for `response`, the service's answer to `query`: the answer itself; REFUSED for a
    /// request the service refuses (rate limit, accounts only); SERVFAIL when too many lookups wait for upstreams
    /// (503), over UDP a truncated answer instead (the client asks again over TCP, whose places are apart from the
    /// unverified ones UDP draws on); FORMERR for a malformed query; `nil` when nothing at all should be sent (a
    /// rate-limited UDP query, which is dropped as resolvers do, or bytes without a header).
    package static func message(for response: ServiceResponse, query: [UInt8], overUDP: Bool) -> [UInt8]? {
        if response.status == 200, response.contentType == "application/dns-message" { return response.body }
        if response.status == 429, overUDP { return nil }
        if response.status == 503, overUDP, let truncated = slipped(query) { return truncated }
        let code: DNSAnswerMessage.ResponseCode =
            response.status == 429 || response.status == 403
            ? .refused : response.status == 503 ? .serverFailure : .formatError
        if let parsed = try? DNSQueryMessage(query) {
            return DNSAnswerMessage.encode(answering: parsed, code: code, records: [])
        }
        guard query.count >= 12, query[2] & 0x80 == 0 else { return nil }
        // The header alone: the ID and opcode echoed, QR set, no sections.
        return [query[0], query[1], 0x80 | query[2] & 0x78, UInt8(code.rawValue), 0, 0, 0, 0, 0, 0, 0, 0]
    }

    /// What a rate-limited UDP query gets when it "slips" (response-rate limiting as BIND and Knot do it): its
    /// question with TC set and no records, so a real client asks again over TCP, where its source is verified and
    /// its own bucket applies, while a forged source's victim gets no more bytes than the query. `nil` for bytes
    /// that are not a query.
    package static func slipped(_ query: [UInt8]) -> [UInt8]? {
        guard let parsed = try? DNSQueryMessage(query) else { return nil }
        var message = DNSAnswerMessage.encode(answering: parsed, code: .noError, records: [])
        guard message.count >= 12, message.count <= query.count else { return nil }
        message[2] |= 0x02
        return message
    }

    /// The most bytes a UDP answer to `query` may have: the client's EDNS payload size (512 without EDNS, RFC 1035),
    /// and no more than ``amplificationFactor`` times the query.
    package static func udpLimit(for query: [UInt8]) -> Int {
        min(ednsPayloadSize(query) ?? 512, query.count * amplificationFactor)
    }

    /// `message` cut to its header and question with TC set, for an answer over `limit` bytes; `message` itself
    /// otherwise.
    package static func truncated(_ message: [UInt8], limit: Int) -> [UInt8] {
        guard message.count > limit, message.count >= 12 else { return message }
        var end = 12
        if message[4] != 0 || message[5] != 0 {
            guard let nameEnd = DNSMessageWalk.skipName(message, from: 12), nameEnd + 4 <= message.count else {
                return Array(message[0..<12])
            }
            end = nameEnd + 4
        }
        var cut = Array(message[0..<end])
        cut[2] |= 0x02
        cut[4] = 0
        cut[5] = end > 12 ? 1 : 0
        for index in 6..<12 { cut[index] = 0 }
        return cut
    }

    /// The UDP payload size of the query's EDNS OPT record (RFC 6891; at least 512), or `nil` without one.
    static func ednsPayloadSize(_ query: [UInt8]) -> Int? {
        DNSMessageWalk.optRecord(query).map { max(512, Int(query[$0 + 2]) << 8 | Int(query[$0 + 3])) }
    }
}
