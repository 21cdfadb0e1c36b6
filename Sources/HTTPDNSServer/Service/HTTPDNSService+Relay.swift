import HTTPDNS
import Logging

/// Queries of other types relayed to the forwarder: the answers kept, what goes upstream, and what comes back.
extension HTTPDNSService {
    /// A relayed answer for `relay` still kept: for every network (the global key), then for this client's network,
    /// or (asked without a network while ECS is on: a client that sent a /0) for clients asked that way only; with
    /// the client's own ECS option echoed with the scope it holds for.
    /// `counting`: whether the answer found is counted as a kept one now (the caller counts it once it is used).
    func keptRelayAnswer(_ relay: Relay, counting: Bool = true) -> ServiceResponse? {
        let now = ContinuousClock.now
        let mode = configuration.clientSubnetMode
        let ownKey = relay.subnet ?? (mode == .off ? nil : Self.askedWithoutNetwork)
        if let (answer, ttl) = forwardedAnswers.answer(to: relay.message, now: now) {
            if counting { metrics.relayKeptAnswer() }
            return Self.relayResponse(answer, ttl: ttl, scope: 0, relay: relay)
        }
        if let ownKey, let (answer, ttl) = forwardedAnswers.answer(to: relay.message, network: ownKey, now: now) {
            if counting { metrics.relayKeptAnswer() }
            return Self.relayResponse(answer, ttl: ttl, scope: ownKey.prefixLength, relay: relay)
        }
        return nil
    }

    /// A kept answer to `relay` that can go out at once: an SVCB or HTTPS answer only when the addresses its hints
    /// become are in the cache (else `nil`: the task's path steers it).
    func immediateRelayAnswer(_ relay: Relay) -> ServiceResponse? {
        guard Self.isServiceBinding(relay.query.type) else { return keptRelayAnswer(relay) }
        guard let kept = keptRelayAnswer(relay, counting: false), let steered = steeredFromCache(kept, relay) else {
            return nil
        }
        metrics.relayKeptAnswer()
        return steered
    }

    /// A relayed answer as the client gets it: its own ECS option (`stated`) echoed with the answer's scope, and no
    /// OPT record at all for a client that sent none (RFC 6891 §7: EDNS only to EDNS clients; the upstream saw the
    /// server's OPT record, with its forwarding marker).
    static func relayResponse(_ answer: [UInt8], ttl: UInt32, scope: Int, relay: Relay) -> ServiceResponse {
        var body = answer
        if !relay.query.usesEDNS { body = DNSMessageWalk.removingOPT(body) ?? body }
        if let stated = relay.stated {
            body = EDNSClientSubnet.settingOption(in: answer, stated, scope: min(scope, stated.prefixLength)) ?? answer
        }
        return ServiceResponse(status: 200, contentType: "application/dns-message", maxAge: ttl, body: body)
    }

    /// Relays a query of another type to the forwarder, with the client's ID put back: with the client's network
    /// as an ECS option when there is one, the answer kept for the scope the upstream gave (for every network, or
    /// for the network sent only) and the client's own option echoed with that scope.
    func forward(_ relay: Relay) async -> ServiceResponse {
        guard let forwarder else { return Self.dnsResponse(relay.query, .notImplemented, []) }
        if let kept = keptRelayAnswer(relay) { return await steered(kept, relay) }
        let outgoing = relayOutgoing(relay)
        let started = ContinuousClock.now
        do {
            let answer = try await forwarder.forward(outgoing.message)
            countRelay(answer, since: started)
            return await steered(relayed(answer, relay, subnet: outgoing.subnet), relay)
        } catch {
            if !(error is CancellationError) { countRelay(nil, since: started) }
            return relayFailure(error, relay)
        }
    }

    /// What goes upstream for `relay`: its message with the client's network as an ECS option (`subnet`, when
    /// there is one and it could be added) and the forwarding marker.
    func relayOutgoing(_ relay: Relay) -> (message: [UInt8], subnet: IPNetwork?) {
        let withSubnet = relay.subnet.flatMap { subnet in
            EDNSClientSubnet.settingOption(in: relay.message, subnet).map { (subnet, $0) }
        }
        let outgoing = withSubnet?.1 ?? relay.message
        let questionEnd = 12 + relay.query.question.count
        return (forwardingMarker.marking(outgoing, questionEnd: questionEnd) ?? outgoing, withSubnet?.0)
    }

    /// Counts a relayed query sent at `started`: answered with `answer` (whatever its response code, as the
    /// resolver counts its own upstreams), or failed (`nil`: a timeout, a transport error).
    func countRelay(_ answer: [UInt8]?, since started: ContinuousClock.Instant) {
        let answered = (answer?.count ?? 0) >= 12
        let duration = ContinuousClock.now - started
        metrics.relayUpstream(answered: answered, duration: duration)
        relayHealth.record("relay", answered: answered, duration: duration)
    }

    /// The upstream's `answer` to `relay` (sent with `subnet`), as every path answers it (a task's, a server
    /// loop's): an answer that hands out internal addresses withheld, the upstream's ECS option taken off, the
    /// answer kept for the scope it holds for, the client's ID and option put back.
    func relayed(_ answer: [UInt8], _ relay: Relay, subnet: IPNetwork?) -> ServiceResponse {
        let query = relay.query
        var answer = answer
        guard answer.count >= 12 else { return Self.dnsResponse(query, .serverFailure, []) }
        // An answer that hands out internal addresses is withheld, and looks like a name that does not exist.
        if configuration.guardsForwardedAddresses, ForwardedAnswerGuard.handsOutGuardedAddress(answer) {
            var response = Self.dnsResponse(query, .nameError, [])
            response.outcome = .withheld
            return response
        }
        answer[0] = UInt8(query.id >> 8)
        answer[1] = UInt8(query.id & 0xFF)
        var scope = 0
        if let subnet {
            guard let (stripped, scoped) = Self.scoped(answer, askedFor: subnet) else {
                return Self.dnsResponse(query, .serverFailure, [])
            }
            (answer, scope) = (stripped, scoped)
            // A chosen network's answer, scope 0 included, is kept for that network only.
            forwardedAnswers.keep(
                answer, to: relay.message, network: scope > 0 || relay.chosen ? subnet : nil, now: .now)
        } else {
            // Asked as the server: with ECS off its view is every client's; with ECS on (a client that sent a
            // /0) only clients asked the same way get it: an authoritative that tailors answers went by the
            // server's address, and that answer must not reach clients of other networks.
            forwardedAnswers.keep(
                answer, to: relay.message,
                network: configuration.clientSubnetMode == .off ? nil : Self.askedWithoutNetwork,
                now: .now)
        }
        let ttl = ForwardedAnswerCache.recordTTLs(answer)?.map(\.ttl).min() ?? 0
        return Self.relayResponse(answer, ttl: ttl, scope: scope, relay: relay)
    }

    /// What a relay that failed with `error` answers: REFUSED when every upstream refused (the client hears it, not
    /// a failure of this server), else SERVFAIL.
    func relayFailure(_ error: any Error, _ relay: Relay) -> ServiceResponse {
        if let error = error as? HTTPDNSError, error.code == .refused {
            return Self.dnsResponse(relay.query, .refused, [])
        }
        logger.debug(
            "forwarding failed", metadata: ["host": "\(HostName.printable(relay.query.name))", "error": "\(error)"])
        let code = (error as? HTTPDNSError)?.code
        return Self.dnsResponse(
            relay.query, .serverFailure, [], extendedError: code.flatMap(ExtendedDNSError.upstreamFailure))
    }

    /// A relayed answer to a query sent with `subnet`, without the upstream's ECS option (it names the server's
    /// choice of network, not the client's), and the scope it holds for: no option back, every network (RFC 7871
    /// §7.2.1); one for another network, or one that cannot be read, the network sent only. `nil` when the answer
    /// cannot be walked.
    static func scoped(_ answer: [UInt8], askedFor subnet: IPNetwork) -> (answer: [UInt8], scope: Int)? {
        let scope: Int
        switch Result(catching: { () throws(EDNSClientSubnet.Malformed) in try EDNSClientSubnet.find(in: answer) }) {
        case .success(nil): scope = 0
        case .success(.some(let option)) where option.subnet == subnet: scope = min(option.scope, subnet.prefixLength)
        default: scope = subnet.prefixLength
        }
        let questionEnd =
            answer[4] == 0 && answer[5] == 0
            ? 12 : (DNSMessageWalk.skipName(answer, from: 12).map { $0 + 4 } ?? answer.count)
        guard questionEnd <= answer.count,
            let stripped = try? ForwardedQuery.strippingClientSubnet(answer, questionEnd: questionEnd)
        else { return nil }
        return (stripped, scope)
    }
}
