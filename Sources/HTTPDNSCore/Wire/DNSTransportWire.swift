/// The plain-DNS wire rules of the server's listeners: over UDP an answer cut to what the client can take and what a
/// spoofed source may be sent (TC), and the "slip" of a rate-limited query. The server turns a service answer into
/// the message these apply to (`message(for:query:overUDP:)`, in HTTPDNSServer).
package enum DNSTransportWire {
    /// How much larger than its query a UDP answer may be: a spoofed query may make the server send at most this
    /// many times its size to the victim (an A or AAAA answer of 8 addresses is 5–9 times a plain query). A larger
    /// answer is sent truncated (TC), and a real client asks again over TCP.
    package static let amplificationFactor = 10

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
    package static func ednsPayloadSize(_ query: [UInt8]) -> Int? {
        DNSMessageWalk.optRecord(query).map { max(512, Int(query[$0 + 2]) << 8 | Int(query[$0 + 3])) }
    }
}
