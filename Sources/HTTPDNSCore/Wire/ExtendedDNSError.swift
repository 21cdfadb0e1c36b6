/// An Extended DNS Error (RFC 8914): an INFO-CODE and a short text in an EDNS option (code 15), saying why an answer
/// is what it is. Sent only to clients whose query had an OPT record (RFC 6891: EDNS only to EDNS clients).
package struct ExtendedDNSError: Sendable, Hashable {
    /// The INFO-CODE (RFC 8914 §4, IANA "Extended DNS Error Codes").
    package var code: UInt16
    /// The EXTRA-TEXT, UTF-8, for people.
    package var text: String

    package init(code: UInt16, text: String) {
        self.code = code
        self.text = text
    }

    /// The option's code.
    package static let optionCode: UInt16 = 15

    /// The option as it goes in an OPT record: code, length, INFO-CODE, EXTRA-TEXT.
    package var option: [UInt8] {
        let data = [UInt8(code >> 8), UInt8(code & 0xFF)] + Array(text.utf8.prefix(200))
        return [0, UInt8(Self.optionCode), UInt8(data.count >> 8), UInt8(data.count & 0xFF)] + data
    }

    /// 0 Other: the rate limit of the client's network turned the query away.
    package static let rateLimited = ExtendedDNSError(code: 0, text: "rate limited; ask again later")
    /// 0 Other: too many queries wait for an upstream (the server's upstream bound).
    package static let upstreamBusy = ExtendedDNSError(
        code: 0, text: "too many queries wait for an upstream; ask again later")
    /// 3 Stale Answer: served past its TTL (RFC 8767) while a refresh runs or no upstream answers.
    package static let staleAnswer = ExtendedDNSError(code: 3, text: "served past its TTL while it is refreshed")
    /// 22 No Reachable Authority: no upstream answered in time.
    package static let noReachableAuthority = ExtendedDNSError(code: 22, text: "no upstream answered in time")
    /// 23 Network Error: the upstream could not be reached or its answer could not be read.
    package static let networkError = ExtendedDNSError(
        code: 23, text: "the upstream could not be reached or answered unreadably")
    /// 20 Not Authoritative: a query this server does not answer or relay (another class, a guarded reverse name).
    package static let notServed = ExtendedDNSError(code: 20, text: "not answered here")

    /// The error for a lookup or relay that failed with `code` (a timeout, a transport failure); `nil` for a failure
    /// that is the upstream's own answer (SERVFAIL relayed as it came says nothing more).
    package static func upstreamFailure(_ code: HTTPDNSError.Code) -> ExtendedDNSError? {
        switch code {
        case .timeout: .noReachableAuthority
        case .connectionFailed, .connectionLost, .tlsFailure, .certificateRejected, .badResponse, .httpStatus,
            .responseTooLarge, .questionMismatch, .noRoute:
            .networkError
        default: nil
        }
    }
}
