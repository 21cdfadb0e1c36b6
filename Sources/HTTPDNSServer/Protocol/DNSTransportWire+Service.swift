import HTTPDNS

extension DNSTransportWire {
    /// The DNS message to send for `response`, the service's answer to `query`: the answer itself; REFUSED for a
    /// request the service refuses (rate limit, accounts only); SERVFAIL when too many lookups wait for upstreams
    /// (503), over UDP a truncated answer instead (the client asks again over TCP, whose places are apart from the
    /// unverified ones UDP draws on); FORMERR for a malformed query; `nil` when nothing at all should be sent (a
    /// rate-limited UDP query, which is dropped as resolvers do, or bytes without a header).
    package static func message(for response: ServiceResponse, query: [UInt8], overUDP: Bool) -> [UInt8]? {
        if response.status == 200, response.contentType == "application/dns-message" { return response.body }
        if response.status == 429, overUDP { return nil }
        if response.status == 503, overUDP, let truncated = slipped(query) { return truncated }
        let code = DNSAnswerMessage.ResponseCode(httpStatus: response.status)
        if let parsed = try? DNSQueryMessage(query) {
            // Why, for an EDNS client (RFC 8914): the rate limit, or the upstream bound.
            let why: ExtendedDNSError? =
                switch response.status {
                case 429: .rateLimited
                case 503: .upstreamBusy
                default: nil
                }
            return DNSAnswerMessage.encode(answering: parsed, code: code, records: [], extendedError: why)
        }
        guard query.count >= 12, query[2] & 0x80 == 0 else { return nil }
        // The header alone: the ID and opcode echoed, QR set, no sections.
        return [query[0], query[1], 0x80 | query[2] & 0x78, UInt8(code.rawValue), 0, 0, 0, 0, 0, 0, 0, 0]
    }
}
