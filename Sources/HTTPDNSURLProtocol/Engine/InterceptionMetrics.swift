import CoreMetrics
import HTTPDNSCore

/// The swift-metrics instruments of both fronts (they count the same things).
final class InterceptionMetrics: Sendable {
    let succeeded: Counter
    let failovers: Counter
    let races: Counter
    let redirects: Counter
    private let factory: any MetricsFactory

    init(factory: any MetricsFactory) {
        self.factory = factory
        succeeded = Counter(label: "httpdns_intercepted_requests", dimensions: [("outcome", "ok")], factory: factory)
        failovers = Counter(label: "httpdns_failovers", factory: factory)
        races = Counter(label: "httpdns_connection_races", factory: factory)
        redirects = Counter(label: "httpdns_redirects", factory: factory)
    }

    func failed(_ code: HTTPDNSError.Code) {
        Counter(label: "httpdns_intercepted_requests", dimensions: [("outcome", code.description)], factory: factory)
            .increment()
    }
}
