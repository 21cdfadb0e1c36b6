import CoreMetrics
import Logging
import Synchronization
import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients

/// Asking the upstreams: in order or raced, refreshes in the background, what is stored in the cache.
extension HostResolver {
    func refreshInBackground(_ host: HostName, family: AddressFamily) {
        guard !upstreams.isEmpty else { return }
        // At most the configured refreshes a second (a token bucket with a burst of one second's worth).
        let perSecond = Double(cache?.configuration.maximumRefreshesPerSecond ?? Int.max)
        let now = ContinuousClock.now
        let admitted = state.withLock { $0.admissions.admitRefresh(at: now, perSecond: perSecond) }
        guard admitted else {
            metrics.refreshesPostponed.increment()
            cache?.refreshFailed(host, family: family)
            return
        }
        let started = flights.launchIfIdle(FlightKey(host: host, family: family)) { [self] in
            try await fetch(host, family: family, isRefresh: true)
        }
        if started { metrics.refreshesStarted.increment() } else { cache?.refreshFailed(host, family: family) }
    }

    /// Asks the upstreams, stores the outcome and returns the answer (or, when they fail, a stale one).
    func fetch(_ host: HostName, family: AddressFamily, isRefresh: Bool, probePort: Int? = nil) async throws
        -> RankedResolution
    {
        let asked: Result<RankedResolution, any Error>
        do {
            let (upstreams, race, guardAll) = state.withLock {
                ($0.upstreams, $0.configuration.race, $0.configuration.guardsEveryUpstream)
            }
            if race, let groups = Self.raceGroups(upstreams) {
                asked = .success(
                    try await self.race(groups, host: host, family: family, guardEveryUpstream: guardAll))
            } else {
                let (resolution, upstream) = try await Self.askInOrder(
                    upstreams, host: host, family: family, guardEveryUpstream: guardAll, metrics: metrics)
                asked = .success(
                    store(resolution, host: host, family: family, upstream: upstream.identity, merge: false))
            }
        } catch {
            asked = .failure(error)
        }
        return try settle(asked, host: host, family: family, isRefresh: isRefresh, probePort: probePort)
    }

    /// What a lookup's upstream outcome comes to, for every path that asks (a task's, a server loop's): an answer
    /// already stored starts a probe round when one is due; a failure stores a trusted negative answer, or serves
    /// the cached answer (stale included) when every upstream failed, or is thrown.
    func settle(
        _ asked: Result<RankedResolution, any Error>, host: HostName, family: AddressFamily, isRefresh: Bool,
        probePort: Int?
    ) throws -> RankedResolution {
        do {
            let answer = try asked.get()
            if let probePort, let cache { cache.setProbePort(probePort, for: host) }
            if let cache, let probing = probeIntervalIfIdle, let probe = cache.claimProbe(host, interval: probing) {
                startProbe(probe)
            }
            return answer
        } catch let error as HTTPDNSError where error.code == .privateAddress {
            throw error
        } catch {
            let failure = UpstreamFailure.wrapping(error)
            guard let error = failure.error as? HTTPDNSError else { throw failure.error }
            if failure.negative != nil, failure.authoritative, failure.everyUpstreamDenied {
                // The name is gone (or has no address of the family): that replaces whatever was cached.
                cache?.storeNegative(host, family: family, error: error)
                throw error
            }
            // A negative answer while another upstream failed, or one from an upstream whose negatives are not
            // trusted, never destroys a good answer: the cached one is served as when every upstream fails.
            if isRefresh {
                // Callers were already served the stale answer; it stays in the cache.
                cache?.refreshFailed(host, family: family)
                logger.info("background refresh failed", metadata: ["host": "\(host)", "error": "\(error.code)"])
                throw error
            }
            if let fallback = cache?.fallback(host, family: family),
                servedUpstreams.map({ $0.contains(fallback.upstream ?? "") }) ?? true
            {
                // Counted as a miss already (the lookup went upstream): a stale fallback, not another lookup.
                metrics.staleFallbacks.increment()
                logger.notice(
                    "every upstream failed; serving the cached answer",
                    metadata: ["host": "\(host)", "error": "\(error.code)", "stale": "\(fallback.isStale)"]
                )
                return fallback
            }
            if failure.negative != nil, failure.authoritative {
                cache?.storeNegative(host, family: family, error: error)
            }
            throw error
        }
    }

    /// Stores a positive resolution from `upstream` (an identity) in the cache (or ranks it as it is without one).
    func store(
        _ resolution: Resolution, host: HostName, family: AddressFamily, upstream: String, merge: Bool
    ) -> RankedResolution {
        let ttl = resolution.addresses.map(\.ttl).min() ?? 0
        let origin = resolution.addresses.first?.source ?? "unknown"
        guard let cache,
            let stored = cache.store(
                host, family: family, addresses: resolution.addresses.map(\.ip), ttl: ttl, origin: origin,
                upstream: upstream,
                merge: merge)
        else {
            var unscored = RankedResolution(unscored: resolution, family: family, freshness: .upstream)
            unscored.upstream = upstream
            return unscored
        }
        return stored
    }

    /// Asks each upstream in turn; the first answer wins. An answer the private-address guard rejects ends the
    /// lookup: it is the sign of a rebinding or hijack attempt, which the next upstream's answer must not paper
    /// over. When all fail: NXDOMAIN if any said so, else no data if any said so, else the first error.
    static func askInOrder(
        _ upstreams: [Upstream],
        host: HostName,
        family: AddressFamily,
        guardEveryUpstream: Bool,
        metrics: ResolverMetrics
    ) async throws -> (Resolution, Upstream) {
        var errors: [(any Error, Upstream)] = []
        let clock = ContinuousClock()
        for upstream in upstreams {
            let start = clock.now
            let result = await Result { try await upstream.resolver.resolve(host, family: family) }
            do {
                let resolution = try accepted(
                    result, from: upstream, host: host, guardEveryUpstream: guardEveryUpstream,
                    elapsed: clock.now - start, metrics: metrics)
                return (resolution, upstream)
            } catch let error as CancellationError {
                throw error
            } catch let error as HTTPDNSError where error.code == .privateAddress {
                throw error
            } catch {
                errors.append((error, upstream))
            }
        }
        guard !errors.isEmpty else {
            throw HTTPDNSError(code: .invalidConfiguration, message: "no upstream is configured", host: host.name)
        }
        throw failure(of: errors)
    }

    /// One upstream's outcome `result`, checked as every path checks it: timed in the metrics, an empty answer
    /// made no data, the private-address guard applied when `guardEveryUpstream` (every upstream, HTTP DNS too: a
    /// provider allowed private answers, `allowPrivateAnswers`, for an internal provider an application asks, is
    /// still guarded when the pipeline serves others). A cancellation is thrown as it is, uncounted.
    static func accepted(
        _ result: Result<Resolution, any Error>, from upstream: Upstream, host: HostName, guardEveryUpstream: Bool,
        elapsed: Duration, metrics: ResolverMetrics
    ) throws -> Resolution {
        let resolution: Resolution
        do {
            resolution = try result.get()
        } catch let error as CancellationError {
            throw error
        } catch {
            metrics.recordUpstream(upstream.name, answered: error, duration: elapsed)
            throw error
        }
        // The upstream answered, whatever the guard makes of it: counted once.
        metrics.recordUpstream(upstream.name, answered: true, duration: elapsed)
        guard !resolution.addresses.isEmpty else {
            throw HTTPDNSError(code: .noData, message: "\(upstream.name) returned no addresses", host: host.name)
        }
        if guardEveryUpstream { try Self.guardAddresses(resolution, from: upstream, host: host) }
        return resolution
    }

    /// The failure of a lookup whose upstreams all failed with `errors`, in the order they were asked (see
    /// ``UpstreamFailure/choosing(_:)``).
    static func failure(of errors: [(any Error, Upstream)]) -> UpstreamFailure {
        UpstreamFailure.choosing(
            errors.map { UpstreamFailure.single($0.0, trustsNegativeAnswers: $0.1.negativeAnswersAreAuthoritative) })
    }

    /// The guard for upstreams other than HTTP DNS (which guard their own answers, per provider).
    static func guardAddresses(_ resolution: Resolution, from upstream: Upstream, host: HostName) throws(HTTPDNSError) {
        guard let bad = resolution.addresses.first(where: { $0.ip.isNonPublic }) else { return }
        throw HTTPDNSError(
            code: .privateAddress,
            message:
                "\(upstream.name) answered with the \(bad.ip.scope) address \(bad.ip); rejected by the private-address guard",
            host: host.name)
    }

    /// HTTP DNS upstreams and the others as two groups, when both exist.
    static func raceGroups(_ upstreams: [Upstream]) -> [[Upstream]]? {
        let httpDNS = upstreams.filter { $0.kind == .httpDNS }
        let others = upstreams.filter { $0.kind != .httpDNS }
        return httpDNS.isEmpty || others.isEmpty ? nil : [httpDNS, others]
    }

    /// Runs the groups at once; the first success is stored and returned, later successes are merged into the
    /// cache when as trusted, replace it when more trusted and are dropped when less (``RaceOutcome``), and the error is thrown only when every group failed, or at once when the guard rejects an answer
    /// before any group succeeded (an answer the guard rejects is never stored or merged). ``RaceOutcome`` decides;
    /// the groups keep running after the decision so their answers still reach the cache.
    func race(
        _ groups: [[Upstream]], host: HostName, family: AddressFamily, guardEveryUpstream: Bool
    ) async throws -> RankedResolution {
        let (decisions, decide) = AsyncStream<Result<RankedResolution, any Error>>.makeStream()
        let outcome = Locked(RaceOutcome(groups: groups.count))
        for group in groups {
            let started = tasks.spawn { [self] in
                let result = await Result {
                    try await Self.askInOrder(
                        group, host: host, family: family, guardEveryUpstream: guardEveryUpstream, metrics: metrics)
                }
                // Decided and stored under the race's lock, so the winner replaces and later answers merge.
                let decision: Result<RankedResolution, any Error>? = outcome.withLock { race in
                    switch result {
                    case .success(let (resolution, upstream)):
                        let step = race.succeeded(trusted: upstream.isTrusted)
                        if case .discard = step {
                            logger.debug(
                                "race: a less trusted answer after the winner is not merged",
                                metadata: ["host": "\(host)", "upstream": "\(upstream.name)"])
                            return nil
                        }
                        let merge = if case .merge = step { true } else { false }
                        let answer = store(
                            resolution, host: host, family: family, upstream: upstream.identity, merge: merge)
                        return if case .win = step { .success(answer) } else { nil }
                    case .failure(let error):
                        if case .fail(let thrown) = race.failed(error) { return .failure(thrown) }
                        return nil
                    }
                }
                if let decision { decide.yield(decision) }
            }
            if !started {
                decide.yield(
                    .failure(HTTPDNSError(code: .shutdown, message: "the resolver is shut down", host: host.name)))
                break
            }
        }
        for await decision in decisions { return try decision.get() }
        throw CancellationError()
    }

    /// Runs `work` (closing replaced upstreams) after `delay`, or at once when the resolver shuts down.
    func retire(_ work: [@Sendable () async -> Void], after delay: Duration) {
        let started = maintenance.spawn {
            try? await Task.sleep(for: delay)
            for item in work { await item() }
        }
        if !started { Task { for item in work { await item() } } }
    }

    /// Background tasks running now (refreshes, probes, shared lookups): a diagnostic that must stay bounded.
    package var backgroundTaskCount: Int { tasks.count }

    /// Callers waiting on shared upstream queries (for tests).
    var waitingCallers: Int { flights.waiting }
}
