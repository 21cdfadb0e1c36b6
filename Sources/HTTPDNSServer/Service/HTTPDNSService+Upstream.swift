import CoreMetrics
import HTTPDNS

extension HTTPDNSService {
    /// Takes a place among the requests waiting for upstreams for `request`'s client network, a relay's place for
    /// a `relay`; `nil` (counted) when its network or the server has the most waiting already
    /// (``Configuration-swift.struct/maximumUpstreamLookups`` and
    /// ``Configuration-swift.struct/maximumUpstreamLookupsPerNetwork``; for relays
    /// ``Configuration-swift.struct/maximumForwardedQueries`` and a sixteenth of it per network).
    func admitUpstream(_ request: ServiceRequest, relay: Bool = false) -> UpstreamBudget.Ticket? {
        let configuration = self.configuration
        let bounds =
            relay
            ? UpstreamBudget.Bounds(
                total: configuration.maximumForwardedQueries,
                perNetwork: max(configuration.maximumForwardedQueries / 16, 1))
            : UpstreamBudget.Bounds(
                total: configuration.maximumUpstreamLookups,
                perNetwork: configuration.maximumUpstreamLookupsPerNetwork)
        guard
            let ticket = upstreamBudget.admit(
                request.client, unverified: request.unverified,
                kind: relay ? .relay : .lookup, bounds: bounds, prefixes: configuration.clientPrefixes)
        else {
            metrics.upstreamRefused.increment()
            return nil
        }
        metrics.upstreamInFlight.record(upstreamBudget.inFlight)
        return ticket
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
/// reset, its connection closed), which cancels the lookups nobody else shares.
struct UpstreamWait: Sendable {
    let task: Task<Void, Never>

    /// Stops the wait; its answer, if one still comes, is a SERVFAIL nobody reads.
    func cancel() { task.cancel() }
}
