import HTTPDNS

/// What a client was answered, by DNS outcome: what `httpdns_serve_answers_total{rcode}`, the access log's `rcode`
/// and the console count. Every answering endpoint has one (DNS messages, the JSON API, the vendor APIs), so a dead
/// upstream shows as SERVFAIL whichever way clients ask.
package enum AnswerOutcome: String, CaseIterable, Sendable {
    /// Addresses, or a name with none of the type asked (no data).
    case noError = "NOERROR"
    /// A query the service could not read.
    case formatError = "FORMERR"
    /// No upstream answered (or the upstream queue was full).
    case serverFailure = "SERVFAIL"
    /// The name does not exist.
    case nameError = "NXDOMAIN"
    /// A query the service does not implement.
    case notImplemented = "NOTIMP"
    /// Refused: the rate limit, accounts only, a class or name it does not serve.
    case refused = "REFUSED"
    /// The private-address guard withheld the answer; the client got NXDOMAIN.
    case withheld = "WITHHELD"
    /// Another response code, relayed from an upstream.
    case other = "OTHER"

    /// The outcome of response code `code`.
    init(_ code: DNSAnswerMessage.ResponseCode) {
        switch code {
        case .noError: self = .noError
        case .formatError: self = .formatError
        case .serverFailure: self = .serverFailure
        case .nameError: self = .nameError
        case .notImplemented: self = .notImplemented
        case .refused: self = .refused
        }
    }

    /// The outcome `response` carries: the one its endpoint set, else the response code of a DNS message, else the
    /// code a DNS client gets for its HTTP status (`DNSAnswerMessage.ResponseCode(httpStatus:)`).
    init(_ response: ServiceResponse) {
        if let outcome = response.outcome {
            self = outcome
        } else if response.status == 200, response.contentType == "application/dns-message" {
            guard response.body.count >= 4 else {
                self = .other
                return
            }
            self = DNSAnswerMessage.ResponseCode(rawValue: UInt16(response.body[3] & 0x0F)).map(Self.init) ?? .other
        } else {
            self = Self(DNSAnswerMessage.ResponseCode(httpStatus: response.status))
        }
    }
}

extension DNSAnswerMessage.ResponseCode {
    /// The response code a DNS client gets for a request the service answered with HTTP `status` (not 200): REFUSED
    /// for a refusal (429, the rate limit; 403, accounts only), SERVFAIL when too many lookups wait for upstreams
    /// (503), FORMERR for the rest (a malformed request).
    init(httpStatus status: Int) {
        switch status {
        case 429, 403: self = .refused
        case 503: self = .serverFailure
        default: self = .formatError
        }
    }
}

/// Why a lookup has no addresses: the response code the client gets, and whether the private-address guard withheld
/// the answer (sent as NXDOMAIN, so that outsiders cannot tell internal names from missing ones, but counted apart).
struct LookupFailure: Error, Hashable {
    /// The response code sent.
    var code: DNSAnswerMessage.ResponseCode
    /// Whether the guard withheld the answer.
    var isWithheld = false
    /// Why, for EDNS clients (RFC 8914): no upstream answered in time, or it could not be reached. None for an
    /// answer the guard withheld: it looks like a missing name, so that outsiders cannot tell internal names.
    var extendedError: ExtendedDNSError?

    /// What operators see.
    var outcome: AnswerOutcome { isWithheld ? .withheld : AnswerOutcome(code) }

    static let refused = LookupFailure(code: .refused)
    static let serverFailure = LookupFailure(code: .serverFailure)
    static let nameError = LookupFailure(code: .nameError)
    static let withheldByGuard = LookupFailure(code: .nameError, isWithheld: true)
}
