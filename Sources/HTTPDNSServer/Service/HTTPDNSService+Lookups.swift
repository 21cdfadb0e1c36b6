import HTTPDNS
import Logging

/// A lookup's answer: from the client network's kept answers (EDNS Client Subnet), the resolver's cache and local
/// layers at once, or the upstreams.
extension HTTPDNSService {
    /// The pipeline's answer for `lookup` as given (absolute), cut to the answer limit; `noData` is an empty success.
    func lookup(_ lookup: Lookup) async -> LookupResult {
        guard !lookup.name.isEmpty else { return .failure(.refused) }
        do {
            if let subnet = lookup.subnet {
                let key = ClientSubnetCache.Key(name: lookup.name, family: lookup.family)
                switch subnetAnswers.lookup(key, subnet: subnet, now: .now) {
                case .answer(let answer, let scope, let ttl, let prefetch):
                    if prefetch { prefetchInBackground(lookup, subnet: subnet) }
                    return result(answer, lookup, scope: scope, ttl: ttl)
                case .shared(let revalidate):
                    if revalidate { revalidateInBackground(lookup, subnet: subnet) }
                case .miss:
                    do {
                        // With the trailing dot the name is absolute: no search domain is ever tried.
                        let host = try HostName(lookup.name + ".")
                        if let answer = try await subnetLookup(lookup, subnet: subnet, host: host) { return answer }
                    } catch let negative as ScopedNegativeAnswer {
                        throw subnetNegative(negative, lookup)
                    }
                    // No upstream asks for a network: the server's own view is every network's.
                    let ranked = try await resolver.resolveRanked(lookup.name + ".", family: lookup.family)
                    subnetAnswers.keepShared(key, ttl: ranked.ttl, now: .now)
                    return result(ranked, lookup)
                }
            }
            // With the trailing dot the name is absolute: no search domain is ever tried for a client's name.
            return result(try await resolver.resolveRanked(lookup.name + ".", family: lookup.family), lookup)
        } catch {
            return failure(error, lookup)
        }
    }

    /// A negative answer for a client network, kept by the scope the upstream gave: scope 0 is every network's (the
    /// resolver's negative cache answers next), a scoped one says nothing of other networks (an authoritative that
    /// tailors answers may have addresses for them), and a chosen network's is its own. Returns the error to answer.
    func subnetNegative(_ negative: ScopedNegativeAnswer, _ lookup: Lookup) -> HTTPDNSError {
        if negative.scopePrefixLength == 0, !lookup.chosen {
            subnetAnswers.keepShared(.init(name: lookup.name, family: lookup.family), ttl: 30, now: .now)
        }
        return negative.error
    }

    /// What a lookup that failed with `error` answers, for every path (a task's, a server loop's).
    func failure(_ error: any Error, _ lookup: Lookup) -> LookupResult {
        if let negative = error as? ScopedNegativeAnswer { return failure(subnetNegative(negative, lookup), lookup) }
        guard let error = error as? HTTPDNSError else { return .failure(.serverFailure) }
        switch error.code {
        case .noData: return .success(([], 0, 0, false))
        // A name whose answer the private-address guard withheld looks like one that does not exist: the
        // difference would tell outsiders which internal names there are.
        case .notFound: return .failure(.nameError)
        case .privateAddress: return .failure(.withheldByGuard)
        case .badName: return .failure(.refused)
        default:
            logger.debug(
                "lookup failed", metadata: ["host": "\(HostName.printable(lookup.name))", "error": "\(error.code)"])
            return .failure(
                LookupFailure(code: .serverFailure, extendedError: ExtendedDNSError.upstreamFailure(error.code)))
        }
    }

    /// The answer from a local layer or the cache, and how long a cached one stays the same; `nil` when an
    /// upstream must be asked.
    func cachedLookup(_ lookup: Lookup) -> (LookupResult, steadyFor: Duration?)? {
        guard !lookup.name.isEmpty else { return (.failure(.refused), nil) }
        if let subnet = lookup.subnet {
            switch subnetAnswers.lookup(.init(name: lookup.name, family: lookup.family), subnet: subnet, now: .now) {
            case .miss:
                // The overrides and the hosts file answer every network alike, and at once.
                if let host = try? HostName(lookup.name + "."),
                    let local = resolver.localAnswer(host, family: lookup.family)
                {
                    subnetAnswers.keepShared(.init(name: lookup.name, family: lookup.family), ttl: local.ttl, now: .now)
                    metrics.clientSubnet(.shared)
                    return (result(local, lookup), nil)
                }
                metrics.clientSubnet(.miss)
                return nil
            case .answer(let answer, let scope, let ttl, let prefetch):
                metrics.clientSubnet(.hit)
                if prefetch { prefetchInBackground(lookup, subnet: subnet) }
                // Kept by network, so never in an encoded-answer memo keyed by the query alone.
                return (result(answer, lookup, scope: scope, ttl: ttl), nil)
            case .shared(let revalidate):
                metrics.clientSubnet(.shared)
                if revalidate { revalidateInBackground(lookup, subnet: subnet) }
            }
        }
        guard let (ranked, steadyFor) = try? resolver.cachedRankedSteadily(lookup.name + ".", family: lookup.family)
        else { return nil }
        // An answer ordered by what the asking network reported is that network's alone: never kept in the memo.
        if lookup.subnet != nil, networkScores.generation > 0, networkScores.hasScores(lookup.name) {
            return (result(ranked, lookup), nil)
        }
        return (result(ranked, lookup), steadyFor)
    }

    /// `ranked` cut to the lookup's family and limit; `scope` and `ttl` for an answer kept by network.
    func result(_ ranked: RankedResolution, _ lookup: Lookup, scope: Int = 0, ttl: UInt32? = nil)
        -> LookupResult
    {
        let (family, limit) = (lookup.family, lookup.limit)
        var ordered = ranked.addresses
        // The asking network's own reports order its answers (see NetworkScores); no scores at all: nothing to do.
        if let subnet = lookup.subnet, networkScores.generation > 0,
            let theirs = networkScores.order(
                ordered, host: lookup.name, network: Self.steeringNetwork(subnet, configuration.steeringRegions))
        {
            ordered = theirs
        }
        var addresses: [IPAddress] = []
        for address in ordered where address.ip.family == family {
            addresses.append(address.ip)
            if addresses.count == limit { break }
        }
        return .success((addresses, ttl ?? ranked.ttl, scope, ranked.freshness == .stale))
    }
}
