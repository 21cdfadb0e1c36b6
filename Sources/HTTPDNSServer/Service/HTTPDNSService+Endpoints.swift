import Foundation
import HTTPDNS
import Logging

/// The endpoints: RFC 8484 (answered from the pipeline, or relayed for other types), the JSON API and the vendor
/// APIs, each read into a plan of lookups and rendered in its own format.
extension HTTPDNSService {
    // MARK: - RFC 8484

    /// A GET's `dns` parameter: `.some(nil)` when it is there but not base64url, `nil` when it is missing.
    static func dnsParameter(_ target: RequestTarget) -> [UInt8]?? {
        // base64url needs no percent-encoding: decoded straight from the request's bytes.
        if let decoded = target.withRawParameter("dns", { Base64URL.decode($0) }) { return .some(decoded) }
        return target.parameter("dns").map { Base64URL.decode($0) }
    }

    /// Whether a POST's `Content-Type` is `application/dns-message` (parameters aside).
    static func isDNSMessage(_ contentType: String?) -> Bool {
        // The client's media-type reading (a bare lower-case type, the common case, is compared as it is).
        HTTPDNSResolver.mediaType(contentType) == "application/dns-message"
    }

    /// The plan for a message that came over UDP, TCP or TLS: RFC 8484's path without its HTTP (those fronts make
    /// every request a POST of `application/dns-message` to `/dns-query`, so the target, the method and the media
    /// type need no reading), with the same rate limit, kept answers and account rule.
    func dnsTransportPlan(_ request: ServiceRequest, memo: AnswerMemo?, now: ContinuousClock.Instant) -> Plan {
        if let limited = rateLimited(request, endpoint: "dns-query") { return limited }
        var generation: UInt64 = 0
        if let memo {
            generation = answerGeneration
            if let (response, name) = kept(request.body, in: memo, generation: generation, now: now) {
                return Plan(endpoint: "dns-query", name: name, work: .done(response))
            }
        }
        let configuration = self.configuration
        guard configuration.answersPublicEndpoints else {
            return Plan(
                endpoint: "dns-query", work: .done(.text(403, "this service answers requests for an account only")))
        }
        var plan = dnsMessagePlan(request.body, client: request.client, configuration)
        if memo != nil, plan.keepable, case .lookups = plan.work {
            plan.memoizable = (request.body, generation, nameStamp(plan.name))
        }
        return plan
    }

    /// `dns`: the decoded `dns` parameter of a GET (`.some(nil)`: not base64url).
    func dnsMessagePlan(_ request: ServiceRequest, dns: [UInt8]??, _ configuration: Configuration) -> Plan {
        let message: [UInt8]
        if request.method == "GET" {
            guard let encoded = dns else { return Self.failedDNSQuery(400, "the dns parameter is missing") }
            guard let decoded = encoded else { return Self.failedDNSQuery(400, "the dns parameter is not base64url") }
            message = decoded
        } else {
            guard Self.isDNSMessage(request.contentType) else {
                return Self.failedDNSQuery(415, "the body must be application/dns-message")
            }
            message = request.body
        }
        return dnsMessagePlan(message, client: request.client, configuration)
    }

    private static func failedDNSQuery(_ status: Int, _ text: String) -> Plan {
        Plan(endpoint: "dns-query", work: .done(.text(status, text)))
    }

    /// The plan for the DNS query `message` from `client`.
    func dnsMessagePlan(_ message: [UInt8], client: IPAddress?, _ configuration: Configuration) -> Plan {
        let parsed: DNSQueryMessage
        do {
            parsed = try DNSQueryMessage(message)
        } catch {
            return Self.failedDNSQuery(400, error.reason)
        }
        func answer(
            _ code: DNSAnswerMessage.ResponseCode, _ records: [DNSAnswerMessage.Record] = [],
            extendedError: ExtendedDNSError? = nil
        ) -> Plan {
            Plan(
                endpoint: "dns-query", name: parsed.name,
                work: .done(Self.dnsResponse(parsed, code, records, extendedError: extendedError)))
        }
        guard parsed.opcode == 0 else { return answer(.notImplemented) }
        // Class IN only: CHAOS (version.bind and the like) and the rest are not this service's to answer or relay.
        guard parsed.questionClass == 1 else { return answer(.refused, extendedError: .notServed) }
        // The client's own ECS option (RFC 7871), used and echoed with the answer's scope when the mode is on; a
        // malformed one is a FORMERR (§7.1.1).
        var stated: IPNetwork?
        if parsed.usesEDNS, configuration.clientSubnetMode == .on {
            do {
                stated = try EDNSClientSubnet.find(in: message)?.subnet
            } catch {
                return answer(.formatError)
            }
        }
        let network = clientNetwork(stated: stated, client: client, configuration)
        guard parsed.type == 1 || parsed.type == 28 else {
            return otherTypePlan(parsed, message, network: network, stated: stated, configuration)
        }
        let lookup = Lookup(
            name: parsed.name, family: parsed.type == 1 ? .ipv4 : .ipv6, limit: configuration.maximumAnswers,
            network: network)
        var plan = Plan(
            endpoint: "dns-query", name: parsed.name,
            work: .lookups([lookup]) { [stated] results in
                switch results[0] {
                case .success(let answer):
                    return Self.dnsResponse(
                        parsed, .noError, answer.addresses.map { .init(data: $0.bytes, ttl: answer.ttl) },
                        clientSubnet: stated.map { ($0, min(answer.scope, $0.prefixLength)) },
                        extendedError: answer.stale ? .staleAnswer : nil)
                case .failure(let failure):
                    var response = Self.dnsResponse(
                        parsed, failure.code, [], clientSubnet: stated.map { ($0, 0) },
                        extendedError: failure.extendedError)
                    if failure.isWithheld { response.outcome = .withheld }
                    return response
                }
            })
        plan.echoesSubnet = stated != nil
        plan.keepable = stated.map { $0.prefixLength == 0 || network.subnet != nil } ?? true
        return plan
    }

    /// The plan for a query of another type than A and AAAA: declined (ANY, `resolver.arpa`, NOTIMP without a
    /// forwarder), an overridden name's HTTPS record, or a relay.
    private func otherTypePlan(
        _ parsed: DNSQueryMessage, _ message: [UInt8], network: (subnet: IPNetwork?, chosen: Bool), stated: IPNetwork?,
        _ configuration: Configuration
    ) -> Plan {
        func answer(_ code: DNSAnswerMessage.ResponseCode, extendedError: ExtendedDNSError? = nil) -> Plan {
            Plan(
                endpoint: "dns-query", name: parsed.name,
                work: .done(Self.dnsResponse(parsed, code, [], extendedError: extendedError)))
        }
        // ANY would carry A, AAAA and HTTPS records past the steering, and RFC 8482 lets a server decline it.
        if parsed.type == 255 { return answer(.notImplemented) }
        // `resolver.arpa` names this server's own resolver (RFC 9462 §4: forwarders do not forward it): nothing
        // is designated here.
        if parsed.name == "resolver.arpa" || parsed.name.hasSuffix(".resolver.arpa") { return answer(.noError) }
        // An overridden name's HTTPS or SVCB record is the service's own, whatever happens to other types.
        if Self.isServiceBinding(parsed.type),
            let plan = overriddenBindingPlan(parsed, stated: stated, configuration)
        {
            return plan
        }
        guard configuration.otherTypes == .forward, forwarder != nil else { return answer(.notImplemented) }
        // Our own forwarded query back again, or one that passed too many forwarders: a loop, not forwarded.
        guard !forwardingMarker.isLoop(message) else { return answer(.serverFailure) }
        if parsed.type == 12, !configuration.forwardsGuardedReverseLookups,
            ForwardedQuery.reverseTarget(parsed.name)?.isNonPublic ?? false
        {
            return answer(.refused, extendedError: .notServed)
        }
        guard
            let relayed = try? ForwardedQuery.strippingEveryOption(
                message, questionEnd: 12 + parsed.question.count)
        else { return answer(.formatError) }
        return Plan(
            endpoint: "dns-query", name: parsed.name,
            work: .forward(
                Relay(
                    query: parsed, message: relayed, subnet: network.subnet, chosen: network.chosen,
                    stated: stated)))
    }

    static func dnsResponse(
        _ query: DNSQueryMessage, _ code: DNSAnswerMessage.ResponseCode, _ records: [DNSAnswerMessage.Record],
        clientSubnet: (network: IPNetwork, scope: Int)? = nil, extendedError: ExtendedDNSError? = nil
    ) -> ServiceResponse {
        var ttl = records.first?.ttl ?? 0
        for record in records { ttl = min(ttl, record.ttl) }
        return ServiceResponse(
            status: 200, contentType: "application/dns-message", maxAge: ttl,
            body: DNSAnswerMessage.encode(
                answering: query, code: code, records: records, clientSubnet: clientSubnet,
                extendedError: extendedError))
    }

    /// The key of relayed answers asked without a client network while ECS is on.
    static let askedWithoutNetwork = IPNetwork(IPAddress(ipv4: 0, 0, 0, 0), prefixLength: 0)

    // MARK: - JSON API

    func jsonPlan(_ query: [String: String], client: IPAddress?, _ configuration: Configuration) -> Plan {
        guard let name = query["name"], !name.isEmpty else {
            return Plan(endpoint: "resolve", work: .done(.text(400, "the name parameter is missing")))
        }
        let typeText = (query["type"] ?? "A").uppercased()
        let type: UInt16
        switch typeText {
        case "A", "1": type = 1
        case "AAAA", "28": type = 28
        default:
            return Plan(
                endpoint: "resolve",
                work: .done(.text(400, "type \(HostName.printable(typeText)) is not supported (A or AAAA)")))
        }
        var normalised = HostName.asciiLowercased(name)
        if normalised.hasSuffix(".") { normalised.removeLast() }
        let quoted = JSONString.quoted(normalised + ".")
        // Google's form of the client's network: edns_client_subnet=ADDRESS/LENGTH.
        var stated: IPNetwork?
        if let text = query["edns_client_subnet"], configuration.clientSubnetMode == .on {
            guard let network = IPNetwork(text) else {
                return Plan(
                    endpoint: "resolve",
                    work: .done(.text(400, "edns_client_subnet must be a network such as 198.51.100.0/24")))
            }
            stated = network
        }
        let lookup = Lookup(
            name: normalised, family: type == 1 ? .ipv4 : .ipv6, limit: configuration.maximumAnswers,
            network: clientNetwork(stated: stated, client: client, configuration))
        return Plan(
            endpoint: "resolve", name: normalised,
            work: .lookups([lookup]) { [stated] results in
                var status = 0
                var outcome = AnswerOutcome.noError
                var answers: [String] = []
                var ttl: UInt32 = 0
                var scope = 0
                var why: ExtendedDNSError?
                switch results[0] {
                case .success(let answer):
                    why = answer.stale ? .staleAnswer : nil
                    scope = stated.map { min(answer.scope, $0.prefixLength) } ?? 0
                    ttl = answer.addresses.isEmpty ? 0 : answer.ttl
                    answers = answer.addresses.map { address in
                        "{\"name\":\(quoted),\"type\":\(type),\"TTL\":\(answer.ttl),\"data\":\(JSONString.quoted(address.description))}"
                    }
                case .failure(let failure):
                    status = Int(failure.code.rawValue)
                    outcome = failure.outcome
                    why = failure.extendedError
                }
                var body = "{\"Status\":\(status),\"TC\":false,\"RD\":true,\"RA\":true,\"AD\":false,\"CD\":false,"
                body += "\"Question\":[{\"name\":\(quoted),\"type\":\(type)}]"
                if !answers.isEmpty { body += ",\"Answer\":[" + answers.joined(separator: ",") + "]" }
                // As Google's API answers it: the network asked for, with the answer's scope as its length.
                if let stated { body += ",\"edns_client_subnet\":\"\(stated.address)/\(scope)\"" }
                // Why (RFC 8914's Extended DNS Error), as an object of its INFO-CODE and EXTRA-TEXT.
                if let why {
                    body += ",\"ExtendedDNSError\":{\"InfoCode\":\(why.code),"
                    body += "\"ExtraText\":\(JSONString.quoted(why.text))}"
                }
                body += "}"
                return ServiceResponse(
                    status: 200, contentType: "application/dns-json", maxAge: ttl, body: Array(body.utf8),
                    outcome: outcome)
            })
    }

    // MARK: - Vendor APIs

    func alibabaPlan(
        account: String, signed: Bool, _ query: [String: String], client: IPAddress?, _ configuration: Configuration
    ) -> Plan {
        func failure(_ status: Int, _ code: String) -> Plan {
            Plan(
                endpoint: "alibaba",
                work: .done(
                    ServiceResponse(
                        status: status, contentType: "application/json", body: Array("{\"code\":\"\(code)\"}".utf8))))
        }
        // An unknown account, a signed-only account asked without a signature and a wrong signature all get the
        // same answer, whatever else the request holds: the signature is checked before anything else is read, so
        // accounts cannot be told apart from outside (only a request signed with the secret learns more).
        guard case .some(let secret) = configuration.accounts[account] else { return failure(403, "InvalidSignature") }
        if let secret {
            guard signed else { return failure(403, "InvalidSignature") }
            if let reason = signatureFailure(host: query["host"] ?? "", secret: secret, query: query, configuration) {
                return failure(403, reason)
            }
        } else if signed {
            return failure(403, "InvalidSignature")
        }
        guard let name = query["host"], !name.isEmpty, let host = try? HostName(name) else {
            return failure(400, "InvalidHost")
        }
        let families: [AddressFamily]
        switch query["query"] {
        case nil, "4": families = [.ipv4]
        case "6": families = [.ipv6]
        case "4,6", "6,4": families = [.ipv4, .ipv6]
        default: return failure(400, "InvalidQuery")
        }
        guard let stated = Self.statedClientAddress(query) else { return failure(400, "InvalidIP") }
        let network = clientNetwork(stated: stated, client: client, configuration)
        let hostName = host.name
        return Plan(
            endpoint: "alibaba", name: hostName,
            work: .lookups(
                families.map {
                    Lookup(name: hostName, family: $0, limit: configuration.maximumAnswers, network: network)
                }
            ) {
                results in
                var lists: [AddressFamily: [String]] = [:]
                var ttl: UInt32?
                for (family, result) in zip(families, results) {
                    if case .success(let answer) = result {
                        lists[family] = answer.addresses.map(\.description)
                        if !answer.addresses.isEmpty { ttl = min(ttl ?? answer.ttl, answer.ttl) }
                    }
                }
                func list(_ family: AddressFamily) -> String {
                    "[" + (lists[family] ?? []).map(JSONString.quoted).joined(separator: ",") + "]"
                }
                let answerTTL = ttl ?? 60
                let body =
                    "{\"host\":\(JSONString.quoted(hostName)),\"ips\":\(list(.ipv4)),\"ipsv6\":\(list(.ipv6)),"
                    + "\"ttl\":\(answerTTL),\"origin_ttl\":\(answerTTL)}"
                return ServiceResponse(
                    status: 200, contentType: "application/json", body: Array(body.utf8),
                    outcome: Self.vendorOutcome(results))
            })
    }

    func tencentPlan(_ query: [String: String], client: IPAddress?, _ configuration: Configuration) -> Plan {
        func failure(_ text: String) -> Plan { Plan(endpoint: "tencent", work: .done(.text(400, text))) }
        guard query["alg"] == nil else { return failure("encrypted requests (alg) are not supported") }
        guard let name = query["dn"], !name.isEmpty, let host = try? HostName(name) else {
            return failure("the dn parameter is missing or not a host name")
        }
        let families: [AddressFamily]
        switch query["type"]?.lowercased() {
        case nil, "a": families = [.ipv4]
        case "aaaa": families = [.ipv6]
        case "addrs": families = [.ipv4, .ipv6]
        default: return failure("type must be a, aaaa or addrs")
        }
        let withTTL = query["ttl"] == "1"
        guard let stated = Self.statedClientAddress(query) else { return failure("ip must be an IP address") }
        let network = clientNetwork(stated: stated, client: client, configuration)
        return Plan(
            endpoint: "tencent", name: host.name,
            work: .lookups(
                families.map {
                    Lookup(name: host.name, family: $0, limit: configuration.maximumAnswers, network: network)
                }
            ) {
                results in
                let parts = results.map { result -> String in
                    guard case .success(let answer) = result, !answer.addresses.isEmpty else { return "0" }
                    let list = answer.addresses.map(\.description).joined(separator: ";")
                    return withTTL ? "\(list),\(answer.ttl)" : list
                }
                return ServiceResponse(
                    status: 200, contentType: "text/plain; charset=utf-8",
                    body: Array(parts.joined(separator: "-").utf8), outcome: Self.vendorOutcome(results))
            })
    }

    // MARK: - Helpers

    /// What a vendor API's answer comes to, though its body cannot say it (an empty list is all a failure gets):
    /// NOERROR when any family answered, else the failure that says most (SERVFAIL over a withheld answer over
    /// NXDOMAIN over the rest).
    static func vendorOutcome(_ results: [LookupResult]) -> AnswerOutcome {
        var failures: [AnswerOutcome] = []
        for result in results {
            switch result {
            case .success: return .noError
            case .failure(let failure): failures.append(failure.outcome)
            }
        }
        for outcome in [AnswerOutcome.serverFailure, .withheld, .nameError] where failures.contains(outcome) {
            return outcome
        }
        return failures.first ?? .noError
    }

    /// The vendor APIs' `ip=` (the address the answer is for, as Alibaba and Tencent take it) as a network of that
    /// one address: `.some(nil)` without the parameter, `nil` when it is not an address.
    static func statedClientAddress(_ query: [String: String]) -> IPNetwork?? {
        guard let text = query["ip"] else { return .some(nil) }
        guard let address = IPAddress(text) else { return nil }
        return .some(IPNetwork(address, prefixLength: 128))
    }

    /// Why the `t` and `s` parameters do not sign `host` for `secret` (an Alibaba-style signature), or `nil` when they
    /// do: `InvalidSignature`, `SignatureExpired`, or `InvalidExpiry` for an expiry further ahead than
    /// ``Configuration-swift.struct/signatureWindow``. Only a correct signature learns about its expiry.
    func signatureFailure(
        host: String, secret: HTTPDNSSecret, query: [String: String], _ configuration: Configuration
    ) -> String? {
        guard let expiry = query["t"].flatMap({ Int64($0) }), let signature = query["s"] else {
            return "InvalidSignature"
        }
        let expected = Array(AlibabaHTTPDNS.signature(host: host, secret: secret.value, expiry: expiry).utf8)
        guard Self.constantTimeEqual(Array(signature.lowercased().utf8), expected) else { return "InvalidSignature" }
        let now = now()
        guard expiry >= now else { return "SignatureExpired" }
        guard expiry - now <= Int64(configuration.signatureWindow.components.seconds) else { return "InvalidExpiry" }
        return nil
    }

    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}

extension ServiceRequest.Transport {
    /// Whether requests of this transport are DNS messages as they came (UDP, TCP, TLS), not HTTP requests.
    var carriesDNSMessages: Bool { self == .udp || self == .tcp || self == .tls }
}
