import CoreMetrics
import HTTPDNS

/// The service's metrics through swift-metrics: requests by endpoint and status, answer time by endpoint, requests
/// refused by the rate limit, and the server's connections (open, closed by the per-client limit, times accepting
/// stopped at the total limit, closed by a deadline or the write bound). Handles are made once per label set and kept.
final class ServiceMetrics: Sendable {
    private let factory: any MetricsFactory
    /// Requests by endpoint and status, and the answer-time timer of each endpoint: one table, one lock, a key
    /// built without formatting anything (this runs for every request).
    private struct RequestKey: Hashable {
        var endpoint: String
        var status: Int
    }

    private let requestHandles = Locked([RequestKey: (Counter, Timer)]())
    /// The handles of the answer almost every request gets (`dns-query`, 200), made up front and read without the
    /// table's lock.
    private let dnsAnswered: (Counter, Timer)
    let rateLimited: Counter
    /// Connections open now.
    let connectionsOpen: Gauge
    /// Connections closed at once because their client network was at its limit.
    let connectionsRefused: Counter
    /// Times the total connection limit stopped accepting.
    let acceptPauses: Counter
    /// Idle connections closed to make room for a new one at the total connection limit.
    let connectionsShed: Counter
    /// TLS connections closed before their handshake: their network, or the server, was over its handshake rate.
    let handshakesRefused: Counter
    private let guardClosures = Locked([String: Counter]())
    /// Requests by transport, made up front (read without a lock on every request).
    private let byTransport: [ServiceRequest.Transport: Counter]
    /// UDP queries dropped unanswered: the socket could take no more answers, or too many waited for an upstream.
    let udpDropped: Counter
    /// Requests answered at once because their network, or the server, had the most upstream lookups waiting.
    let upstreamRefused: Counter
    /// Requests that waited for a place of their network (`UpstreamBudget`'s queue), whatever came of it.
    let upstreamQueued: Counter
    /// Requests waiting for an upstream now.
    let upstreamInFlight: Gauge

    /// What a lookup for a client network found (EDNS Client Subnet).
    enum SubnetOutcome: String, CaseIterable {
        /// An answer kept for the client's network.
        case hit
        /// The name is the same for every network: the shared cache answered.
        case shared
        /// Nothing known for the network: the upstream is asked with the client's subnet.
        case miss
        /// A network's answer near the end of its TTL: asked again in the background.
        case prefetch
    }

    private let subnetOutcomes: [SubnetOutcome: Counter]
    /// Answers by what the client was told (`rcode`), made up front: read without a lock on every request.
    private let answers: [AnswerOutcome: Counter]
    /// Queries of other types: answered from the relayed answers kept, or sent upstream.
    private let relayKept: Counter
    /// Answers from a connection's kept encoded answers (`AnswerMemo`), which never reach the resolver's cache.
    private let memoHits: Counter
    private let relayAsked: Counter
    /// The relay's upstream queries, timed as the resolver times its own (`httpdns_upstream_duration`, source
    /// `relay`): answered, or failed (a timeout, SERVFAIL, REFUSED).
    private let relayAnswered: Timer
    private let relayFailed: Timer
    /// Names with answers by network, and the networks they hold.
    private let subnetNames: Gauge
    private let subnetNetworks: Gauge
    /// Names with scores reported by client networks, and the networks.
    private let networkScoreNames: Gauge
    private let networkScoreNetworks: Gauge

    init(factory: (any MetricsFactory)?) {
        let factory = factory ?? MetricsSystem.factory
        self.factory = factory
        rateLimited = Counter(label: "httpdns_serve_rate_limited_total", dimensions: [], factory: factory)
        connectionsOpen = Gauge(label: "httpdns_serve_connections_open", dimensions: [], factory: factory)
        connectionsRefused = Counter(
            label: "httpdns_serve_connections_refused_total", dimensions: [], factory: factory)
        acceptPauses = Counter(label: "httpdns_serve_accept_paused_total", dimensions: [], factory: factory)
        connectionsShed = Counter(label: "httpdns_serve_connections_shed_total", dimensions: [], factory: factory)
        handshakesRefused = Counter(
            label: "httpdns_serve_tls_handshakes_refused_total", dimensions: [], factory: factory)
        byTransport = Self.counters("httpdns_serve_queries_total", by: "transport", factory: factory)
        udpDropped = Counter(label: "httpdns_serve_udp_dropped_total", dimensions: [], factory: factory)
        upstreamRefused = Counter(label: "httpdns_serve_upstream_refused_total", dimensions: [], factory: factory)
        upstreamQueued = Counter(label: "httpdns_serve_upstream_queued_total", dimensions: [], factory: factory)
        upstreamInFlight = Gauge(label: "httpdns_serve_upstream_in_flight", dimensions: [], factory: factory)
        subnetOutcomes = Self.counters("httpdns_serve_client_subnet_lookups_total", by: "outcome", factory: factory)
        answers = Self.counters("httpdns_serve_answers_total", by: "rcode", factory: factory)
        relayKept = Counter(
            label: "httpdns_serve_relay_lookups_total", dimensions: [("outcome", "kept")], factory: factory)
        memoHits = Counter(label: "httpdns_serve_memo_hits_total", dimensions: [], factory: factory)
        relayAsked = Counter(
            label: "httpdns_serve_relay_lookups_total", dimensions: [("outcome", "asked")], factory: factory)
        relayAnswered = Timer(
            label: "httpdns_upstream_duration", dimensions: [("source", "relay"), ("outcome", "success")],
            factory: factory)
        relayFailed = Timer(
            label: "httpdns_upstream_duration", dimensions: [("source", "relay"), ("outcome", "failure")],
            factory: factory)
        subnetNames = Gauge(label: "httpdns_serve_client_subnet_names", dimensions: [], factory: factory)
        subnetNetworks = Gauge(label: "httpdns_serve_client_subnet_networks", dimensions: [], factory: factory)
        networkScoreNames = Gauge(label: "httpdns_serve_network_score_names", dimensions: [], factory: factory)
        networkScoreNetworks = Gauge(label: "httpdns_serve_network_score_networks", dimensions: [], factory: factory)
        dnsAnswered = (
            Counter(
                label: "httpdns_serve_requests_total", dimensions: [("endpoint", "dns-query"), ("status", "200")],
                factory: factory),
            Timer(
                label: "httpdns_serve_request_duration_seconds", dimensions: [("endpoint", "dns-query")],
                factory: factory)
        )
        requestHandles.withLock { $0[RequestKey(endpoint: "dns-query", status: 200)] = dnsAnswered }
    }

    /// One counter `label` for each value of `Key`, its raw value the `dimension`: a fixed label set made up front.
    private static func counters<Key: CaseIterable & RawRepresentable & Hashable>(
        _ label: String, by dimension: String, factory: any MetricsFactory
    ) -> [Key: Counter] where Key.RawValue == String {
        Dictionary(
            uniqueKeysWithValues: Key.allCases.map {
                ($0, Counter(label: label, dimensions: [(dimension, $0.rawValue)], factory: factory))
            })
    }

    /// Counts a lookup for a client network by what it found.
    func clientSubnet(_ outcome: SubnetOutcome) {
        subnetOutcomes[outcome]?.increment()
    }

    /// Counts an answer by what the client was told.
    func answered(_ outcome: AnswerOutcome) {
        answers[outcome]?.increment()
    }

    /// Counts an answer from a connection's kept encoded answers.
    func memoHit() {
        memoHits.increment()
    }

    /// Counts a query of another type answered from the relayed answers kept.
    func relayKeptAnswer() {
        relayKept.increment()
    }

    /// Counts a relayed query sent upstream, and how it went after `duration`: `answered` is false for a timeout,
    /// a transport error, and an upstream's SERVFAIL or REFUSED.
    func relayUpstream(answered: Bool, duration: Duration) {
        relayAsked.increment()
        (answered ? relayAnswered : relayFailed).recordNanoseconds(duration.wholeNanoseconds)
    }

    /// Records the size of the table of answers by network.
    func subnetTable(_ size: (names: Int, networks: Int)) {
        subnetNames.record(size.names)
        subnetNetworks.record(size.networks)
    }

    /// Records the size of the table of scores by client network.
    func networkScoreTable(_ size: (names: Int, networks: Int)) {
        networkScoreNames.record(size.names)
        networkScoreNetworks.record(size.networks)
    }

    /// Counts a request that arrived over `transport`.
    func received(over transport: ServiceRequest.Transport) {
        byTransport[transport]?.increment()
    }

    /// A connection closed by its deadline or write bound (`reason`: handshake, head, body, idle, write, queued).
    func closedByGuard(_ reason: String) {
        counter(reason, "httpdns_serve_connections_closed_total", [("reason", reason)], in: guardClosures).increment()
    }

    func record(endpoint: String, status: Int, duration: Duration) {
        if status == 200, endpoint == "dns-query" {
            dnsAnswered.0.increment()
            dnsAnswered.1.recordNanoseconds(duration.wholeNanoseconds)
            return
        }
        let key = RequestKey(endpoint: endpoint, status: status)
        let (counter, timer) = requestHandles.withLock { handles in
            if let made = handles[key] { return made }
            let counter = Counter(
                label: "httpdns_serve_requests_total", dimensions: [("endpoint", endpoint), ("status", "\(status)")],
                factory: factory)
            // One timer per endpoint, shared by its statuses.
            let timer =
                handles.first { $0.key.endpoint == endpoint }?.value.1
                ?? Timer(
                    label: "httpdns_serve_request_duration_seconds", dimensions: [("endpoint", endpoint)],
                    factory: factory)
            handles[key] = (counter, timer)
            return (counter, timer)
        }
        counter.increment()
        timer.recordNanoseconds(duration.wholeNanoseconds)
    }

    /// The counter `label` with `dimensions`, made once and kept in `table` under `key` (the dimensions are only
    /// built the first time: this runs for every request).
    private func counter(
        _ key: String, _ label: String, _ dimensions: @autoclosure () -> [(String, String)],
        in table: Locked<[String: Counter]>
    ) -> Counter {
        table.withLock { counters in
            if let counter = counters[key] { return counter }
            let counter = Counter(label: label, dimensions: dimensions(), factory: factory)
            counters[key] = counter
            return counter
        }
    }
}
