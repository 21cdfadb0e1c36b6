import HTTPDNS
import NIOCore

/// A miss answered from the event loop that received it: the lookup goes out on that loop's own sockets
/// (``HostResolver/resolveOnLoop(_:family:on:completion:)``) and its answer comes back there, with no task and no
/// other thread on the way. What is decided about it (kept by network, made everyone's, an error's answer) is decided
/// by the functions the tasks' path calls (``keep(_:_:subnet:)``, ``failure(_:_:)``, ``subnetNegative(_:_:)``).
extension HTTPDNSService {
    /// Answers `plan` from `loop` (the caller runs on it) when its one lookup, or its relay, can be asked there;
    /// `finish` then runs on `loop` with the response, after the place `ticket` is given back. `nil` when the plan
    /// cannot be answered this way (several lookups, a pipeline or forwarder the loop cannot ask): the caller starts
    /// a task. The wait returned stops the lookup and gives the place back (held while the query may still go out,
    /// as a task's).
    func answerOnLoop(
        _ plan: Plan, on loop: any EventLoop, ticket: UpstreamBudget.Ticket, admitted: ContinuousClock.Instant,
        finish: @escaping (ServiceResponse) -> Void
    ) -> UpstreamWait? {
        // The place is given back once: by the answer, or by the wait's cancellation, whichever comes first.
        let place = Locked<UpstreamBudget.Ticket?>(ticket)
        let bound = NIOLoopBound(finish, eventLoop: loop)
        // An answer that comes while this is still starting the lookup (a negative answer in the cache, a local
        // one, a query that cannot start) is handed over in a later turn: the caller registers the wait before any
        // answer of its comes (the fronts' contract, as for a task's).
        let started = Locked(false)
        let answered = { @Sendable [self] (response: ServiceResponse) in
            guard let ticket = place.withLock({ $0.take() }) else { return }
            releaseUpstream(ticket)
            if started.withLock({ $0 }), loop.inEventLoop {
                bound.value(response)
            } else {
                loop.execute { bound.value(response) }
            }
        }
        let stop: @Sendable () -> Void
        switch plan.work {
        case .lookups(let lookups, let render) where lookups.count == 1:
            guard let lookup = lookupOnLoop(lookups[0], on: loop, { answered(render([$0])) }) else { return nil }
            stop = { lookup.cancel() }
        case .forward(let relay):
            // An SVCB or HTTPS answer's hints are steered by lookups a task waits for.
            guard !Self.isServiceBinding(relay.query.type), let forwarder = forwarder as? ReloadingCAresForwarder
            else { return nil }
            let outgoing = relayOutgoing(relay)
            let sent = ContinuousClock.now
            let stopRelay = forwarder.start(outgoing.message, on: loop) { [self] result in
                switch result {
                case .success(let answer):
                    countRelay(answer, since: sent)
                    answered(relayed(answer, relay, subnet: outgoing.subnet))
                case .failure(let error):
                    if !(error is CancellationError) { countRelay(nil, since: sent) }
                    answered(relayFailure(error, relay))
                }
            }
            guard let stopRelay else { return nil }
            stop = stopRelay
        default:
            return nil
        }
        started.withLock { $0 = true }
        return UpstreamWait(cancel: { [self] in
            guard let ticket = place.withLock({ $0.take() }) else { return }
            stop()
            releaseUpstream(ticket, admitted: admitted, abandoned: true)
        })
    }

    /// ``lookup(_:)`` from `loop`: `done` runs on `loop`, once, unless the returned lookup is cancelled first. `nil`
    /// (nothing started, nothing changed) when the resolver cannot ask from `loop`.
    func lookupOnLoop(
        _ lookup: Lookup, on loop: any EventLoop, _ done: @escaping (LookupResult) -> Void
    ) -> HostResolver.LoopLookup? {
        guard !lookup.name.isEmpty, resolver.resolvesOnLoop(loop, family: lookup.family),
            let host = try? HostName(lookup.name + ".")
        else { return nil }
        let bound = NIOLoopBound(done, eventLoop: loop)
        // On the loop when this loop's query ended the flight; from a task's thread when a task's did.
        let deliver: @Sendable (LookupResult) -> Void = { result in
            if loop.inEventLoop {
                bound.value(result)
            } else {
                loop.execute { bound.value(result) }
            }
        }
        if let subnet = lookup.subnet {
            let key = ClientSubnetCache.Key(name: lookup.name, family: lookup.family)
            switch subnetAnswers.lookup(key, subnet: subnet, now: .now) {
            case .answer(let answer, let scope, let ttl, let prefetch):
                if prefetch { prefetchInBackground(lookup, subnet: subnet) }
                deliver(result(answer, lookup, scope: scope, ttl: ttl))
                return HostResolver.LoopLookup {}
            case .shared(let revalidate):
                if revalidate { revalidateInBackground(lookup, subnet: subnet) }
            case .miss:
                // `nil` when the upstream is not asked for networks (HTTP DNS): the shared path below, as a task's.
                let started = resolver.resolveOnLoop(
                    host, family: lookup.family, clientSubnet: subnet, sharing: !lookup.chosen, on: loop
                ) { [self] outcome in
                    switch outcome {
                    case .success(let answer?):
                        deliver(keep(answer, lookup, subnet: subnet))
                    case .success(nil):
                        // No upstream asks for a network: not so on this path (its one upstream does), unless a
                        // reload changed it while a task's flight ran; that query is answered as failed.
                        deliver(.failure(.serverFailure))
                    case .failure(let error):
                        deliver(failure(error, lookup))
                    }
                }
                if let started { return started }
            }
        }
        return resolver.resolveOnLoop(host, family: lookup.family, on: loop) { [self] outcome in
            switch outcome {
            case .success(let answer): deliver(result(answer, lookup))
            case .failure(let error): deliver(failure(error, lookup))
            }
        }
    }
}

extension Optional {
    /// The value, leaving `nil` in its place.
    fileprivate mutating func take() -> Wrapped? {
        defer { self = nil }
        return self
    }
}
