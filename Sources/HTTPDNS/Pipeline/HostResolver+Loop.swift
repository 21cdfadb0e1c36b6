import CoreMetrics
package import HTTPDNSCore
import HTTPDNSClients
package import NIOCore

/// Lookups a server's event loop starts itself: the query goes out on that loop's own sockets and its answer is
/// read there, with no task and no other thread on the way (as dnsdist sends a miss from the thread that received
/// it). Everything decided about the answer is decided by the functions the tasks' path calls (``accepted``,
/// ``settle``, ``subnetStep``), and the flight is the same one tasks join (``SingleFlight/joinOrLead(_:_:)``): a
/// JSON request waiting in a task and a UDP query on a loop share one upstream query.
extension HostResolver {
    /// A lookup started from an event loop; ``cancel()`` when nobody waits for it any more (its completion is then
    /// not called, unless it was already under way on another thread, and the upstream query, or the fallback's
    /// task, stops when nobody else shares it).
    package struct LoopLookup: Sendable {
        private let leave: @Sendable () -> Void

        /// A lookup that `leave` stops waiting for.
        package init(leave: @escaping @Sendable () -> Void) {
            self.leave = leave
        }

        /// Stops waiting.
        package func cancel() { leave() }
    }

    /// How an event loop asks its upstream: on its own sockets, or over an HTTP DNS service's HTTP/2 connection.
    enum LoopAsker {
        /// Classic DNS from the loop's own sockets.
        case plain(PlainDNSResolver)
        /// RFC 8484 on the service's ready HTTP/2 connection, the answer decided on the loop that asked; a task only
        /// when there is no ready connection, or for what the first exchange leaves undecided (the next address or
        /// endpoint).
        case doh(HTTPDNSResolver)
    }

    /// The upstream an event loop can ask itself: the pipeline's only upstream when it is classic DNS on the server's
    /// own sockets (`PlainDNSResolver`) with engines on `loop`, or an RFC 8484 service (its budget kept by a timer on
    /// the loop), with the fallback asked after it for names it denies (`sources.systemFallback`, on by default).
    /// `nil` otherwise (several upstreams, a race, c-ares, the JSON and vendor APIs): those lookups take the tasks'
    /// path.
    func loopUpstream(on loop: any EventLoop)
        -> (upstream: Upstream, asker: LoopAsker, guardAll: Bool, fallback: Upstream?)?
    {
        let (upstreams, fallback, guardAll) = state.withLock {
            ($0.upstreams, $0.fallback, $0.configuration.guardsEveryUpstream)
        }
        guard upstreams.count == 1 else { return nil }
        switch upstreams[0].resolver {
        case let plain as PlainDNSResolver where plain.client.hasEngine(on: loop):
            return (upstreams[0], .plain(plain), guardAll, fallback)
        case let doh as HTTPDNSResolver where doh.asksWithoutTask:
            return (upstreams[0], .doh(doh), guardAll, fallback)
        default:
            return nil
        }
    }

    /// Whether ``resolveOnLoop(_:family:on:completion:)`` can ask for `family` from `loop`.
    package func resolvesOnLoop(_ loop: any EventLoop, family: AddressFamily) -> Bool {
        family != .any && loopUpstream(on: loop) != nil
    }

    /// Resolves the absolute `host` as ``resolveRanked(_:family:)`` does (the overrides and the hosts file, the
    /// cache, then the upstream, stale answers served when it fails), from `loop`, which the caller runs on.
    /// `completion` runs once: on `loop` when this loop's query ends the flight, else on the thread that ended it (a
    /// task's); the caller hops. `nil` when the lookup cannot be made this way (see ``resolvesOnLoop(_:family:)``).
    package func resolveOnLoop(
        _ host: HostName, family: AddressFamily, on loop: any EventLoop,
        completion: @escaping @Sendable (Result<RankedResolution, any Error>) -> Void
    ) -> LoopLookup? {
        guard family != .any, let (upstream, asker, guardAll, fallback) = loopUpstream(on: loop) else { return nil }
        if let answer = localAnswer(host, family: family) {
            completion(.success(answer))
            return LoopLookup {}
        }
        // A name the upstream denies is asked of the fallback, as ``resolveRanked(_:family:)`` asks it: in a task
        // of the resolver's (the system resolver blocks a thread; shutdown cancels it), which the lookup's
        // cancellation cancels too.
        let fallbackTask = Locked<Task<Void, Never>?>(nil)
        let completion: @Sendable (Result<RankedResolution, any Error>) -> Void = { [self] result in
            guard let fallback, case .failure(let failure) = result, let error = failure as? HTTPDNSError,
                error.code.isNegativeAnswer
            else { return completion(result) }
            let task = tasks.start {
                let answer = await Result {
                    try await self.askFallback(fallback, host: host, family: family, upstreamError: error)
                }
                if !Task.isCancelled { completion(answer) }
            }
            guard let task else {
                return completion(.failure(HTTPDNSError(code: .shutdown, message: "the resolver is shut down")))
            }
            fallbackTask.withLock { $0 = task }
        }
        switch cachedAnswer(host, family: family) {
        case .answer(let answer, _):
            completion(.success(answer))
            return LoopLookup {}
        case .negative(let error):
            // The fallback may be asked for it: the lookup's cancellation stops that task.
            completion(.failure(error))
            return LoopLookup { fallbackTask.withLock { $0 }?.cancel() }
        case .miss:
            break
        }
        let key = FlightKey(host: host, family: family)
        let (waiter, lead) = flights.joinOrLead(key, completion)
        if let flight = lead {
            let started = ContinuousClock.now
            fly(flights, key, flight, asker, host: host, family: family, subnet: nil, on: loop) { [self] result in
                let asked = Result { () throws -> RankedResolution in
                    do {
                        let resolution = try Self.accepted(
                            result.map(\.resolution), from: upstream, host: host, guardEveryUpstream: guardAll,
                            elapsed: ContinuousClock.now - started, metrics: metrics)
                        return store(resolution, host: host, family: family, upstream: upstream.identity, merge: false)
                    } catch let error as CancellationError {
                        throw error
                    } catch let error as HTTPDNSError where error.code == .privateAddress {
                        throw error
                    } catch {
                        throw Self.failure(of: [(error, upstream)])
                    }
                }
                return Result { try settle(asked, host: host, family: family, isRefresh: false, probePort: nil) }
            }
        }
        return LoopLookup { [flights] in
            flights.leave(key, waiter: waiter)
            fallbackTask.withLock { $0 }?.cancel()
        }
    }

    /// Resolves the absolute `host` for clients in `clientSubnet` as ``resolve(_:family:clientSubnet:sharing:)``
    /// does, from `loop`, which the caller runs on; `completion` as for ``resolveOnLoop(_:family:on:completion:)``
    /// (a `ScopedNegativeAnswer` when a trusted upstream denies the name with its scope).
    package func resolveOnLoop(
        _ host: HostName, family: AddressFamily, clientSubnet: IPNetwork, sharing: Bool, on loop: any EventLoop,
        completion: @escaping @Sendable (Result<SubnetAnswer?, any Error>) -> Void
    ) -> LoopLookup? {
        // HTTP DNS upstreams are not asked for a client's network (the tasks' path skips them too: a vendor query
        // a network would spend quota, and their empty answers may be throttling): `nil`, the server's own view.
        guard family != .any, let (upstream, asker, guardAll, _) = loopUpstream(on: loop), case .plain = asker else {
            return nil
        }
        if let answer = localAnswer(host, family: family) {
            completion(.success(SubnetAnswer(answer: answer, scope: 0)))
            return LoopLookup {}
        }
        metrics.misses.increment()
        let key = SubnetFlightKey(host: host, family: family, subnet: clientSubnet, sharing: sharing)
        let (waiter, lead) = subnetFlights.joinOrLead(key, completion)
        if let flight = lead {
            let started = ContinuousClock.now
            fly(subnetFlights, key, flight, asker, host: host, family: family, subnet: clientSubnet, on: loop) {
                [self] result in
                switch subnetStep(
                    result, from: upstream, host: host, family: family, sharing: sharing, guardEveryUpstream: guardAll,
                    elapsed: ContinuousClock.now - started)
                {
                case .answered(let answer): .success(answer)
                case .failed(let error), .next(let error): .failure(error)
                }
            }
        }
        return LoopLookup { [subnetFlights] in subnetFlights.leave(key, waiter: waiter) }
    }

    /// Runs `flight` of `flights`, opened by a loop: the query from `loop`'s own sockets, or on the HTTP DNS service's
    /// connection (for clients in `subnet` when given), its outcome decided by `decide` there and handed to every
    /// waiter; a way to stop it handed to the flight.
    private func fly<Key: Hashable & Sendable, Value: Sendable>(
        _ flights: SingleFlight<Key, Value>, _ key: Key, _ flight: Int, _ asker: LoopAsker, host: HostName,
        family: AddressFamily, subnet: IPNetwork?, on loop: any EventLoop,
        decide: @escaping @Sendable (Result<ScopedResolution, any Error>) -> Result<Value, any Error>
    ) {
        switch asker {
        case .plain(let plain):
            let handle = PlainDNSQueryHandle()
            let began = plain.start(host, family: family, subnet: subnet, on: loop, handle: handle) { result in
                flights.finish(key, flight, decide(result))
            }
            guard began else {
                let error = HTTPDNSError(code: .shutdown, message: "the upstream sockets are closed", host: host.name)
                return flights.finish(key, flight, .failure(error))
            }
            flights.started(key, flight) { plain.cancel(handle, on: loop) }
        case .doh(let doh):
            let type: DNSRecordType = family == .ipv4 ? .a : .aaaa
            let stop = FlightStop()
            // Whatever ends the flight first (the answer, the task that goes on, the budget) decides it, on `loop`:
            // the connection's loop, which every lookup to that server shares, only hands the bytes over.
            let end: @Sendable (Result<ScopedResolution, any Error>) -> Void = { result in
                guard stop.claim() else { return }
                flights.finish(key, flight, decide(result))
            }
            // The rest of the lookup, in a resolver task (shutdown cancels it, so does the flight's stop).
            let goOn: @Sendable (HTTPDNSResolver.FailoverPoint) -> Void = { [self] point in
                let task = tasks.start {
                    let result = await Result {
                        try await doh.resume(host, type: type, clientSubnet: subnet, from: point)
                    }
                    // Also when cancelled by the resolver's shutdown: the flight's waiters get its error. Stopped with
                    // the flight, nothing is decided (`end` claims nothing once stopped).
                    loop.execute { end(result) }
                }
                guard let task else {
                    let error = HTTPDNSError(code: .shutdown, message: "the resolver is shut down", host: host.name)
                    return loop.execute { end(.failure(error)) }
                }
                stop.add { task.cancel() }
            }
            // The provider's budget holds here as in a task: past it, the lookup stops and fails with its error.
            if let budget = doh.configuration.budget {
                let expiry = loop.scheduleTask(in: TimeAmount(budget)) {
                    end(.failure(doh.budgetExceeded(host, budget: budget)))
                    stop.stop()
                }
                stop.add { expiry.cancel() }
            }
            if let lookup = doh.prepareDoH(host, type: type, subnet: subnet) {
                stop.add { lookup.cancel() }
                lookup.send { result in
                    loop.execute {
                        switch doh.decide(lookup, result) {
                        case .answered(let answer):
                            end(
                                .success(
                                    ScopedResolution(
                                        resolution: Resolution(host: host.name, addresses: answer.addresses),
                                        scopePrefixLength: answer.scope)))
                        case .failed(let error):
                            end(.failure(error))
                        case .cancelled:
                            end(.failure(CancellationError()))
                        case .goOn(let point):
                            goOn(point)
                        }
                    }
                }
            } else {
                goOn(HTTPDNSResolver.FailoverPoint())
            }
            flights.started(key, flight) { stop.stop() }
        }
    }
}

/// What stops a loop's HTTP DNS flight (the exchange, the task that goes on after it, the budget's timer), and which
/// of its outcomes ends it. A stop that comes first stops what is added later at once.
private final class FlightStop: Sendable {
    private let state = Locked<(stopped: Bool, claimed: Bool, actions: [@Sendable () -> Void])>((false, false, []))

    /// Whether the caller's outcome is the one that ends the flight: `true` once, and never after ``stop()``.
    func claim() -> Bool {
        state.withLock { state in
            guard !state.stopped, !state.claimed else { return false }
            state.claimed = true
            return true
        }
    }

    func add(_ action: @escaping @Sendable () -> Void) {
        let stopped = state.withLock { state in
            if !state.stopped { state.actions.append(action) }
            return state.stopped
        }
        if stopped { action() }
    }

    func stop() {
        let actions = state.withLock { state in
            state.stopped = true
            defer { state.actions.removeAll() }
            return state.actions
        }
        for action in actions { action() }
    }
}
