import Foundation
public import HTTPDNS

/// One HTTP request to the service, as an HTTP server front hands it over.
public struct ServiceRequest: Sendable {
    /// `GET`, `POST`, …
    public var method: String
    /// The request target: the path and, after `?`, the query.
    public var target: String
    /// The `Content-Type` header, if any.
    public var contentType: String?
    /// The body (empty for `GET`).
    public var body: [UInt8]
    /// The client's address, for rate limits and access logs (never logged in full unless configured).
    public var client: IPAddress?
    /// How the request arrived, for metrics and access logs.
    public var transport: Transport
    /// The `X-Forwarded-For` header (every field joined by commas), if any: read only when ``client`` is a trusted
    /// proxy (`HTTPDNSService.Configuration-swift.struct.trustedProxies`).
    public var forwardedFor: String?
    /// The `Forwarded` header (RFC 7239, every field joined by commas), if any: read as ``forwardedFor`` is, and
    /// preferred to it.
    public var forwarded: String?
    /// Which of the server's listeners the request came in on: the operator's endpoints (`/metrics`) answer only on
    /// ``Listener/admin``, and the admin listener answers nothing else but the health checks.
    public var listener: Listener = .service
    /// Whether a UDP query's source address is known to be its sender's: it returned a valid server cookie (DNS
    /// cookies, RFC 7873 and RFC 9018). Such a query counts as verified for the rate limit and the upstream places,
    /// as TCP, DNS over TLS and HTTPS always do.
    public var verifiedSource = false

    /// Whether the request's source may be forged (UDP without a valid cookie), for the limits.
    var unverified: Bool { transport == .udp && !verifiedSource }

    /// The listener a request came in on.
    public enum Listener: String, Sendable, Hashable {
        /// The public listener: DNS answers and health checks.
        case service
        /// The operator's listener (`serve.admin.listen`, loopback by default): metrics and health checks, with no
        /// rate limit.
        case admin
    }

    /// How a request reached the service.
    public enum Transport: String, Sendable, Hashable, CaseIterable {
        /// HTTP without TLS.
        case http
        /// HTTP over TLS (HTTP/2 or HTTP/1.1).
        case https
        /// Plain DNS over UDP.
        case udp
        /// Plain DNS over TCP.
        case tcp
        /// DNS over TLS.
        case tls
    }

    /// Creates a request.
    public init(
        method: String, target: String, contentType: String? = nil, body: [UInt8] = [], client: IPAddress? = nil,
        transport: Transport = .http, listener: Listener = .service
    ) {
        self.listener = listener
        self.transport = transport
        self.method = method
        self.target = target
        self.contentType = contentType
        self.body = body
        self.client = client
    }
}

/// The service's answer to one ``ServiceRequest``.
public struct ServiceResponse: Sendable, Hashable {
    /// The HTTP status.
    public var status: Int
    /// The `Content-Type`.
    public var contentType: String
    /// Extra headers (`Allow`, `Retry-After`); empty on answers, the hot path.
    public var headers: [String: String]
    /// `Cache-Control: max-age=` this many seconds (answers: their records' smallest TTL).
    public var maxAge: UInt32?
    /// The body.
    public var body: [UInt8]
    /// What the client was answered, when the body does not say it as a DNS message does (the JSON and vendor
    /// APIs, an answer the guard withheld); see `AnswerOutcome`.
    package var outcome: AnswerOutcome?

    init(
        status: Int, contentType: String, headers: [String: String] = [:], maxAge: UInt32? = nil, body: [UInt8],
        outcome: AnswerOutcome? = nil
    ) {
        self.status = status
        self.contentType = contentType
        self.headers = headers
        self.maxAge = maxAge
        self.body = body
        self.outcome = outcome
    }

    /// Every extra header: ``headers`` and, from ``maxAge``, `Cache-Control`.
    var allHeaders: [String: String] {
        guard let maxAge else { return headers }
        var all = headers
        all["Cache-Control"] = "max-age=\(maxAge)"
        return all
    }

    package static func text(_ status: Int, _ text: String, headers: [String: String] = [:]) -> ServiceResponse {
        ServiceResponse(
            status: status, contentType: "text/plain; charset=utf-8", headers: headers, body: Array((text + "\n").utf8))
    }
}

/// Sends DNS messages the service does not answer itself (types other than A and AAAA) to an upstream and returns
/// its answer; ``CAresForwarder`` sends them through c-ares.
public protocol DNSMessageForwarder: Sendable {
    /// Sends `query` (a whole DNS message) and returns the upstream's answer.
    func forward(_ query: [UInt8]) async throws -> [UInt8]
}
