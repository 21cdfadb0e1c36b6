import Crypto
import Foundation
public import Logging
import NIOHTTP1
public import HTTPDNSCore
import HTTPDNSPinnedClients

/// Resolves names through an HTTP DNS service: DNS-over-HTTPS (RFC 8484 wire format or the JSON API) or a
/// vendor HTTPDNS API (Alibaba-style, Tencent DNSPod-style).
///
/// Answers cannot be hijacked or steered by the local network's resolver: they come over HTTPS from a server
/// reached through fixed bootstrap addresses (see ``HTTPDNSEndpoint``), with the certificate checked against
/// the endpoint's name. Endpoints are tried in order; an endpoint that cannot be reached, stalls, answers with
/// an HTTP error, garbage or SERVFAIL is skipped for the next one, while a definite answer (NXDOMAIN, no data,
/// a rejected signature) ends the lookup.
///
/// By default an answer that maps a name to a private, loopback, link-local or unspecified address is
/// rejected with `HTTPDNSError.Code.privateAddress` (DNS rebinding and SSRF protection); set
/// ``Configuration/allowNonPublicAddresses`` for services that legitimately answer with such addresses.
public final class HTTPDNSResolver: HostNameResolver {
    /// The configuration the resolver was created with.
    package let configuration: Configuration
    /// The source that answers from this resolver carry.
    let source: ResolutionSource
    let transport: HTTPDNSTransport
    /// Whether the resolver made ``transport`` itself, and so closes it at ``shutdown()``.
    private let ownsTransport: Bool
    let logger: Logger
    private let aesKey: SymmetricKey?
    private let now: @Sendable () -> Int64

    /// Creates a resolver with connections of its own (HTTP/2 over TLS where the server offers it, kept open for
    /// reuse); call ``shutdown()`` when done.
    /// - Parameters:
    ///   - configuration: API, endpoints, guard, budget.
    ///   - transportConfiguration: Time limits, trust roots and the answer size cap of its connections.
    ///   - logger: Receives debug logs of failed attempts; secrets never appear in them.
    /// - Throws: `HTTPDNSError.Code.invalidConfiguration` for no endpoints, a malformed account ID, a Tencent key
    ///   without an account or of the wrong length, a non-positive signature lifetime or timeout, or a trust-root
    ///   file that cannot be read or holds no certificate.
    public convenience init(
        configuration: Configuration,
        transportConfiguration: HTTPDNSTransport.Configuration = .init(),
        logger: Logger = Logger(label: "httpdns", factory: { _ in SwiftLogNoOpLogHandler() })
    ) throws(HTTPDNSError) {
        let transport = try HTTPDNSTransport(configuration: transportConfiguration, logger: logger)
        try self.init(configuration: configuration, transport: transport, logger: logger, ownsTransport: true) {
            Int64(Date().timeIntervalSince1970)
        }
    }

    /// Creates a resolver on a transport shared with other providers; the transport's owner shuts it down
    /// (``HTTPDNSTransport/shutdown()``), the resolver's ``shutdown()`` leaves it open.
    /// - Throws: As ``init(configuration:transportConfiguration:logger:)``, but for the transport's own checks.
    public convenience init(
        configuration: Configuration,
        transport: HTTPDNSTransport,
        logger: Logger = Logger(label: "httpdns", factory: { _ in SwiftLogNoOpLogHandler() })
    ) throws(HTTPDNSError) {
        try self.init(configuration: configuration, transport: transport, logger: logger) {
            Int64(Date().timeIntervalSince1970)
        }
    }

    /// Creates a resolver with a clock for request signing, in epoch seconds, on a shared transport.
    package init(
        configuration: Configuration,
        transport: HTTPDNSTransport,
        logger: Logger,
        ownsTransport: Bool = false,
        now: @escaping @Sendable () -> Int64
    ) throws(HTTPDNSError) {
        func invalid(_ reason: String) -> HTTPDNSError {
            HTTPDNSError(code: .invalidConfiguration, message: "HTTP DNS provider \(configuration.name): \(reason)")
        }
        guard !configuration.endpoints.isEmpty else { throw invalid("no endpoint is configured") }
        var aesKey: SymmetricKey?
        switch configuration.api.kind {
        case .dnsMessage, .dnsJSON:
            break
        case .alibaba(let account, _, let lifetime):
            guard Self.isValidAccount(account) else { throw invalid("the account ID must be letters, digits, - or _") }
            guard lifetime > .zero else { throw invalid("the signature lifetime must be positive") }
        case .tencent(let account, let key):
            if let account, !Self.isValidAccount(account) {
                throw invalid("the account ID must be letters, digits, - or _")
            }
            if let key {
                guard account != nil else { throw invalid("an encryption key needs an account ID") }
                let bytes = Array(key.value.utf8)
                guard [16, 24, 32].contains(bytes.count) else {
                    throw invalid("the AES key must be 16, 24 or 32 bytes long")
                }
                aesKey = SymmetricKey(data: bytes)
            }
        }
        self.configuration = configuration
        self.source = ResolutionSource(configuration.name)
        self.transport = transport
        self.ownsTransport = ownsTransport
        self.logger = logger
        self.aesKey = aesKey
        self.now = now
    }

    private static func isValidAccount(_ account: String) -> Bool {
        !account.isEmpty && account.utf8.count <= 128
            && account.utf8.allSatisfy { $0.isASCIIAlphanumeric || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") }
    }

    /// Closes the connections the resolver made itself (``init(configuration:transportConfiguration:logger:)``); its later lookups, and those
    /// waiting for a connection still being set up, fail with `HTTPDNSError.Code.shutdown` at once. A resolver that
    /// shares its connections with other providers (those of a settings file, built by `HostResolver(configuration:)`)
    /// leaves them to their owner. Calling it twice is harmless.
    public func shutdown() async {
        if ownsTransport { await transport.shutdown() }
    }

    /// Resolves `host` through the service.
    ///
    /// For the DoH APIs and `AddressFamily.any`, `A` and `AAAA` are asked in parallel and merged (IPv4
    /// first); the vendor APIs answer both families in one request. For many names at once,
    /// ``resolveAll(_:family:maximumInFlight:)`` takes one hand-over instead of one a name (about 40 % less CPU a
    /// name in the DoH benchmark).
    /// - Throws: `HTTPDNSError` with the endpoint addresses tried, or `CancellationError`.
    public func resolve(_ host: HostName, family: AddressFamily) async throws -> Resolution {
        try await resolve(host, family: family, subnet: nil).resolution
    }

    /// Resolves `host` for clients in `clientSubnet`, in the service's own form: an EDNS Client Subnet option in
    /// RFC 8484 queries (the scope read from the answer's option, 0 without one), `edns_client_subnet=` for the
    /// JSON API (the scope from the answer's `edns_client_subnet` when it gives one), and `ip=` with the subnet's
    /// address for the vendor APIs, whose answers hold for the subnet sent.
    /// - Throws: As ``resolve(_:family:)``.
    package func resolve(_ host: HostName, family: AddressFamily, clientSubnet: IPNetwork) async throws
        -> ScopedResolution
    {
        try await resolve(host, family: family, subnet: clientSubnet)
    }

    nonisolated(nonsending) private func resolve(_ host: HostName, family: AddressFamily, subnet: IPNetwork?)
        async throws
        -> ScopedResolution
    {
        guard let budget = configuration.budget else {
            return try await resolveWithoutBudget(host, family: family, subnet: subnet)
        }
        return try await withTimeLimit(budget, orThrow: self.budgetExceeded(host, budget: budget)) {
            try await self.resolveWithoutBudget(host, family: family, subnet: subnet)
        }
    }

    /// One endpoint's answer: the addresses and the prefix length of the client subnet they hold for.
    package typealias Answer = (addresses: [ResolvedAddress], scope: Int)

    nonisolated(nonsending) private func resolveWithoutBudget(
        _ host: HostName, family: AddressFamily, subnet: IPNetwork?
    ) async throws
        -> ScopedResolution
    {
        let answer: Answer
        switch (configuration.api.kind, family) {
        case (.dnsMessage, .any), (.dnsJSON, .any):
            async let v4 = Result(catching: { try await self.doh(host, .a, subnet) })
            let v6 = await Result(catching: { try await self.doh(host, .aaaa, subnet) })
            let (four, six) = await (v4, v6)
            let addresses = try DualStack.merge(
                four.map(\.addresses), six.map(\.addresses), host: host, logger: logger)
            answer = (addresses, max((try? four.get())?.scope ?? 0, (try? six.get())?.scope ?? 0))
        case (.dnsMessage, _), (.dnsJSON, _):
            answer = try await doh(host, family == .ipv4 ? .a : .aaaa, subnet)
        case (.alibaba, _), (.tencent, _):
            answer = try await failover(host, from: FailoverPoint()) { endpoint, _ in
                (try await self.vendor(endpoint, host, family, subnet), subnet?.prefixLength ?? 0)
            }
        }
        return ScopedResolution(
            resolution: Resolution(host: host.name, addresses: answer.addresses), scopePrefixLength: answer.scope)
    }

    /// Whether an error ends the lookup rather than moving on to the next endpoint.
    static func isDefinite(_ code: HTTPDNSError.Code) -> Bool {
        [.notFound, .noData, .badName, .invalidSignature, .signatureExpired, .shutdown].contains(code)
    }

    /// Runs `lookup` against each endpoint in turn, from `point`, until one gives a definite result.
    nonisolated(nonsending) private func failover(
        _ host: HostName,
        from point: FailoverPoint,
        _ lookup: (HTTPDNSEndpoint, HTTPDNSTransport.AddressPoint) async throws -> Answer
    ) async throws -> Answer {
        var point = point
        while point.endpoint < configuration.endpoints.count {
            let endpoint = configuration.endpoints[point.endpoint]
            do {
                let answer = try await lookup(endpoint, point.address)
                try guardAddresses(answer.addresses, host: host, endpoint: endpoint)
                return answer
            } catch let error as HTTPDNSError {
                if let definite = failed(error, at: &point) { throw definite }
            }
        }
        throw point.lastError!
    }

    /// The private-address guard.
    func guardAddresses(_ addresses: [ResolvedAddress], host: HostName, endpoint: HTTPDNSEndpoint)
        throws(HTTPDNSError)
    {
        guard !configuration.allowNonPublicAddresses,
            let bad = addresses.first(where: { $0.ip.isNonPublic })
        else { return }
        throw HTTPDNSError(
            code: .privateAddress,
            message:
                "\(source) answered with the \(bad.ip.scope) address \(bad.ip); rejected by the private-address guard",
            host: host.name,
            servers: [endpoint.url]
        )
    }

    /// A DoH lookup (wire or JSON) of one record type through the endpoints in turn. A wire-format lookup whose first
    /// endpoint has a ready HTTP/2 connection sends its first exchange with no task (``prepareDoH(_:type:subnet:)``)
    /// and the task waits once, for that exchange's outcome; what the exchange leaves undecided goes on through
    /// ``failover(_:from:_:)`` from where it stopped.
    nonisolated(nonsending) private func doh(_ host: HostName, _ type: DNSRecordType, _ subnet: IPNetwork?)
        async throws -> Answer
    {
        try Task.checkCancellation()
        guard let lookup = prepareDoH(host, type: type, subnet: subnet) else {
            return try await doh(host, type, subnet, from: FailoverPoint())
        }
        let result = await withTaskCancellationHandler {
            await withUnsafeContinuation { continuation in lookup.send { continuation.resume(returning: $0) } }
        } onCancel: {
            lookup.cancel()
        }
        // Read here, on the caller's thread: the connection's event loop, which every lookup on it shares, only
        // hands the bytes over.
        switch decide(lookup, result) {
        case .answered(let answer): return answer
        case .failed(let error): throw error
        case .goOn(let point):
            // As the tasks' path: a failure while the task was cancelled ends it with its cancellation.
            try Task.checkCancellation()
            return try await doh(host, type, subnet, from: point)
        case .cancelled: throw CancellationError()
        }
    }

    nonisolated(nonsending) func doh(
        _ host: HostName, _ type: DNSRecordType, _ subnet: IPNetwork?, from point: FailoverPoint
    ) async throws -> Answer {
        try await failover(host, from: point) { endpoint, address in
            let (request, query) = self.dohRequest(host, type, subnet)
            let response = try await self.transport.send(
                request, to: endpoint, host: host, logger: self.logger, from: address)
            return try self.dohAnswer(
                response, endpoint: endpoint, host: host, type: type, subnet: subnet, query: query)
        }
    }

    /// The request of one DoH exchange and, for the wire format, the query it carries.
    func dohRequest(_ host: HostName, _ type: DNSRecordType, _ subnet: IPNetwork?)
        -> (request: HTTPDNSTransport.Request, query: [UInt8]?)
    {
        guard case .dnsMessage(let method) = configuration.api.kind else {
            var request = HTTPDNSTransport.Request(
                suffix: "?name=\(host.name)&type=\(type == .a ? "A" : "AAAA")", headers: Self.acceptingDNSJSON)
            if let subnet { request.suffix += "&edns_client_subnet=\(subnet)" }
            return (request, nil)
        }
        var query = DNSWireMessage.query(for: host, type: type)
        if let subnet { query = EDNSClientSubnet.addingOPT(to: query, subnet: subnet) }
        switch method {
        case .get:
            return (.init(suffix: Self.base64URL(query, prefix: "?dns="), headers: Self.acceptingDNSMessage), query)
        case .post:
            return (.init(method: .POST, suffix: "", headers: Self.sendingDNSMessage, body: query), query)
        }
    }

    /// Reads the answer to a DoH request: the status, the content type, then the addresses and the scope of the
    /// client subnet they hold for.
    func dohAnswer(
        _ response: HTTPDNSTransport.Response, endpoint: HTTPDNSEndpoint, host: HostName, type: DNSRecordType,
        subnet: IPNetwork?, query: [UInt8]?
    ) throws(HTTPDNSError) -> Answer {
        guard response.status == 200 else {
            throw HTTPDNSError(
                code: .httpStatus,
                message: "\(endpoint.url) answered HTTP \(response.status)",
                host: host.name,
                servers: [response.server]
            )
        }
        // JSON services label their answers inconsistently (application/json or dns-json); wire answers must match.
        guard case .dnsMessage = configuration.api.kind else {
            do {
                let addresses = try DoHJSONAnswer.addresses(in: response.body, for: host, type: type, source: source)
                guard let subnet else { return (addresses, 0) }
                return (addresses, DoHJSONAnswer.scope(in: response.body, asked: subnet) ?? subnet.prefixLength)
            } catch {
                var error = error
                error.servers = [response.server]
                throw error
            }
        }
        let mediaType = Self.mediaType(response.contentType)
        if mediaType != "application/dns-message" {
            throw HTTPDNSError(
                code: .httpStatus,
                message: "\(endpoint.url) answered with content type \(HostName.printable(mediaType ?? "none"))",
                host: host.name,
                servers: [response.server]
            )
        }
        do {
            let addresses = try DNSWireMessage.addresses(
                in: response.body, for: host, type: type, source: source, query: query)
            guard let subnet else { return (addresses, 0) }
            return (addresses, try EDNSClientSubnet.scope(of: response.body, asked: subnet, host: host))
        } catch {
            var error = error
            error.servers = [response.server]
            throw error
        }
    }

    /// One vendor HTTPDNS exchange.
    private func vendor(
        _ endpoint: HTTPDNSEndpoint, _ host: HostName, _ family: AddressFamily, _ subnet: IPNetwork?
    ) async throws -> [ResolvedAddress] {
        var request: HTTPDNSTransport.Request
        switch configuration.api.kind {
        case .alibaba(let account, let secret, let lifetime):
            let signing = secret.map { (secret: $0, expiry: now() + lifetime.components.seconds) }
            let suffix = AlibabaHTTPDNS.suffix(account: account, host: host, family: family, signing: signing)
            request = .init(
                suffix: suffix, loggableSuffix: "/\(account)/\(secret == nil ? "d" : "sign_d")?host=\(host.name)")
        case .tencent(let account, _):
            let suffix = try TencentHTTPDNS.suffix(host: host, family: family, account: account, key: aesKey)
            request = .init(suffix: suffix)
        default:
            preconditionFailure("vendor() called for a DoH API")
        }
        // The vendors tailor answers to the client address given as `ip=` (the subnet's first address).
        if let subnet { request.suffix += "&ip=\(subnet.address)" }
        let response = try await transport.send(request, to: endpoint, host: host, logger: logger)
        do {
            switch configuration.api.kind {
            case .alibaba:
                return try AlibabaHTTPDNS.addresses(
                    status: response.status, body: response.body, for: host, family: family, source: source)
            default:
                return try TencentHTTPDNS.addresses(
                    status: response.status, body: response.body, for: host, family: family, key: aesKey,
                    source: source)
            }
        } catch {
            var error = error
            error.servers = [response.server]
            throw error
        }
    }

    /// The header fields of every RFC 8484 GET and POST, and of every JSON request: shared arrays, not one per query.
    private static let acceptingDNSMessage = [("accept", "application/dns-message")]
    private static let sendingDNSMessage = [
        ("content-type", "application/dns-message"), ("accept", "application/dns-message"),
    ]
    private static let acceptingDNSJSON = [("accept", "application/dns-json")]

    /// The base64url alphabet (RFC 4648 §5).
    private static let base64URLAlphabet: [UInt8] = Array(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// `prefix` (ASCII) followed by unpadded base64url (RFC 4648 §5) of `bytes`, as RFC 8484 asks for `?dns=`: one
    /// string, written in place.
    static func base64URL(_ bytes: [UInt8], prefix: StaticString = "") -> String {
        let alphabet = base64URLAlphabet
        let length = prefix.utf8CodeUnitCount + (bytes.count * 4 + 2) / 3
        return String(unsafeUninitializedCapacity: length) { out in
            var written = 0
            for byte in UnsafeBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount) {
                out[written] = byte
                written += 1
            }
            var index = 0
            while index < bytes.count {
                let chunk = min(3, bytes.count - index)
                var value = UInt32(bytes[index]) << 16
                if chunk > 1 { value |= UInt32(bytes[index + 1]) << 8 }
                if chunk > 2 { value |= UInt32(bytes[index + 2]) }
                for position in 0...chunk {
                    out[written] = alphabet[Int((value >> (18 - 6 * UInt32(position))) & 0x3f)]
                    written += 1
                }
                index += 3
            }
            return written
        }
    }

    /// The media type of a `Content-Type` value, lower-cased, without parameters or spaces.
    package static func mediaType(_ contentType: String?) -> String? {
        guard let contentType else { return nil }
        // The usual answer's type, which the HTTP/2 session hands over as this very constant.
        if contentType == "application/dns-message" { return contentType }
        // Most servers send the bare type in lower-case ASCII: returned as it is.
        if !contentType.utf8.contains(where: {
            $0 == UInt8(ascii: ";") || $0 <= UInt8(ascii: " ") || $0 >= 0x80 || (65...90).contains($0)
        }) {
            return contentType
        }
        let bytes = contentType.utf8.prefix { $0 != UInt8(ascii: ";") }
        let trimmed = bytes.drop { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
        var end = trimmed.endIndex
        while end > trimmed.startIndex {
            let previous = trimmed.index(before: end)
            guard trimmed[previous] == UInt8(ascii: " ") || trimmed[previous] == UInt8(ascii: "\t") else { break }
            end = previous
        }
        return String(decoding: trimmed[..<end], as: UTF8.self).lowercased()
    }
}

extension UInt8 {
    package var isASCIIAlphanumeric: Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(self)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self)
    }
}
