import Foundation
import HTTPDNSCore
import Tracing

/// The server span of one request, for OpenTelemetry export (`hostsctl serve` with `otel.endpoint` set).
///
/// Made when the answer is known, with the start the request had: nothing is allocated for it while the request is
/// answered, and nothing at all without a tracer. Named by the endpoint (`dns-query`, `resolve`, `d`, …: few names,
/// as span names should be), with these attributes:
///
/// - `dns.transport`: `http`, `https`, `udp`, `tcp` or `tls`;
/// - `dns.question.name`: the name asked, when there is one;
/// - `http.response.status_code`: the status (DNS transports answer with their HTTP equivalent, as in the metrics);
/// - `dns.outcome`: `answered` (below 400), `rejected` (4xx: malformed, refused, rate-limited) or `failed` (5xx);
/// - `dns.cache`: `hit` when the answer came at once from a local layer or the cache, `miss` when it waited for an
///   upstream (only for answers with a name);
/// - `client.network`: the client's network, as the access log writes it (`203.0.113.0/24`, `2001:db8:1::/48`, or
///   coarser when `serve.clientPrefixV4` or `serve.clientPrefixV6` is): never the client's full address, and never
///   a credential (no URL, header or signature is recorded).
enum ServiceSpan {
    static func record(
        _ request: ServiceRequest, plan: HTTPDNSService.Plan, status: Int, duration: Duration, waited: Bool?,
        prefixes: ClientPrefixes, tracer: any Tracer
    ) {
        let end = DefaultTracerClock.now
        let elapsed = UInt64(max(duration.wholeNanoseconds, 0))
        let start = DefaultTracerClock.Timestamp(
            nanosecondsSinceEpoch: end.nanosecondsSinceEpoch - min(elapsed, end.nanosecondsSinceEpoch))
        let span = tracer.startSpan(plan.endpoint, context: .topLevel, ofKind: .server, at: start)
        var attributes = SpanAttributes()
        attributes["dns.transport"] = request.transport.rawValue
        if let name = plan.name { attributes["dns.question.name"] = HostName.printable(name) }
        attributes["http.response.status_code"] = status
        attributes["dns.outcome"] = status < 400 ? "answered" : status < 500 ? "rejected" : "failed"
        if let waited, plan.name != nil, status < 500 { attributes["dns.cache"] = waited ? "miss" : "hit" }
        if let network = network(of: request.client, prefixes: prefixes) { attributes["client.network"] = network }
        span.attributes = attributes
        if status >= 500 { span.setStatus(SpanStatus(code: .error)) }
        span.end(at: end)
    }

    /// `client` cut to its network: at most /24 for IPv4 and /48 for IPv6, as the access log, or the configured
    /// client prefix when that is shorter.
    static func network(of client: IPAddress?, prefixes: ClientPrefixes) -> String? {
        guard let client else { return nil }
        let length = client.family == .ipv4 ? min(prefixes.ipv4, 24) : min(prefixes.ipv6, 48)
        return IPNetwork("\(client)/\(length)")?.description
    }
}
