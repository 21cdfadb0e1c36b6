import CoreMetrics
import HTTPDNS

extension HTTPDNSService {
    /// Takes a place among the requests waiting for upstreams for `request`'s client network, a relay's place for
    /// a `relay`; `nil` (counted) when its network or the server has the most waiting already
    /// (``Configuration-swift.struct/maximumUpstreamLookups`` and
    /// ``Configuration-swift.struct/maximumUpstreamLookupsPerNetwork``; for relays
    /// ``Configuration-swift.struct/maximumForwardedQueries`` and a sixteenth of it per network).
    /// With a queue wait configured, a refusal here is not counted: the caller asks again with a queue
    /// (``admitUpstream(_:relay:queueing:)``), which counts.
    func admitUpstream(_ request: ServiceRequest, relay: Bool = false) -> UpstreamBudget.Ticket? {
        let counted = request.unverified || configuration.upstreamQueueWait == .zero
        guard case .admitted(let ticket) = admitUpstream(request, relay: relay, queueing: nil, countingRefusal: counted)
        else { return nil }
        return ticket
    }

    /// As ``admitUpstream(_:relay:)``; when only the network's share is taken, `queueing` is given and
    /// ``Configuration-swift.struct/upstreamQueueWait`` is not zero, the request waits in its network's queue (see
    /// ``UpstreamBudget``) and `queueing` gets its place. Refusals are counted here; a queued request that is
    /// never given a place is counted by ``refusedAfterWaiting()``.
    func admitUpstream(
        _ request: ServiceRequest, relay: Bool, queueing: (@Sendable (UpstreamBudget.Ticket) -> Void)?,
        countingRefusal: Bool = true
    ) -> UpstreamBudget.Admission {
        let configuration = self.configuration
        let bounds =
            relay
            ? UpstreamBudget.Bounds(
                total: configuration.maximumForwardedQueries,
                perNetwork: max(configuration.maximumForwardedQueries / 16, 1))
            : UpstreamBudget.Bounds(
                total: configuration.maximumUpstreamLookups,
                perNetwork: configuration.maximumUpstreamLookupsPerNetwork)
        let admission = upstreamBudget.admit(
            request.client, unverified: request.unverified, kind: relay ? .relay : .lookup, bounds: bounds,
            prefixes: configuration.clientPrefixes,
            queueing: configuration.upstreamQueueWait > .zero ? queueing : nil)
        switch admission {
        case .admitted: metrics.upstreamInFlight.record(upstreamBudget.inFlight)
        case .queued: metrics.upstreamQueued.increment()
        case .refused: if countingRefusal { metrics.upstreamRefused.increment() }
        }
        return admission
    }

    /// Counts a queued request that waited ``Configuration-swift.struct/upstreamQueueWait`` for no place.
    func refusedAfterWaiting() { metrics.upstreamRefused.increment() }

    /// A place for `request` and when it was taken, waiting in its network's queue as
    /// ``admitUpstream(_:relay:queueing:countingRefusal:)`` allows; `nil` when refused at once or after the wait, or
    /// when the caller's task is cancelled while it waits (it leaves the queue then).
    func waitForUpstream(_ request: ServiceRequest, relay: Bool) async
        -> (ticket: UpstreamBudget.Ticket, admitted: ContinuousClock.Instant)?
    {
        if let ticket = admitUpstream(request, relay: relay) { return (ticket, .now) }
        let wait = configuration.upstreamQueueWait
        guard wait > .zero, !request.unverified, !Task.isCancelled else { return nil }
        typealias Waiting = (
            place: UpstreamBudget.QueuedPlace, continuation: CheckedContinuation<UpstreamBudget.Ticket?, Never>
        )
        let waiting = Locked<Waiting?>(nil)
        let ticket = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<UpstreamBudget.Ticket?, Never>) in
                // The place comes from whoever gives one back, or the wait or the task ends: `withdraw` decides
                // which, once, and only the one that decided resumes.
                switch admitUpstream(request, relay: relay, queueing: { continuation.resume(returning: $0) }) {
                case .admitted(let ticket):
                    continuation.resume(returning: ticket)
                case .refused:
                    continuation.resume(returning: nil)
                case .queued(let place):
                    waiting.withLock { $0 = (place, continuation) }
                    Task { [self] in
                        try? await Task.sleep(for: wait)
                        if upstreamBudget.withdraw(place) {
                            refusedAfterWaiting()
                            continuation.resume(returning: nil)
                        }
                    }
                    if Task.isCancelled, upstreamBudget.withdraw(place) { continuation.resume(returning: nil) }
                }
            }
        } onCancel: {
            if let (place, continuation) = waiting.withLock({ $0 }), upstreamBudget.withdraw(place) {
                continuation.resume(returning: nil)
            }
        }
        return ticket.map { ($0, .now) }
    }

    /// Gives back a place ``admitUpstream(_:)`` took.
    func releaseUpstream(_ ticket: UpstreamBudget.Ticket) {
        upstreamBudget.release(ticket)
        metrics.upstreamInFlight.record(upstreamBudget.inFlight)
    }

    /// Gives back the place of a request admitted at `admitted`. A request `abandoned` by its client (its lookups
    /// cancelled) keeps its place while a c-ares query it started may still be going out (c-ares 1.18 cannot take
    /// one back: every try's timeout from the admission), so that opening and dropping requests for new names
    /// costs the client network its places as long as the upstream work lasts, not only as long as it waited.
    func releaseUpstream(_ ticket: UpstreamBudget.Ticket, admitted: ContinuousClock.Instant, abandoned: Bool) {
        let until = admitted + resolver.longestUncancellableQuery
        guard abandoned, until > .now else {
            releaseUpstream(ticket)
            return
        }
        Task.detached { [self] in
            try? await Task.sleep(until: until, clock: .continuous)
            releaseUpstream(ticket)
        }
    }

    /// The answer to a request that found no place among those waiting for upstreams: 503 with `Retry-After`
    /// (SERVFAIL over TCP and DNS over TLS; over UDP a truncated answer, so the client asks again over TCP).
    static let upstreamBusy = ServiceResponse.text(
        503, "too many lookups from this network are waiting for upstreams; ask again shortly",
        headers: ["Retry-After": "1"])
}

/// A request's wait for its upstreams: cancelled when nobody waits for the answer any more (its HTTP/2 stream was
/// reset, its connection closed), which cancels the lookups nobody else shares, or takes a request still waiting
/// for a place out of its network's queue.
struct UpstreamWait: Sendable {
    private enum Wait {
        case task(Task<Void, Never>)
        case queued(QueuedUpstreamStart)
        case loop(@Sendable () -> Void)
    }

    private let wait: Wait

    /// The wait of a request whose lookups run in `task`.
    init(task: Task<Void, Never>) { wait = .task(task) }

    /// The wait of a request answered from its event loop (``HTTPDNSService/answerOnLoop``): `cancel` stops it.
    init(cancel: @escaping @Sendable () -> Void) { wait = .loop(cancel) }

    /// The wait of a request in its network's queue.
    init(queued: QueuedUpstreamStart) { wait = .queued(queued) }

    /// Stops the wait; its answer, if one still comes, is a SERVFAIL nobody reads.
    func cancel() {
        switch wait {
        case .task(let task): task.cancel()
        case .queued(let queued): queued.cancel()
        case .loop(let cancel): cancel()
        }
    }
}

/// A request waiting in its network's queue for an upstream place (see ``UpstreamBudget``): its lookups start when
/// a place comes, unless it was cancelled or its wait ended first. Which of the three happens first is decided
/// under its lock (and, between a place and the end of the wait, by ``UpstreamBudget/withdraw(_:)``).
final class QueuedUpstreamStart: Sendable {
    private enum State {
        /// In the queue (at `place`, once known).
        case waiting(UpstreamBudget.QueuedPlace?)
        case started(Task<Void, Never>)
        case ended
    }

    private let state = Locked(State.waiting(nil))
    private let budget: UpstreamBudget

    init(budget: UpstreamBudget) {
        self.budget = budget
    }

    /// Where the request waits.
    func queued(at place: UpstreamBudget.QueuedPlace) {
        state.withLock { state in
            if case .waiting = state { state = .waiting(place) }
        }
    }

    /// A place came: runs `start` (which makes the lookups' task) unless the request was cancelled; `false` then
    /// (the caller gives the place back).
    func start(_ start: () -> Task<Void, Never>) -> Bool {
        state.withLock { state in
            guard case .waiting = state else { return false }
            state = .started(start())
            return true
        }
    }

    /// The wait ended: `true` when the request was still in the queue (it is taken out and gets no place).
    func expire() -> Bool {
        let place = state.withLock { state -> UpstreamBudget.QueuedPlace? in
            guard case .waiting(let place) = state else { return nil }
            return place
        }
        guard let place, budget.withdraw(place) else { return false }
        state.withLock { $0 = .ended }
        return true
    }

    /// The client went away: out of the queue, or the lookups cancelled.
    func cancel() {
        let place = state.withLock { state -> UpstreamBudget.QueuedPlace? in
            switch state {
            case .waiting(let place):
                state = .ended
                return place
            case .started(let task):
                task.cancel()
                return nil
            case .ended:
                return nil
            }
        }
        if let place { _ = budget.withdraw(place) }
    }
}
