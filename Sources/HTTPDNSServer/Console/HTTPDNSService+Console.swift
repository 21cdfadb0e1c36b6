import Foundation
import HTTPDNSCore
import HTTPDNS

extension HTTPDNSService {
    /// The operator's endpoints, answered on the admin listener only: the metrics, the live picture made from them,
    /// the dashboard page that shows it (also at `/`) and the control calls.
    static let operatorEndpoints = Set(["metrics", "stats.json", "dashboard"]).union(controlEndpoints)

    /// The dashboard page, with headers that keep it to itself: its own inline script and style, requests to this
    /// listener only, never framed.
    static let dashboard = ServiceResponse(
        status: 200, contentType: "text/html; charset=utf-8",
        headers: [
            "Content-Security-Policy":
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
                + "frame-ancestors 'none'",
            "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store",
        ],
        body: DashboardPage.html)

    /// An operator's endpoint (the admin listener's): the metrics, `/stats.json`, the dashboard, the control calls.
    func operatorPlan(_ endpoint: String, method: String, target: RequestTarget, now: ContinuousClock.Instant) -> Plan {
        if Self.controlEndpoints.contains(endpoint) {
            return controlPlan(endpoint, method: method, target: target, now: now)
        }
        guard method == "GET" else {
            return Plan(
                endpoint: endpoint,
                work: .done(
                    .text(405, "method \(HostName.printable(method)) is not allowed here", headers: ["Allow": "GET"])))
        }
        switch endpoint {
        case "metrics": return metricsPlan(now: now)
        case "stats.json": return statsPlan(name: target.parameter("name"), now: now)
        default: return Plan(endpoint: endpoint, work: .done(Self.dashboard))
        }
    }

    /// `/metrics`: the exporter's text, rendered at most once a second.
    func metricsPlan(now: ContinuousClock.Instant) -> Plan {
        guard let text = exposition(now: now) else {
            return Plan(endpoint: "metrics", work: .done(.text(404, "no such endpoint")))
        }
        return Plan(
            endpoint: "metrics",
            work: .done(
                ServiceResponse(status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8", body: text)))
    }

    /// `/stats.json`: the live picture made from the same rendering `/metrics` serves; with `?name=`, how that
    /// name's addresses are ordered for the server and for each client network that reported.
    func statsPlan(name: String?, now: ContinuousClock.Instant) -> Plan {
        guard let text = exposition(now: now) else {
            return Plan(endpoint: "stats.json", work: .done(.text(404, "no such endpoint")))
        }
        var stats = ServiceStats(exposition: String(decoding: text, as: UTF8.self), time: Date().timeIntervalSince1970)
        stats.busiestNames = busyNames.top(10).map { .init(name: $0.name, requests: $0.requests, share: $0.share) }
        if let name, !name.isEmpty {
            guard let host = try? HostName(name) else {
                return Plan(
                    endpoint: "stats.json", work: .done(.text(400, "'\(HostName.printable(name))' is not a host name")))
            }
            stats.steering = steering(of: host)
        }
        return Plan(
            endpoint: "stats.json",
            work: .done(
                ServiceResponse(
                    status: 200, contentType: "application/json", headers: ["Cache-Control": "no-store"],
                    body: stats.json)))
    }

    /// The server's order of `host`'s cached addresses, and each reporting network's.
    func steering(of host: HostName) -> ServiceStats.Steering {
        // Both families when the cache holds them as one answer, else each family's as it was asked for.
        let cache = resolver.cache
        let both = cache?.rankedAddresses(for: host) ?? []
        let addresses =
            both.isEmpty
            ? (cache?.rankedAddresses(for: host, family: .ipv4) ?? [])
                + (cache?.rankedAddresses(for: host, family: .ipv6) ?? []) : both
        let networks = networkScores.networks(reporting: host.name).sorted { $0.description < $1.description }
        return ServiceStats.Steering(
            host: host.name,
            addresses: addresses.map {
                .init(
                    ip: $0.ip.description, rank: $0.rank, score: $0.score, latencyMilliseconds: $0.latencyMilliseconds)
            },
            networks: networks.compactMap { network in
                networkScores.order(addresses, host: host.name, network: network).map {
                    .init(network: network.description, order: $0.map(\.ip.description))
                }
            })
    }

    /// The metrics in the exposition format, rendered at most once a second however often they are asked for;
    /// `nil` without an exporter.
    private func exposition(now: ContinuousClock.Instant) -> [UInt8]? {
        guard let exporter else { return nil }
        return renderedMetrics.withLock { rendered -> [UInt8] in
            if let rendered, now - rendered.made < .seconds(1) { return rendered.text }
            let text = exporter()
            rendered = (text, now)
            return text
        }
    }
}
