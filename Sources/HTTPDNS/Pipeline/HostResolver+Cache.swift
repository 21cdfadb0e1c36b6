import CoreMetrics
import Logging
import Synchronization
package import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients

extension HostResolver {
    /// What the cache holds for `host`, as the pipeline serves it: an answer (fresh or stale, refreshed and probed in
    /// the background as needed), a cached negative answer, or a miss (nothing usable, or only an answer from an
    /// upstream that is not served now).
    enum CachedAnswer {
        /// `steadyFor`: see ``HostCacheCore/Lookup/hit(_:refresh:probe:steadyFor:)``.
        case answer(RankedResolution, steadyFor: Duration?)
        case negative(HTTPDNSError)
        case miss
    }

    /// The cache's answer for `host`, counted in the metrics. A peek that the full path follows on a miss
    /// (`countsMisses` false: ``cachedRankedSteadily(_:name:family:port:)``) counts only what it answers, so that
    /// each lookup is counted once.
    func cachedAnswer(_ host: HostName, family: AddressFamily, countsMisses: Bool = true) -> CachedAnswer {
        guard let cache else { return .miss }
        // One read of the pipeline for both (a cache hit is the hot path), copying only what is needed.
        let (probing, served) = state.withLock { state in
            (
                state.configuration.probing,
                state.configuration.servesAnswersFromOtherUpstreams ? nil : state.identities
            )
        }
        let probeInterval = probeInterval(probing)
        switch cache.lookup(host, family: family, probeInterval: probeInterval) {
        case .hit(let answer, _, _, _) where served.map({ !$0.contains(answer.upstream ?? "") }) ?? false:
            if countsMisses { metrics.misses.increment() }
            return .miss
        case .negative where served != nil:
            if countsMisses { metrics.misses.increment() }
            return .miss
        case .hit(let answer, let refresh, let probe, let steadyFor):
            if answer.isStale {
                metrics.staleServes.increment()
                logger.debug(
                    "serving a stale answer", metadata: ["host": "\(host)", "staleSeconds": "\(answer.staleSeconds)"])
            } else {
                metrics.hits.increment()
            }
            if refresh { refreshInBackground(host, family: family) }
            if let probe { startProbe(probe) }
            return .answer(answer, steadyFor: steadyFor)
        case .negative(let error):
            if countsMisses { metrics.negativeHits.increment() }
            return .negative(error)
        case .miss:
            if countsMisses { metrics.misses.increment() }
            return .miss
        }
    }

    /// The ranked answer for `text` when it needs no waiting: from the overrides, a literal or `localhost`, the
    /// system hosts file, or the cache (for the first search candidate the cache answers). `nil` when an upstream
    /// must be asked; ``resolveRanked(_:family:port:)`` then does it. Callers on a hot path (the URL protocol, the
    /// AsyncHTTPClient front) try this first and so skip the time limit an upstream lookup needs.
    /// - Throws: `HTTPDNSError` for a name that is not valid.
    /// - Parameter name: `text` parsed already, when the caller has it (the fronts parse a request's host once).
    package func cachedRanked(
        _ text: String, name: Result<HostName, HTTPDNSError>? = nil, family: AddressFamily = .any, port: Int? = nil
    ) throws -> RankedResolution? {
        guard let answer = try cachedRankedSteadily(text, name: name, family: family, port: port)?.answer else {
            return nil
        }
        guard needsAdapting(answer) else { return answer }
        // A NAT64 discovery still to run makes it a miss: the full path waits for it.
        return try adaptedToNetworkIfReady(answer)
    }

    /// ``cachedRanked(_:family:port:)``, and for an answer from the cache how long from now it stays the same
    /// (same TTL in whole seconds, same ranking, no refresh or probe due) unless ``answerGeneration`` changes;
    /// `nil` for answers from other layers and for stale answers. What ``hostsctl serve`` keeps encoded answers by.
    package func cachedRankedSteadily(
        _ text: String, name: Result<HostName, HTTPDNSError>? = nil, family: AddressFamily = .any, port: Int? = nil
    ) throws -> (answer: RankedResolution, steadyFor: Duration?)? {
        // The name is parsed once for every layer (by the caller when it passes it).
        let parsed = name ?? Result { () throws(HTTPDNSError) in try HostName(text) }
        if let overrides, case .success(let name) = parsed,
            let answer = layerAnswer(overrides, name, family: family, port: port)
        {
            return (answer, nil)
        }
        if let local = try LocalAnswers.answer(for: text, name: { try? parsed.get() }, family: family) {
            return (RankedResolution(unscored: local, family: family, freshness: .local), nil)
        }
        let host = try parsed.get()
        if let port, let cache { cache.setProbePort(port, for: host) }
        if let hosts, let answer = layerAnswer(hosts, host, family: family, port: port) { return (answer, nil) }
        // An absolute name is its only candidate (what hostsctl serve asks for every client): no search policy read.
        if text.utf8.last == UInt8(ascii: ".") {
            if case .answer(let answer, let steadyFor) = cachedAnswer(host, family: family, countsMisses: false) {
                return (answer, steadyFor)
            }
            return nil
        }
        let candidates = state.withLock { $0.configuration.search.candidates(for: host, absolute: false) }
        for candidate in candidates {
            switch cachedAnswer(candidate, family: family, countsMisses: false) {
            case .answer(let answer, _): return (answer, nil)
            // The next search candidate may exist; the full path decides (and asks the fallback).
            case .negative: continue
            case .miss: return nil
            }
        }
        return nil
    }

    /// Asks the fallback for the name as given, after every upstream said it does not exist; its answer is cached
    /// under that name. When it fails too, the upstreams' error stands.
    func askFallback(
        _ fallback: Upstream, host: HostName, family: AddressFamily, upstreamError: HTTPDNSError
    ) async throws -> RankedResolution {
        let clock = ContinuousClock()
        return try await flights.run(FlightKey(host: host, family: family, fallback: true)) { [self] in
            let start = clock.now
            let resolution: Resolution
            do {
                resolution = try await fallback.resolver.resolve(host, family: family)
                metrics.recordUpstream(fallback.name, answered: true, duration: clock.now - start)
            } catch let error as CancellationError {
                throw error
            } catch {
                metrics.recordUpstream(fallback.name, answered: error, duration: clock.now - start)
                logger.debug("the fallback has no answer either", metadata: ["host": "\(host)", "error": "\(error)"])
                throw upstreamError
            }
            guard !resolution.addresses.isEmpty else { throw upstreamError }
            if policy.guardsEveryUpstream { try Self.guardAddresses(resolution, from: fallback, host: host) }
            return store(resolution, host: host, family: family, upstream: fallback.identity, merge: false)
        }
    }

    /// The addresses a local layer (overrides, hosts file) gives `host`, ranked by the same scores as upstream
    /// answers (probed when first used, fed back by connects, backing off after failures); their order is all
    /// that changes, never the addresses.
    func layerAnswer(_ layer: HostOverrides, _ host: HostName, family: AddressFamily, port: Int?)
        -> RankedResolution?
    {
        guard let answer = layer.resolve(host, family: family) else { return nil }
        guard let cache else { return RankedResolution(unscored: answer, family: family, freshness: .override) }
        let (ranked, probe) = cache.rankExternal(
            host, family: family, addresses: answer.addresses.map(\.ip), port: port, probeInterval: probeIntervalIfIdle)
        if let probe { startProbe(probe) }
        return RankedResolution(
            host: answer.host, family: family, addresses: ranked, origin: answer.addresses.first?.source ?? .override,
            ttl: answer.addresses.map(\.ttl).min() ?? 0, freshness: .override)
    }
}
