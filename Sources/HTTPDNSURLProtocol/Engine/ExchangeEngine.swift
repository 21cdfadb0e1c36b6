import CoreMetrics
import HTTPDNS
import Logging
import NIOCore
import Tracing
import HTTPDNSPinnedClients
import HTTPDNSCore

/// The part of a hop that both fronts share (``HTTPDNSInterceptor`` for URLSession, ``HTTPDNSClient`` for
/// AsyncHTTPClient): resolve the host to ranked candidates, race connects when the best one has not proven itself,
/// try the candidates in turn with the failover rules, and feed every outcome back to the scores.
///
/// A front brings the request in its own types and one closure that sends it to a given address through the shared
/// ``PinnedTransport``; the engine never sees the request itself.
struct ExchangeEngine: Sendable {
    /// Where a hop may go: the ranked addresses to try in order, or `[nil]` when the host is not resolved here (the
    /// client then resolves it itself).
    struct Candidates: Sendable {
        var addresses: [IPAddress?]
        /// The resolved name, for score feedback; `nil` when nothing was resolved.
        var name: HostName?
        /// The connection a race established to the first address, for the first attempt to send on (instead of
        /// dialling the address again); closed after the attempts when nothing took it.
        var connection: DialedConnection? = nil
    }

    let resolver: HostResolver
    let transport: PinnedTransport
    let prober: any ConnectProber
    let logger: Logger
    let metrics: InterceptionMetrics
    let eventLoopGroup: any EventLoopGroup

    /// An engine whose pinned clients, limited by `policy`, come from the resolver's pool (shared with its HTTP DNS
    /// upstreams), or from a pool of its own when `eventLoopGroup` is not the pool's.
    /// - Throws: `HTTPDNSError.Code.invalidConfiguration` for an unreadable trust-root file or a limit that
    ///   is not positive.
    init(
        resolver: HostResolver, policy: ConnectionPolicy, eventLoopGroup: any EventLoopGroup,
        logger: Logger,
        metricsFactory: (any MetricsFactory)?
    ) throws(HTTPDNSError) {
        guard policy.maximumRedirects >= 0, policy.maximumFailovers >= 0 else {
            throw HTTPDNSError(
                code: .invalidConfiguration, message: "redirect and failover limits must not be negative")
        }
        self.resolver = resolver
        self.transport = try PinnedTransport(
            policy: policy, sharedPool: resolver.clientPool, eventLoopGroup: eventLoopGroup, logger: logger)
        self.prober = TCPConnectProber(group: eventLoopGroup)
        self.logger = logger
        self.metrics = InterceptionMetrics(factory: metricsFactory ?? MetricsSystem.factory)
        self.eventLoopGroup = eventLoopGroup
    }

    /// Resolves `host` when `resolve` is set and the scope takes it, and orders the candidates (a connection race may
    /// move its winner first). Records the freshness, the resolution time and the race in `hop`.
    /// - Throws: `HTTPDNSError` with `timeout` when resolution outlasts `budget`, `resolutionFailed`, or
    ///   `cancelled`.
    func candidates(
        _ target: HopTarget, url: String, resolve: Bool, policy: ConnectionPolicy, budget: Duration,
        deadline: NIODeadline, spans: HopSpans,
        hop: inout RequestTrace.Hop
    ) async throws(HTTPDNSError) -> Candidates {
        let resolveStart = ContinuousClock.now
        // The target was read from the URL once, for the scope check, the cache lookup and the score feedback (only
        // URLProtocol.canInit checks the scope on its own, earlier, from the URL).
        let (host, port, name) = (target.host, target.port, try? target.name.get())
        guard resolve, policy.scope.intercepts(target, overrides: resolver.overrides) else {
            hop.resolveTime = ContinuousClock.now - resolveStart
            return Candidates(addresses: [nil], name: nil)
        }
        let resolveSpan = spans.child("httpdns.resolve")
        let ranked: RankedResolution
        do {
            ranked = try await resolved(host, parsed: target.name, port: port, url: url, budget: budget)
            HopSpans.endResolve(resolveSpan, ranked, error: nil)
        } catch {
            HopSpans.endResolve(resolveSpan, nil, error: error)
            throw error
        }
        guard !ranked.addresses.isEmpty else {
            throw HTTPDNSError(code: .resolutionFailed, message: "\(host) has no address", url: url)
        }
        hop.freshness = ranked.freshness
        hop.resolveTime = ContinuousClock.now - resolveStart
        var ordered = Array(ranked.addresses.prefix(1 + policy.maximumFailovers))
        var connection: DialedConnection?
        if let name,
            let (winner, won) = await raceIfUnproven(
                ordered, of: name, port: port, policy: policy, deadline: deadline, spans: spans)
        {
            if let index = ordered.firstIndex(where: { $0.ip == winner }) {
                hop.raced = true
                ordered.insert(ordered.remove(at: index), at: 0)
                connection = won
            } else {
                won?.close()
            }
        }
        return Candidates(addresses: ordered.map(\.ip), name: name, connection: connection)
    }

    /// The ranked answer for `host`: from the overrides or the cache without waiting, else through the pipeline
    /// within `budget`.
    private func resolved(
        _ host: String, parsed: Result<HostName, HTTPDNSError>, port: Int, url: String, budget: Duration
    ) async throws(HTTPDNSError) -> RankedResolution {
        let resolver = self.resolver
        func failed(_ error: HTTPDNSError) -> HTTPDNSError {
            HTTPDNSError(
                code: .resolutionFailed, message: "cannot resolve \(host): \(error.message)", url: url, source: error)
        }
        // Overrides and cache hits need no waiting, so no time limit (a task and a timer) either.
        do {
            if let cached = try resolver.cachedRanked(host, name: parsed, family: .any, port: port) { return cached }
        } catch let error as HTTPDNSError {
            throw failed(error)
        } catch {
            throw HTTPDNSError(code: .cancelled, message: "the request was cancelled", url: url)
        }
        let outlasted = HTTPDNSError(
            code: .timeout, message: "resolving \(host) took longer than the request's time limit (\(budget))", url: url
        )
        do {
            return try await withTimeLimit(budget, orThrow: outlasted) {
                try await resolver.resolveRanked(host, family: .any, port: port)
            }
        } catch let error as HTTPDNSError where error == outlasted {
            throw error
        } catch let error as HTTPDNSError {
            throw failed(error)
        } catch {
            throw HTTPDNSError(code: .cancelled, message: "the request was cancelled", url: url)
        }
    }

    /// Sends through `send` to each candidate in turn until one answers: a failure before anything was sent moves on
    /// to the next address, one after sending only for idempotent methods, anything else (a certificate
    /// rejection, the deadline) ends the hop. The time to the answer's head goes back to the scores as a time to first
    /// byte, failures as failures. Records the address, the failed attempts and the time in `hop`.
    /// - Parameter send: Sends the request pinned to an address (`nil`: unpinned), on the race's connection to it when
    ///   one is given, and returns the answer with the time to its head; its errors are classified by
    ///   ``PinnedTransport/classify(_:)``.
    func attempt<Answer: Sendable>(
        _ candidates: Candidates, method: String, url: String, deadline: NIODeadline, spans: HopSpans,
        hop: inout RequestTrace.Hop,
        send: (IPAddress?, DialedConnection?) async throws -> (answer: Answer, headLatency: Duration)
    ) async throws(HTTPDNSError) -> Answer {
        // A race's connection that no attempt took (or that the request could not use) does not stay open.
        defer { candidates.connection?.close() }
        guard NIODeadline.now() < deadline else {
            throw HTTPDNSError(
                code: .timeout, message: "the request's time limit ran out before connecting", url: url)
        }
        let sendStart = ContinuousClock.now
        let addresses = candidates.addresses
        for (index, candidate) in addresses.enumerated() {
            let attemptStart = ContinuousClock.now
            let attemptSpan = spans.child("httpdns.attempt", ofKind: .client)
            do {
                let connection = index == 0 && candidate == candidates.connection?.address ? candidates.connection : nil
                let (answer, headLatency) = try await send(candidate, connection)
                HopSpans.endAttempt(attemptSpan, address: candidate, error: nil)
                if let candidate, let name = candidates.name {
                    resolver.reportFirstByte(to: candidate, of: name, latency: headLatency)
                }
                hop.address = candidate
                if let candidate, let embedded = resolver.network?.cacheAddress(for: candidate), embedded != candidate {
                    hop.synthesizedFrom = embedded
                }
                hop.elapsed = ContinuousClock.now - sendStart
                return answer
            } catch {
                let (code, message, retry) =
                    Task.isCancelled
                    ? (.cancelled, "the request was cancelled", .never) : PinnedTransport.classify(error)
                let underlying = (error as? PinnedTransport.AttemptFailure)?.underlying ?? error
                // Written out only when an attempt fails: most requests never need the text.
                let tried = addresses[...index].compactMap { $0?.description }
                // An invalid header is reported without its value (it may be a credential), and without the
                // underlying error, whose description quotes it.
                let failure = HTTPDNSError(
                    code: code, message: message, url: url, servers: tried,
                    source: code == .invalidRequest ? nil : underlying)
                hop.failedAttempts.append(
                    .init(address: candidate, error: failure, elapsed: ContinuousClock.now - attemptStart))
                HopSpans.endAttempt(attemptSpan, address: candidate, error: failure)
                if let candidate, let name = candidates.name, retry != .never || code == .certificateRejected {
                    resolver.reportFailure(to: candidate, of: name)
                }
                let mayRetry =
                    switch retry {
                    case .beforeSending: true
                    case .afterSending: Self.idempotentMethods.contains(method)
                    case .never: false
                    }
                guard mayRetry, index + 1 < addresses.count, NIODeadline.now() < deadline else {
                    hop.elapsed = ContinuousClock.now - sendStart
                    if retry == .afterSending, !mayRetry, index + 1 < addresses.count {
                        var final = failure
                        final.message +=
                            "; the request may have reached the server, so a \(method) is not sent again to another address"
                        throw final
                    }
                    throw failure
                }
                metrics.failovers.increment()
                logger.debug(
                    "failing over to the next address",
                    metadata: ["url": "\(url)", "ip": "\(candidate?.description ?? "-")", "error": "\(code)"])
            }
        }
        throw HTTPDNSError(
            code: .connectionFailed, message: "no address to try", url: url,
            servers: addresses.compactMap { $0?.description })
    }

    /// Methods that may be sent again to another address after some of the request went out (RFC 9110 9.2.2).
    static let idempotentMethods: Set<String> = ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"]

    /// When the best of `addresses` has not proven itself (never answered, or carrying a failure penalty), races
    /// TCP connects to them (`connectionAttemptDelay` apart) and returns the first to connect, with its connection
    /// for the request to go out on. Every attempt's outcome, the losers' included, goes back to the scores. `nil`
    /// when no race ran or none connected.
    private func raceIfUnproven(
        _ addresses: [RankedAddress], of name: HostName, port: Int, policy: ConnectionPolicy, deadline: NIODeadline,
        spans: HopSpans
    ) async -> (IPAddress, DialedConnection?)? {
        // Without a cache nothing is learned, so every request would race: the ranked order is used as it is.
        guard policy.racesConnections, resolver.cache != nil, addresses.count > 1, let best = addresses.first,
            !best.isProven
        else { return nil }
        // The race's connects count against the request's time too.
        let remaining = Duration.nanoseconds(max((deadline - NIODeadline.now()).nanoseconds, 0))
        guard remaining > .zero else { return nil }
        let race = ConnectionRace(
            attemptDelay: policy.connectionAttemptDelay, connectTimeout: min(policy.connectTimeout, remaining),
            prober: prober)
        let resolver = self.resolver
        let raceSpan = spans.child("httpdns.race")
        raceSpan?.attributes["httpdns.race.candidates"] = addresses.count
        defer { raceSpan?.end() }
        let winner = await race.runKeepingWinner(addresses, port: port) { ip, outcome in
            switch outcome {
            case .connected(let latency): resolver.reportConnect(to: ip, of: name, latency: latency)
            case .failed: resolver.reportFailure(to: ip, of: name)
            }
        }
        raceSpan?.attributes["httpdns.race.winner"] = winner?.0.description
        metrics.races.increment()
        logger.trace("connection race", metadata: ["host": "\(name)", "winner": "\(winner?.0.description ?? "-")"])
        return winner
    }
}

extension ExchangeEngine {
    /// Ends a streamed answer's lease and reports its trace (bytes, time, how the body ended) once the body ends.
    func reportWhenBodyEnds(
        _ streamed: PinnedTransport.StreamedResponse, trace: RequestTrace, started: ContinuousClock.Instant,
        handler: (@Sendable (RequestTrace) -> Void)?
    ) {
        let (metrics, lease) = (self.metrics, streamed.lease)
        let url = trace.hops.last?.url ?? trace.url
        streamed.watch.onEnd { bytes, error in
            lease.end()
            var trace = trace
            trace.bytes = bytes
            trace.elapsed = ContinuousClock.now - started
            if let error {
                let failure = PinnedTransport.interceptionError(error, url: url)
                trace.error = failure
                metrics.failed(failure.code)
            } else {
                metrics.succeeded.increment()
            }
            handler?(trace)
        }
    }

    /// Reports a request that failed before its answer: the trace with the error, the metric, a debug log.
    func reportFailure(
        _ error: HTTPDNSError, trace: inout RequestTrace, started: ContinuousClock.Instant,
        handler: (@Sendable (RequestTrace) -> Void)?
    ) {
        trace.error = error
        trace.elapsed = ContinuousClock.now - started
        metrics.failed(error.code)
        logger.debug("request failed", metadata: ["url": "\(trace.url)", "error": "\(error)"])
        handler?(trace)
    }
}
