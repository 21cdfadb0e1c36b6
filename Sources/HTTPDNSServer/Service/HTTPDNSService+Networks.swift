import Foundation
package import HTTPDNS
import Logging

/// The client's network: who the client is behind a trusted proxy, the subnet sent upstream (EDNS Client Subnet)
/// and the answers kept for it, and what each network reported (kept, persisted, and used to order its answers).
extension HTTPDNSService {
    /// Writes what each client network reported (see `NetworkScores`) to `path`, replacing it atomically.
    /// - Throws: `HTTPDNSError.Code.fileError` when the file cannot be written.
    package func saveNetworkScores(to path: String) throws(HTTPDNSError) {
        let snapshot = networkScores.snapshot(at: CacheClock.system.moment())
        do {
            let data = try JSONEncoder().encode(snapshot)
            try data.write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw HTTPDNSError(
                code: .fileError, message: "cannot write \(path): \(error.localizedDescription)", host: "")
        }
    }

    /// Takes back what ``saveNetworkScores(to:)`` wrote; a missing file is nothing to load, an unreadable one is
    /// logged and ignored.
    package func loadNetworkScores(from path: String) {
        // A file far larger than the bounded table can write (a few MiB) is not read at all.
        let attributes = try? FileManager.default.attributesOfItem(atPath: path)
        let size = (attributes?[.size] as? NSNumber)?.intValue ?? (attributes?[.size] as? Int) ?? 0
        guard size <= 64 << 20, let data = FileManager.default.contents(atPath: path) else {
            if size > 64 << 20 {
                logger.warning(
                    "the network scores file is too large; starting without it", metadata: ["path": "\(path)"])
            }
            return
        }
        guard let snapshot = try? JSONDecoder().decode(NetworkScores.Snapshot.self, from: data) else {
            logger.warning("the network scores file cannot be read; starting without it", metadata: ["path": "\(path)"])
            return
        }
        let taken = networkScores.restore(snapshot, at: CacheClock.system.moment())
        metrics.networkScoreTable(networkScores.size)
        logger.debug("network scores loaded", metadata: ["path": "\(path)", "measurements": "\(taken)"])
    }

    /// For a request from a trusted proxy that names the client in the configured header
    /// (`serve.trustedProxies.header`; the other header is never read), makes that client the request's: the last
    /// address of the header that is not a trusted proxy itself (the ones before it were written by whoever sent
    /// the request, and cannot be believed). A header that cannot be read, or names only proxies, leaves the proxy
    /// as the client.
    func takeForwardedClient(_ request: inout ServiceRequest) {
        guard request.forwarded != nil || request.forwardedFor != nil, let proxy = request.client else { return }
        let configuration = self.configuration
        let trusted = configuration.trustedProxies
        guard trusted.contains(where: { $0.contains(proxy) }) else { return }
        let hops: [IPAddress?]
        switch configuration.trustedProxyHeader {
        case .xForwardedFor:
            guard let value = request.forwardedFor else { return }
            hops = ForwardedHeader.xForwardedFor(value)
        case .forwarded:
            guard let value = request.forwarded else { return }
            hops = ForwardedHeader.rfc7239(value)
        }
        for hop in hops.reversed() {
            guard let hop else { return }
            if !trusted.contains(where: { $0.contains(hop) }) {
                request.client = hop
                return
            }
        }
    }

    // MARK: - Client networks (EDNS Client Subnet)

    /// The network `lookup` is answered for: what `stated` says (the client's ECS option, `ip=`,
    /// `edns_client_subnet=`) when the configuration uses it, else the client's address; cut to the configured
    /// prefix and never longer than stated. `nil` when the mode is off, there is no address, or the client stated a
    /// /0 (it asked that its network not be used).
    func clientSubnet(stated: IPNetwork?, client: IPAddress?, _ configuration: Configuration) -> IPNetwork? {
        clientNetwork(stated: stated, client: client, configuration).subnet
    }

    /// As ``clientSubnet(stated:client:_:)``, and whether the network is *chosen*: stated by a client that is not
    /// in it, or wider than the configured prefix (RFC 7871 §11.3). A chosen network's answers serve that statement
    /// only: none of them, scope 0 included, is kept for other networks or marks a name the same for everyone, so a
    /// client cannot choose what another network is answered. A stated network that is not global (private,
    /// loopback, documentation and the other guarded ranges) is never sent upstream: the client's own address
    /// stands in for it.
    func clientNetwork(stated: IPNetwork?, client: IPAddress?, _ configuration: Configuration)
        -> (subnet: IPNetwork?, chosen: Bool)
    {
        let network: IPNetwork
        var chosen = false
        let prefixes = configuration.clientSubnetPrefixes
        switch configuration.clientSubnetMode {
        case .off:
            return (nil, false)
        case .on where stated != nil && !stated!.address.isNonPublic:
            network = stated!
            guard network.prefixLength > 0 else { return (nil, false) }
            let configured = network.address.family == .ipv4 ? prefixes.ipv4 : prefixes.ipv6
            chosen = network.prefixLength < configured || !(client.map { network.contains($0) } ?? false)
        case .on where stated != nil && stated!.prefixLength == 0:
            return (nil, false)
        default:
            guard let client else { return (nil, false) }
            network = IPNetwork(client, prefixLength: 128)
        }
        let subnet = network.truncated(to: network.address.family == .ipv4 ? prefixes.ipv4 : prefixes.ipv6)
        return (subnet, chosen)
    }

    /// Asks the upstreams for `lookup` on behalf of its network and keeps what they say: an answer for every
    /// network marks the name as shared (the resolver's cache then answers everyone), a scoped one is kept for the
    /// network it holds for. `nil` when no upstream can ask for a network (the caller asks as the server).
    func subnetLookup(_ lookup: Lookup, subnet: IPNetwork, host: HostName, background: Bool = false) async throws
        -> LookupResult?
    {
        guard
            let answer = try await resolver.resolve(
                host, family: lookup.family, clientSubnet: subnet, sharing: !lookup.chosen, countsMiss: !background)
        else {
            return nil
        }
        return keep(answer, lookup, subnet: subnet)
    }

    /// Keeps the upstreams' answer for `lookup`'s network and returns what it answers, for every path (a task's, a
    /// server loop's): a scope-0 answer marks the name as shared, a scoped one is kept for the network it holds
    /// for.
    func keep(_ answer: HostResolver.SubnetAnswer, _ lookup: Lookup, subnet: IPNetwork) -> LookupResult {
        var answer = answer
        let key = ClientSubnetCache.Key(name: lookup.name, family: lookup.family)
        let now = ContinuousClock.now
        // A chosen network (see `clientNetwork`) speaks for that client alone: its answer is kept only for askers
        // stating the same network, and a scope-0 answer to it neither marks the name the same for everyone nor
        // reaches the shared cache (which would replace every network's own answers).
        let chosen = lookup.chosen ? subnet : nil
        // The cache's lower TTL bound holds for answers kept by network too (a TTL of 0 or 1 from an authoritative
        // that tailors answers would otherwise send every query of the network upstream).
        if let minimum = resolver.cache?.configuration.minimumTTL, answer.answer.ttl < minimum {
            answer.answer.ttl = minimum
        }
        guard answer.scope > 0 else {
            if chosen == nil { subnetAnswers.keepShared(key, ttl: answer.answer.ttl, now: now) }
            return result(answer.answer, lookup)
        }
        subnetAnswers.keep(
            key, network: subnet.truncated(to: answer.scope), chosen: chosen, answer: answer.answer, now: now)
        metrics.subnetTable(subnetAnswers.size)
        return result(answer.answer, lookup, scope: min(answer.scope, subnet.prefixLength))
    }

    /// The unit a client's reports and ordering go by: the operator's region that holds its network, else the
    /// network itself.
    static func steeringNetwork(_ subnet: IPNetwork, _ regions: [IPNetwork]) -> IPNetwork {
        regions.first { $0.contains(subnet.address) } ?? subnet
    }

    /// Asks again for a network's answer that is about to expire, so that its clients never wait for the upstream.
    /// The prefetch takes a lookup place of that network like a client's miss (none free: it is not made, and the
    /// next miss asks): a network whose answers all near their end at once cannot send more upstream than its share.
    /// It is counted in the unverified share: whoever asked may have stated the network, or forged its source.
    func prefetchInBackground(_ lookup: Lookup, subnet: IPNetwork) {
        guard let host = try? HostName(lookup.name + ".") else { return }
        let configuration = self.configuration
        guard
            let ticket = upstreamBudget.admit(
                subnet.address, unverified: true, kind: .lookup,
                bounds: .init(
                    total: configuration.maximumUpstreamLookups,
                    perNetwork: configuration.maximumUpstreamLookupsPerNetwork),
                prefixes: configuration.clientPrefixes)
        else { return }
        metrics.clientSubnet(.prefetch)
        Task { [self] in
            _ = try? await subnetLookup(lookup, subnet: subnet, host: host, background: true)
            releaseUpstream(ticket)
        }
    }

    /// Checks again, without holding up the client served the shared answer, whether a name is still the same for
    /// every network.
    func revalidateInBackground(_ lookup: Lookup, subnet: IPNetwork) {
        let key = ClientSubnetCache.Key(name: lookup.name, family: lookup.family)
        guard let host = try? HostName(lookup.name + ".") else { return subnetAnswers.revalidationFailed(key) }
        Task { [self] in
            do {
                if try await subnetLookup(lookup, subnet: subnet, host: host, background: true) == nil {
                    subnetAnswers.revalidationFailed(key)
                }
            } catch {
                subnetAnswers.revalidationFailed(key)
            }
        }
    }

    // MARK: - Client reports

    /// How far ahead a report signature's expiry may be, in seconds.
    static let reportSignatureWindow: Int64 = 60

    /// A client's measurement, `{"host": NAME, "ip": ADDRESS, "connectMs": N}` or `{"host": …, "ip": …,
    /// "failed": true}`, for an address the server currently answers for that host (any other address is refused,
    /// so a client cannot plant addresses or scores for names it was not given). It is taken only from
    /// ``Configuration-swift.struct/reportNetworks`` or signed for an account (`?account=A&t=EXPIRY&s=SIGNATURE`,
    /// ``ReportSignature``: bound to the body and the account, at most ``reportSignatureWindow`` ahead, taken once),
    /// and reaches the shared scores only through ``ReportAggregator``, counted by the reporter's steering unit.
    func report(_ body: [UInt8], query: [String: String], client: IPAddress?) -> ServiceResponse {
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
            let name = object["host"] as? String, let host = try? HostName(name),
            let address = (object["ip"] as? String).flatMap({ IPAddress($0) })
        else {
            return .text(400, "a report is {\"host\": NAME, \"ip\": ADDRESS, \"connectMs\": N or \"failed\": true}")
        }
        let configuration = self.configuration
        let trusted = client.map { client in configuration.reportNetworks.contains { $0.contains(client) } } ?? false
        if !trusted {
            guard let account = query["account"], case .some(.some(let secret)) = configuration.accounts[account],
                reportSignatureValid(account: account, secret: secret, query: query, body: body)
            else { return .text(403, "a report must come from a trusted network or be signed for an account") }
        }
        let connect: Duration?
        if object["failed"] as? Bool == true {
            connect = nil
        } else if let milliseconds = object["connectMs"] as? Double, milliseconds.isFinite, milliseconds >= 0,
            milliseconds <= 60_000
        {
            connect = .seconds(fractional: milliseconds / 1000)
        } else {
            return .text(400, "connectMs must be a number of milliseconds from 0 to 60000")
        }
        // The client's network as its answers are made for (EDNS Client Subnet): answers kept for that network
        // count as answered, and its reports order its own answers.
        let subnet = clientSubnet(stated: nil, client: client, configuration)
        let known =
            (try? resolver.cachedRanked(host.name + ".", family: address.family))?.addresses
            .contains { $0.ip == address } ?? false
        let knownForNetwork =
            subnet.map {
                subnetAnswers.answered(.init(name: host.name, family: address.family), subnet: $0, address: address)
            } ?? false
        guard known || knownForNetwork else {
            return .text(404, "the server has not answered \(address) for \(host.name)")
        }
        if let subnet {
            networkScores.record(
                host: host.name, network: Self.steeringNetwork(subnet, configuration.steeringRegions), address: address,
                connect: connect)
            metrics.networkScoreTable(networkScores.size)
        }
        let network = Self.reportingUnit(client, configuration)
        switch reports.record(host: host.name, address: address, network: network, connect: connect) {
        case .connect(let median): resolver.reportConnect(to: address, of: host, latency: median)
        case .failure: resolver.reportFailure(to: address, of: host)
        case nil: break
        }
        return ServiceResponse(status: 204, contentType: "text/plain; charset=utf-8", body: [])
    }

    /// Whether `query` carries a valid, unused report signature of `body` for `account` (see ``ReportSignature``).
    func reportSignatureValid(account: String, secret: HTTPDNSSecret, query: [String: String], body: [UInt8]) -> Bool {
        guard let expiry = query["t"].flatMap({ Int64($0) }), let signature = query["s"] else { return false }
        let expected = ReportSignature.sign(account: account, expiry: expiry, body: body, secret: secret.value)
        guard Self.constantTimeEqual(Array(signature.lowercased().utf8), Array(expected.utf8)) else { return false }
        let now = now()
        guard expiry >= now, expiry - now <= Self.reportSignatureWindow else { return false }
        return reportReplays.first(expected, expiry: expiry, now: now)
    }

    /// What a report counts as towards the quorum of networks: the operator's steering region that holds the client,
    /// else its /24 or /56 (`serve.ecs.prefixV4`/`V6`), so that a few addresses of one network make one voice, not
    /// a quorum.
    static func reportingUnit(_ client: IPAddress?, _ configuration: Configuration) -> ClientNetwork {
        guard let client else { return .shared }
        let prefixes = configuration.clientSubnetPrefixes
        let own = IPNetwork(client, prefixLength: 128).truncated(
            to: client.bytes.count == 4 ? prefixes.ipv4 : prefixes.ipv6)
        let unit = steeringNetwork(own, configuration.steeringRegions)
        return ClientNetwork(unit.address, prefixes: ClientPrefixes(ipv4: unit.prefixLength, ipv6: unit.prefixLength))
    }
}
