import CoreMetrics
import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients

/// The host resolver's metrics, created once so that recording costs no lookups.
///
/// | label | type | dimensions |
/// |---|---|---|
/// | `httpdns_cache_hits` | counter | |
/// | `httpdns_cache_misses` | counter | |
/// | `httpdns_cache_stale_serves` | counter | expired answers served at once while one refresh runs |
/// | `httpdns_cache_stale_fallbacks` | counter | cached answers served after a miss whose upstreams all failed (the lookup is a miss) |
/// | `httpdns_cache_negative_hits` | counter | |
/// | `httpdns_cache_refreshes` | counter | `outcome` (`started`, `postponed`: over the rate bound) |
/// | `httpdns_upstream_duration` | timer | `source`, `outcome` (`success`: any DNS answer, NXDOMAIN, no data, SERVFAIL and REFUSED included; `failure`: a timeout, a transport error, an unreadable response) |
/// | `httpdns_probes` | counter | `outcome` (`connected`, `failed`) |
/// | `httpdns_probe_duration` | timer | |
/// | `httpdns_network_changes` | counter | |
struct ResolverMetrics: Sendable {
    let hits: Counter
    let misses: Counter
    let staleServes: Counter
    let staleFallbacks: Counter
    let negativeHits: Counter
    let refreshesStarted: Counter
    let refreshesPostponed: Counter
    let probesConnected: Counter
    let probesFailed: Counter
    let probeDuration: Timer
    let networkChanges: Counter
    private let upstream: [String: (success: Timer, failure: Timer)]
    /// Where these metrics go, for the upstreams a reload builds.
    let factory: any MetricsFactory
    /// Each upstream's last answer and failures in a row, told with the timers (for an operator's status call).
    let health = UpstreamHealth()

    init(sources: [String], factory: any MetricsFactory) {
        self.factory = factory
        hits = Counter(label: "httpdns_cache_hits", factory: factory)
        misses = Counter(label: "httpdns_cache_misses", factory: factory)
        staleServes = Counter(label: "httpdns_cache_stale_serves", factory: factory)
        staleFallbacks = Counter(label: "httpdns_cache_stale_fallbacks", factory: factory)
        negativeHits = Counter(label: "httpdns_cache_negative_hits", factory: factory)
        refreshesStarted = Counter(
            label: "httpdns_cache_refreshes", dimensions: [("outcome", "started")], factory: factory)
        refreshesPostponed = Counter(
            label: "httpdns_cache_refreshes", dimensions: [("outcome", "postponed")], factory: factory)
        probesConnected = Counter(label: "httpdns_probes", dimensions: [("outcome", "connected")], factory: factory)
        probesFailed = Counter(label: "httpdns_probes", dimensions: [("outcome", "failed")], factory: factory)
        probeDuration = Timer(label: "httpdns_probe_duration", factory: factory)
        networkChanges = Counter(label: "httpdns_network_changes", factory: factory)
        var upstream: [String: (Timer, Timer)] = [:]
        for source in sources {
            upstream[source] = (
                Self.upstreamTimer(source, "success", factory), Self.upstreamTimer(source, "failure", factory)
            )
        }
        self.upstream = upstream
    }

    private static func upstreamTimer(_ source: String, _ outcome: String, _ factory: any MetricsFactory) -> Timer {
        Timer(
            label: "httpdns_upstream_duration", dimensions: [("source", source), ("outcome", outcome)], factory: factory
        )
    }

    /// Records how long asking `source` took, and whether it answered: every query sent upstream is counted once,
    /// on whichever path sent it (the shared cache's, a client network's, the fallback).
    func recordUpstream(_ source: String, answered: Bool, duration: Duration) {
        let timers =
            upstream[source] ?? (
                Self.upstreamTimer(source, "success", factory), Self.upstreamTimer(source, "failure", factory)
            )
        (answered ? timers.success : timers.failure).recordNanoseconds(duration.wholeNanoseconds)
        health.record(source, answered: answered, duration: duration)
    }

    /// Records a query that ended with `error`: a DNS answer of any code (NXDOMAIN, no data, SERVFAIL, REFUSED) and
    /// an answer a provider's own guard refused are the upstream answering; a timeout, a transport error or an
    /// unreadable response is its failure. So `HostsctlServeUpstreamDown` says an upstream cannot be reached, and
    /// clients asking for names that fail cannot make it look down (their SERVFAILs are in the answers' counts).
    func recordUpstream(_ source: String, answered error: any Error, duration: Duration) {
        recordUpstream(source, answered: Self.isAnswer(error), duration: duration)
    }

    /// Whether `error` is an upstream's answer rather than its failure (see ``recordUpstream(_:answered:duration:)``).
    static func isAnswer(_ error: any Error) -> Bool {
        if error is ScopedNegativeAnswer { return true }
        guard let code = (error as? HTTPDNSError)?.code else { return false }
        return code.isNegativeAnswer || code == .serverFailure || code == .refused || code == .privateAddress
    }
}
