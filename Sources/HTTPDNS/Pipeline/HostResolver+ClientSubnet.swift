import CoreMetrics
package import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients
extension HostResolver {
    /// An answer for a client network: the ranked addresses and the prefix length of the client's network they hold
    /// for (0: every client).
    package struct SubnetAnswer: Sendable {
        /// The answer, ranked by the cache's scores.
        package var answer: RankedResolution
        /// The RFC 7871 scope prefix length.
        package var scope: Int
    }

    struct SubnetFlightKey: Hashable, Sendable {
        var host: HostName
        var family: AddressFamily
        var subnet: IPNetwork
        var sharing: Bool
    }

    /// Resolves `host` (fully qualified: no search domain is tried) for clients in `clientSubnet`, as a server
    /// answering on their behalf asks (EDNS Client Subnet, RFC 7871): the overrides and the hosts file first (their
    /// answers hold for every client, scope 0), then the upstreams that can ask for a client network
    /// (`ClientSubnetResolver`) in order. Callers in the same network share one query. An answer for every
    /// client (scope 0) is stored in the cache as any upstream answer is (so later lookups without a network find
    /// it); a scoped one is not (it holds for the scope only, which the caller keeps by network), and its addresses
    /// are ranked by the scores the cache keeps for them.
    /// `sharing: false` (a network a client chose rather than its own) stores nothing: a scope-0 answer to it is
    /// that client's alone. `countsMiss: false` (a refresh in the background, which no client waits for) leaves the
    /// lookup out of the cache's misses.
    /// - Returns: The answer and its scope, or `nil` when no upstream can ask for a client network (the caller
    ///   then uses ``resolveRanked(_:family:)``, the server's own view).
    /// - Throws: `HTTPDNSError`, or `ScopedNegativeAnswer` (a trusted NXDOMAIN or no-data with its scope), at once;
    ///   otherwise the last upstream's failure.
    package func resolve(
        _ host: HostName, family: AddressFamily, clientSubnet: IPNetwork, sharing: Bool = true, countsMiss: Bool = true
    ) async throws -> SubnetAnswer? {
        if let answer = localAnswer(host, family: family) { return SubnetAnswer(answer: answer, scope: 0) }
        // One read of the pipeline: the upstreams to ask, for the count and for the query.
        let (upstreams, guardEveryUpstream) = state.withLock {
            (Self.subnetUpstreams($0), $0.configuration.guardsEveryUpstream)
        }
        // A lookup for a network is one the shared cache did not answer: counted as its miss, once per lookup as
        // there, unless no upstream can ask for a network (the caller's shared path then counts it).
        if countsMiss, !upstreams.isEmpty { metrics.misses.increment() }
        let key = SubnetFlightKey(host: host, family: family, subnet: clientSubnet, sharing: sharing)
        return try await subnetFlights.run(key) { [self] in
            try await askForSubnet(
                host, family: family, clientSubnet: clientSubnet, sharing: sharing, upstreams: upstreams,
                guardEveryUpstream: guardEveryUpstream)
        }
    }

    /// The answer of the overrides or the hosts file for `host`, which holds for every client; `nil` when neither
    /// names it.
    package func localAnswer(_ host: HostName, family: AddressFamily) -> RankedResolution? {
        for layer in [overrides, hosts] {
            if let layer, let answer = layerAnswer(layer, host, family: family, port: nil) { return answer }
        }
        return nil
    }

    private func askForSubnet(
        _ host: HostName, family: AddressFamily, clientSubnet: IPNetwork, sharing: Bool,
        upstreams: [(Upstream, any ClientSubnetResolver)], guardEveryUpstream: Bool
    ) async throws -> SubnetAnswer? {
        var lastError: (any Error)?
        for (upstream, resolver) in upstreams {
            let started = ContinuousClock.now
            let result = await Result { try await resolver.resolve(host, family: family, clientSubnet: clientSubnet) }
            switch subnetStep(
                result, from: upstream, host: host, family: family, sharing: sharing,
                guardEveryUpstream: guardEveryUpstream, elapsed: ContinuousClock.now - started)
            {
            case .answered(let answer): return answer
            case .failed(let error): throw error
            case .next(let error): lastError = error
            }
        }
        if let lastError { throw lastError }
        return nil
    }

    /// The upstreams asked for a client network, in order: those that can ask for one. Race mode's trust rule holds
    /// here as on the shared path: answers of different trust never mix, and a trusted answer wins. With a trusted
    /// upstream configured, a less trusted one never answers for a network (its answer would be served, and a
    /// scope-0 one stored for everyone, ahead of the trusted answer); when no trusted upstream can ask for a network,
    /// the caller takes the shared path, where the race decides.
    static func subnetUpstreams(_ state: State) -> [(Upstream, any ClientSubnetResolver)] {
        let trustedOnly = state.configuration.race && state.upstreams.contains { $0.isTrusted }
        return state.upstreams.compactMap { upstream in
            guard upstream.isTrusted || !trustedOnly, let resolver = upstream.resolver as? any ClientSubnetResolver
            else { return nil }
            return (upstream, resolver)
        }
    }

    /// What one upstream's answer for a client network comes to.
    enum SubnetStep {
        /// The answer (a scope-0 one stored for everyone when shared).
        case answered(SubnetAnswer)
        /// The lookup fails with this at once (a trusted negative answer, the guard, a cancellation).
        case failed(any Error)
        /// This upstream failed: the next one is asked (this is the error if none is left).
        case next(any Error)
    }

    /// One upstream's outcome `result` for a client network, decided as every path decides it (a task's, a server
    /// loop's): the private-address guard; a scope-0 answer stored in the cache as any upstream answer (unless not
    /// `sharing`: a chosen network's answer is its own), a scoped one ranked by the cache's scores and not stored; a
    /// negative answer final when the upstream's negatives are trusted. The query, which took `elapsed`, is counted
    /// in the upstream's metrics as the shared path counts its own.
    func subnetStep(
        _ result: Result<ScopedResolution, any Error>, from upstream: Upstream, host: HostName, family: AddressFamily,
        sharing: Bool, guardEveryUpstream: Bool, elapsed: Duration
    ) -> SubnetStep {
        switch result {
        case .success: metrics.recordUpstream(upstream.name, answered: true, duration: elapsed)
        case .failure(let error) where error is CancellationError: break
        case .failure(let error): metrics.recordUpstream(upstream.name, answered: error, duration: elapsed)
        }
        do {
            let scoped = try result.get()
            if guardEveryUpstream { try Self.guardAddresses(scoped.resolution, from: upstream, host: host) }
            guard scoped.scopePrefixLength > 0 else {
                guard sharing else {
                    return .answered(
                        SubnetAnswer(
                            answer: ranked(scoped.resolution, host: host, family: family, upstream: upstream), scope: 0)
                    )
                }
                let stored = store(
                    scoped.resolution, host: host, family: family, upstream: upstream.identity, merge: false)
                return .answered(SubnetAnswer(answer: stored, scope: 0))
            }
            return .answered(
                SubnetAnswer(
                    answer: ranked(scoped.resolution, host: host, family: family, upstream: upstream),
                    scope: scoped.scopePrefixLength))
        } catch let negative as ScopedNegativeAnswer {
            return upstream.negativeAnswersAreAuthoritative ? .failed(negative) : .next(negative.error)
        } catch let error as HTTPDNSError where error.code.isNegativeAnswer {
            // A vendor API's empty answer may be throttling: the next upstream is asked.
            return upstream.negativeAnswersAreAuthoritative ? .failed(error) : .next(error)
        } catch let error as CancellationError {
            return .failed(error)
        } catch {
            return .next(error)
        }
    }

    /// An upstream's answer ranked by the cache's scores for its addresses (unscored without a cache).
    private func ranked(_ resolution: Resolution, host: HostName, family: AddressFamily, upstream: Upstream)
        -> RankedResolution
    {
        let ttl = resolution.addresses.map(\.ttl).min() ?? 0
        guard let cache else {
            var answer = RankedResolution(unscored: resolution, family: family, freshness: .upstream)
            answer.upstream = upstream.identity
            return answer
        }
        let (addresses, _) = cache.rankExternal(
            host, family: family, addresses: resolution.addresses.map(\.ip), port: nil, probeInterval: nil)
        return RankedResolution(
            host: resolution.host, family: family, addresses: addresses,
            origin: resolution.addresses.first?.source ?? ResolutionSource(upstream.name), ttl: ttl,
            freshness: .upstream, upstream: upstream.identity)
    }
}
