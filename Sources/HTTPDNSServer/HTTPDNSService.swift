import Foundation
public import HTTPDNS
public import Logging

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

    /// Creates a request.
    public init(method: String, target: String, contentType: String? = nil, body: [UInt8] = []) {
        self.method = method
        self.target = target
        self.contentType = contentType
        self.body = body
    }
}

/// The service's answer to one ``ServiceRequest``.
public struct ServiceResponse: Sendable, Hashable {
    /// The HTTP status.
    public var status: Int
    /// The `Content-Type`.
    public var contentType: String
    /// Extra headers (`Cache-Control`, `Allow`).
    public var headers: [String: String]
    /// The body.
    public var body: [UInt8]

    init(status: Int, contentType: String, headers: [String: String] = [:], body: [UInt8]) {
        self.status = status
        self.contentType = contentType
        self.headers = headers
        self.body = body
    }

    static func text(_ status: Int, _ text: String, headers: [String: String] = [:]) -> ServiceResponse {
        ServiceResponse(
            status: status, contentType: "text/plain; charset=utf-8", headers: headers, body: Array((text + "\n").utf8))
    }
}

/// HTTP DNS answered from a ``HostResolver``: RFC 8484 DoH (`/dns-query`, GET and POST), the JSON API
/// (`/resolve`), Alibaba-compatible `/{account}/d` and `/{account}/sign_d`, Tencent-compatible `/d?dn=`, and
/// `/healthz` and `/readyz`.
///
/// The type knows nothing of sockets: an HTTP server front (``HTTPDNSServer``) maps its requests to
/// ``ServiceRequest`` and back. Every answer comes from the same pipeline an application would use (overrides,
/// the hosts file, the scored cache, the upstreams), ranked by the pipeline's scores and cut to
/// ``Configuration-swift.struct/maximumAnswers``. Names are resolved as given (absolute): a server applies no search
/// domains. Malformed requests get a 4xx with a one-line reason, never a crash.
public final class HTTPDNSService: Sendable {
    /// What the service answers and how.
    public struct Configuration: Sendable, Hashable {
        /// The most addresses in one answer (best first).
        public var maximumAnswers: Int
        /// Vendor accounts served on `/{account}/d` and `/{account}/sign_d`, each with its signing secret (for an
        /// account with a secret only signed requests are answered).
        public var accounts: [String: HTTPDNSSecret?]

        /// Creates a configuration.
        public init(maximumAnswers: Int = 8, accounts: [String: HTTPDNSSecret?] = [:]) {
            self.maximumAnswers = max(maximumAnswers, 1)
            self.accounts = accounts
        }
    }

    /// The resolver answers come from.
    public let resolver: HostResolver
    /// The configuration.
    public let configuration: Configuration
    private let logger: Logger
    private let draining = Locked(false)
    private let now: @Sendable () -> Int64

    /// Creates the service.
    public convenience init(resolver: HostResolver, configuration: Configuration = .init(), logger: Logger) {
        self.init(
            resolver: resolver, configuration: configuration, logger: logger,
            now: { Int64(Date().timeIntervalSince1970) })
    }

    init(
        resolver: HostResolver, configuration: Configuration, logger: Logger, now: @escaping @Sendable () -> Int64
    ) {
        self.resolver = resolver
        self.configuration = configuration
        self.logger = logger
        self.now = now
    }

    /// From now on `/readyz` answers 503, so a load balancer stops sending new clients (graceful shutdown).
    public func drain() { draining.withLock { $0 = true } }

    /// Answers one request.
    public func handle(_ request: ServiceRequest) async -> ServiceResponse {
        let (path, query) = Self.split(request.target)
        let segments = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        switch (request.method, segments.count, segments.last) {
        case ("GET", 1, "healthz"):
            return .text(200, "ok")
        case ("GET", 1, "readyz"):
            return draining.withLock { $0 } ? .text(503, "draining") : .text(200, "ready")
        case (_, 1, "dns-query"):
            return await dnsMessage(request, query: query)
        case ("GET", 1, "resolve"):
            return await json(query)
        case ("GET", 1, "d"):
            return await tencent(query)
        case ("GET", 2, "d"), ("GET", 2, "sign_d"):
            return await alibaba(account: segments[0], signed: segments[1] == "sign_d", query)
        case (_, 1, "resolve"), (_, 1, "d"), (_, 2, "d"), (_, 2, "sign_d"), (_, 1, "healthz"), (_, 1, "readyz"):
            return .text(
                405, "method \(HostName.printable(request.method)) is not allowed here", headers: ["Allow": "GET"])
        default:
            return .text(404, "no such endpoint")
        }
    }

    // MARK: - RFC 8484

    private func dnsMessage(_ request: ServiceRequest, query: [String: String]) async -> ServiceResponse {
        let message: [UInt8]
        switch request.method {
        case "GET":
            guard let encoded = query["dns"] else { return .text(400, "the dns parameter is missing") }
            guard let decoded = Base64URL.decode(encoded) else {
                return .text(400, "the dns parameter is not base64url")
            }
            message = decoded
        case "POST":
            let type = request.contentType?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces)
            guard type?.lowercased() == "application/dns-message" else {
                return .text(415, "the body must be application/dns-message")
            }
            message = request.body
        default:
            return .text(
                405, "method \(HostName.printable(request.method)) is not allowed here", headers: ["Allow": "GET, POST"]
            )
        }
        let parsed: DNSQueryMessage
        do {
            parsed = try DNSQueryMessage(message)
        } catch {
            return .text(400, error.reason)
        }
        let (code, records) = await answer(parsed)
        let ttl = records.map(\.ttl).min() ?? 0
        return ServiceResponse(
            status: 200, contentType: "application/dns-message", headers: ["Cache-Control": "max-age=\(ttl)"],
            body: DNSAnswerMessage.encode(answering: parsed, code: code, records: records))
    }

    private func answer(_ query: DNSQueryMessage) async -> (DNSAnswerMessage.ResponseCode, [DNSAnswerMessage.Record]) {
        guard query.opcode == 0 else { return (.notImplemented, []) }
        guard query.questionClass == 1, query.type == 1 || query.type == 28 else { return (.notImplemented, []) }
        let family: AddressFamily = query.type == 1 ? .ipv4 : .ipv6
        switch await lookup(query.name, family: family) {
        case .success(let answer):
            return (.noError, answer.addresses.map { DNSAnswerMessage.Record(data: $0.bytes, ttl: answer.ttl) })
        case .failure(let code):
            return (code, [])
        }
    }

    /// The pipeline's answer for `name` as given (absolute), cut to the answer limit; `noData` is an empty success.
    private func lookup(_ name: String, family: AddressFamily) async
        -> Result<(addresses: [IPAddress], ttl: UInt32), DNSAnswerMessage.ResponseCode>
    {
        guard !name.isEmpty, let host = try? HostName(name + ".") else { return .failure(.refused) }
        do {
            let ranked = try await resolver.resolveRanked(host, family: family)
            let addresses = ranked.addresses.map(\.ip).filter { $0.family == family }
            return .success((Array(addresses.prefix(configuration.maximumAnswers)), ranked.ttl))
        } catch let error as DNSError {
            switch error.code {
            case .noData: return .success(([], 0))
            case .notFound: return .failure(.nameError)
            case .badName: return .failure(.refused)
            default:
                logger.debug("lookup failed", metadata: ["host": "\(name)", "error": "\(error.code)"])
                return .failure(.serverFailure)
            }
        } catch {
            return .failure(.serverFailure)
        }
    }

    // MARK: - JSON API

    private func json(_ query: [String: String]) async -> ServiceResponse {
        guard let name = query["name"], !name.isEmpty else { return .text(400, "the name parameter is missing") }
        let typeText = (query["type"] ?? "A").uppercased()
        let type: UInt16
        switch typeText {
        case "A", "1": type = 1
        case "AAAA", "28": type = 28
        default: return .text(400, "type \(HostName.printable(typeText)) is not supported (A or AAAA)")
        }
        var normalised = name.lowercased()
        if normalised.hasSuffix(".") { normalised.removeLast() }
        let family: AddressFamily = type == 1 ? .ipv4 : .ipv6
        let result = await lookup(normalised, family: family)
        let status: Int
        var answers: [String] = []
        var ttl: UInt32 = 0
        let quoted = JSONText.quote(normalised + ".")
        switch result {
        case .success(let answer):
            status = 0
            ttl = answer.addresses.isEmpty ? 0 : answer.ttl
            answers = answer.addresses.map { address in
                "{\"name\":\(quoted),\"type\":\(type),\"TTL\":\(answer.ttl),\"data\":\(JSONText.quote(address.description))}"
            }
        case .failure(let code):
            status = Int(code.rawValue)
        }
        var body = "{\"Status\":\(status),\"TC\":false,\"RD\":true,\"RA\":true,\"AD\":false,\"CD\":false,"
        body += "\"Question\":[{\"name\":\(quoted),\"type\":\(type)}]"
        if !answers.isEmpty { body += ",\"Answer\":[" + answers.joined(separator: ",") + "]" }
        body += "}"
        return ServiceResponse(
            status: 200, contentType: "application/dns-json", headers: ["Cache-Control": "max-age=\(ttl)"],
            body: Array(body.utf8))
    }

    // MARK: - Vendor APIs

    private func alibaba(account: String, signed: Bool, _ query: [String: String]) async -> ServiceResponse {
        func failure(_ status: Int, _ code: String) -> ServiceResponse {
            ServiceResponse(
                status: status, contentType: "application/json", body: Array("{\"code\":\"\(code)\"}".utf8))
        }
        guard let secret = configuration.accounts[account] else { return failure(404, "InvalidAccount") }
        guard let name = query["host"], !name.isEmpty, let host = try? HostName(name) else {
            return failure(400, "InvalidHost")
        }
        if let secret {
            guard signed else { return failure(403, "SignatureRequired") }
            guard let expiry = query["t"].flatMap({ Int64($0) }), let signature = query["s"] else {
                return failure(403, "InvalidSignature")
            }
            let expected = Array(AlibabaHTTPDNS.signature(host: name, secret: secret.value, expiry: expiry).utf8)
            guard Self.constantTimeEqual(Array(signature.lowercased().utf8), expected) else {
                return failure(403, "InvalidSignature")
            }
            guard expiry >= now() else { return failure(403, "SignatureExpired") }
        } else if signed {
            return failure(403, "InvalidSignature")
        }
        let families: [AddressFamily]
        switch query["query"] {
        case nil, "4": families = [.ipv4]
        case "6": families = [.ipv6]
        case "4,6", "6,4": families = [.ipv4, .ipv6]
        default: return failure(400, "InvalidQuery")
        }
        var lists: [AddressFamily: [String]] = [:]
        var ttl: UInt32?
        for family in families {
            if case .success(let answer) = await lookup(host.name, family: family) {
                lists[family] = answer.addresses.map(\.description)
                if !answer.addresses.isEmpty { ttl = min(ttl ?? answer.ttl, answer.ttl) }
            }
        }
        func list(_ family: AddressFamily) -> String {
            "[" + (lists[family] ?? []).map(JSONText.quote).joined(separator: ",") + "]"
        }
        let answerTTL = ttl ?? 60
        let body =
            "{\"host\":\(JSONText.quote(host.name)),\"ips\":\(list(.ipv4)),\"ipsv6\":\(list(.ipv6)),"
            + "\"ttl\":\(answerTTL),\"origin_ttl\":\(answerTTL)}"
        return ServiceResponse(status: 200, contentType: "application/json", body: Array(body.utf8))
    }

    private func tencent(_ query: [String: String]) async -> ServiceResponse {
        guard query["alg"] == nil else { return .text(400, "encrypted requests (alg) are not supported") }
        guard let name = query["dn"], !name.isEmpty, let host = try? HostName(name) else {
            return .text(400, "the dn parameter is missing or not a host name")
        }
        let families: [AddressFamily]
        switch query["type"]?.lowercased() {
        case nil, "a": families = [.ipv4]
        case "aaaa": families = [.ipv6]
        case "addrs": families = [.ipv4, .ipv6]
        default: return .text(400, "type must be a, aaaa or addrs")
        }
        let withTTL = query["ttl"] == "1"
        var parts: [String] = []
        for family in families {
            guard case .success(let answer) = await lookup(host.name, family: family), !answer.addresses.isEmpty
            else {
                parts.append("0")
                continue
            }
            let list = answer.addresses.map(\.description).joined(separator: ";")
            parts.append(withTTL ? "\(list),\(answer.ttl)" : list)
        }
        return ServiceResponse(
            status: 200, contentType: "text/plain; charset=utf-8", body: Array(parts.joined(separator: "-").utf8))
    }

    // MARK: - Helpers

    /// The path and the decoded query parameters (the first value of each name) of a request target.
    static func split(_ target: String) -> (path: String, query: [String: String]) {
        guard let mark = target.firstIndex(of: "?") else { return (target, [:]) }
        var query: [String: String] = [:]
        for pair in target[target.index(after: mark)...].split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let key = parts.first.flatMap({ PercentDecoding.decode($0) }) else { continue }
            let value = parts.count > 1 ? PercentDecoding.decode(parts[1]) : ""
            if query[key] == nil, let value { query[key] = value }
        }
        return (String(target[..<mark]), query)
    }

    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}

/// base64url without padding (RFC 4648 §5), as RFC 8484 uses it; padding is tolerated.
enum Base64URL {
    static func decode(_ text: String) -> [UInt8]? {
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        guard standard.utf8.count % 4 != 1 else { return nil }
        if !standard.hasSuffix("=") { standard += String(repeating: "=", count: (4 - standard.utf8.count % 4) % 4) }
        return Data(base64Encoded: standard).map { Array($0) }
    }
}

/// Query parameter decoding: `+` is a space, then `%XX`.
enum PercentDecoding {
    static func decode<S: StringProtocol>(_ text: S) -> String? {
        String(text).replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }
}

/// JSON string literals.
enum JSONText {
    static func quote(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
