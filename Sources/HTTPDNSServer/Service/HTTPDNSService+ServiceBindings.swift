import HTTPDNS
import Logging

/// HTTPS and SVCB answers (RFC 9460) that agree with the A and AAAA answers: browsers and system resolvers ask for
/// HTTPS records first and may connect to their `ipv4hint`/`ipv6hint` addresses, so hints straight from the upstream
/// would bypass the overrides and the steering. For an overridden name the service makes the record itself; for any
/// other name the upstream's record is relayed with its hints replaced by the addresses the same client network gets
/// for A and AAAA, in the same order (the port, ALPN and the rest as they came; ECH dropped for a target the
/// overrides answer), or SERVFAIL when it cannot be rebuilt: the upstream's own hints never reach a client.
extension HTTPDNSService {
    /// The most names one answer's hints are steered for (each costs two lookups, run under the relay's place); the
    /// hints of any further name are left out rather than passed on unsteered. An answer rarely holds more than one
    /// target.
    static let maximumHintedNames = 2

    /// Whether `type` is SVCB (64) or HTTPS (65).
    static func isServiceBinding(_ type: UInt16) -> Bool { type == 64 || type == 65 }

    /// For an HTTPS query of a name the overrides (or the hosts file) answer: one ServiceMode record for the name
    /// itself, whose hints are the override's addresses, with the ALPN identifiers and port of the settings
    /// (`serve.httpsRecords.*`), for the override's TTL. `nil` for a name they do not answer.
    func overriddenBindingPlan(_ parsed: DNSQueryMessage, stated: IPNetwork?, _ configuration: Configuration) -> Plan? {
        // HTTPS only: its ALPN identifiers are HTTP's; an SVCB record (`_dns`, a port prefix) is relayed and steered.
        guard parsed.type == 65, let host = try? HostName(parsed.name),
            let local = resolver.overrides?.resolve(host, family: .any) ?? resolver.hosts?.resolve(host, family: .any)
        else { return nil }
        var binding = ServiceBinding(priority: 1)
        if !configuration.httpsRecordALPN.isEmpty { binding.alpn = configuration.httpsRecordALPN }
        if configuration.httpsRecordPort > 0 { binding.port = UInt16(configuration.httpsRecordPort) }
        // As many of each family as an A or AAAA answer holds.
        let limit = configuration.maximumAnswers
        binding.ipv4Hints = Array(local.addresses.map(\.ip).filter { $0.family == .ipv4 }.prefix(limit))
        binding.ipv6Hints = Array(local.addresses.map(\.ip).filter { $0.family == .ipv6 }.prefix(limit))
        let ttl = local.addresses.map(\.ttl).min() ?? 0
        return Plan(
            endpoint: "dns-query", name: parsed.name,
            work: .done(
                Self.dnsResponse(
                    parsed, .noError, [.init(data: binding.rdata, ttl: ttl)],
                    clientSubnet: stated.map { ($0, 0) })))
    }

    /// `response` to `relay` (an SVCB or HTTPS query) with its hints steered, asking the pipeline for the addresses
    /// it does not hold.
    func steered(_ response: ServiceResponse, _ relay: Relay) async -> ServiceResponse {
        guard let names = Self.hintedNames(response, relay) else { return response }
        var hints: [String: ServiceBindingAnswer.Hints] = [:]
        for name in names {
            async let v4 = lookup(hintLookup(name, .ipv4, relay))
            async let v6 = lookup(hintLookup(name, .ipv6, relay))
            hints[name] = Self.hints(await v4, await v6, local: isLocal(name))
        }
        return steering(response, relay, hints: hints)
    }

    /// `response` with its hints steered from the cache alone; `nil` when a name's addresses are not there (the
    /// caller asks in a task, through ``steered(_:_:)``).
    func steeredFromCache(_ response: ServiceResponse, _ relay: Relay) -> ServiceResponse? {
        guard let names = Self.hintedNames(response, relay) else { return response }
        var hints: [String: ServiceBindingAnswer.Hints] = [:]
        for name in names {
            guard let (v4, _) = cachedLookup(hintLookup(name, .ipv4, relay)),
                let (v6, _) = cachedLookup(hintLookup(name, .ipv6, relay))
            else { return nil }
            hints[name] = Self.hints(v4, v6, local: isLocal(name))
        }
        return steering(response, relay, hints: hints)
    }

    /// The names a response's ServiceMode records hint at, at most ``maximumHintedNames``; `nil` unless `relay` is
    /// an SVCB or HTTPS query answered with such records (readable or not: an unreadable one is left out of the
    /// rewritten answer).
    private static func hintedNames(_ response: ServiceResponse, _ relay: Relay) -> [String]? {
        guard isServiceBinding(relay.query.type), response.status == 200,
            ServiceBindingAnswer.holdsBindings(response.body)
        else { return nil }
        return ServiceBindingAnswer.hintedNames(in: response.body, limit: maximumHintedNames)
    }

    /// The lookup of `name`'s addresses of `family` for `relay`'s client network, as an A or AAAA query of it is.
    private func hintLookup(_ name: String, _ family: AddressFamily, _ relay: Relay) -> Lookup {
        Lookup(
            name: name, family: family, limit: configuration.maximumAnswers,
            network: (subnet: relay.subnet, chosen: relay.chosen))
    }

    /// Whether the overrides or the hosts file answer `name`: its hints are then the server's own addresses.
    private func isLocal(_ name: String) -> Bool {
        guard let host = try? HostName(name) else { return false }
        return resolver.overrides?.contains(host) ?? false || resolver.hosts?.contains(host) ?? false
    }

    /// The hints two lookups give: each family's addresses (none for a failure), for the shorter TTL of the
    /// families that have addresses (`UInt32.max`: no bound, when neither has: an empty answer's TTL of 0 must not
    /// make every IPv4-only target's record uncacheable).
    private static func hints(_ v4: LookupResult, _ v6: LookupResult, local: Bool) -> ServiceBindingAnswer.Hints {
        let ipv4 = (try? v4.get()).flatMap { $0.addresses.isEmpty ? nil : $0 }
        let ipv6 = (try? v6.get()).flatMap { $0.addresses.isEmpty ? nil : $0 }
        let ttls = [ipv4?.ttl, ipv6?.ttl].compactMap { $0 }
        return ServiceBindingAnswer.Hints(
            ipv4: ipv4?.addresses ?? [], ipv6: ipv6?.addresses ?? [], ttl: ttls.min() ?? .max, local: local)
    }

    /// `response` rebuilt with `hints`, kept for no longer than they hold; SERVFAIL when it cannot be rebuilt (the
    /// original carries the upstream's hints, which must not reach the client).
    private func steering(_ response: ServiceResponse, _ relay: Relay, hints: [String: ServiceBindingAnswer.Hints])
        -> ServiceResponse
    {
        guard let body = ServiceBindingAnswer.steering(response.body, hints: hints) else {
            logger.debug(
                "an SVCB/HTTPS answer could not be rebuilt with steered hints; SERVFAIL",
                metadata: ["host": "\(HostName.printable(relay.query.name))"])
            return Self.dnsResponse(relay.query, .serverFailure, [])
        }
        var steered = response
        steered.body = body
        if let ttl = hints.values.map(\.ttl).filter({ $0 != .max }).min() {
            steered.maxAge = min(steered.maxAge ?? ttl, ttl)
        }
        return steered
    }
}
