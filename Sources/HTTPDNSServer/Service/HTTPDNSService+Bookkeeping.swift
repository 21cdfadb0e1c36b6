import HTTPDNS
import Logging

extension HTTPDNSService {
    /// Counts the request, writes its access log line and, with a tracer, its span. `waited` says whether the answer
    /// waited for an upstream (a cache miss) or came at once from a local layer or the cache; `nil`: not known.
    func finished(
        _ request: ServiceRequest, plan: Plan, response: ServiceResponse, started: ContinuousClock.Instant,
        waited: Bool?
    ) {
        let duration = ContinuousClock.now - started
        metrics.record(endpoint: plan.endpoint, status: response.status, duration: duration)
        // What a client was told, for the endpoints that answer names (whatever their HTTP status). The endpoint
        // names are small strings, compared without hashing: this runs for every request.
        let outcome = Self.answers(plan.endpoint) ? Self.outcome(response, over: request.transport) : nil
        // Queries by transport, and spans, are the public listeners' requests, not the operator's scrapes.
        if request.listener == .service {
            if let outcome { metrics.answered(outcome) }
            if let tracer {
                ServiceSpan.record(
                    request, plan: plan, status: response.status, duration: duration, waited: waited,
                    prefixes: configuration.clientPrefixes, tracer: tracer)
            }
            metrics.received(over: request.transport)
            if let name = plan.name { busyNames.observe(name) }
        }
        logger.info(
            "request",
            metadata: [
                "transport": "\(request.transport.rawValue)",
                "endpoint": "\(plan.endpoint)", "method": "\(HostName.printable(request.method))",
                "status": "\(response.status)", "rcode": "\(outcome?.rawValue ?? "-")",
                "name": "\(plan.name.map(HostName.printable) ?? "-")",
                "client": "\(clientText(request.client))", "ms": "\(duration.fractionalMilliseconds)",
            ])
    }

    /// What the client was told, as `DNSTransportWire.message(for:query:overUDP:)` sends it: over UDP a rate-limited
    /// query (429) is dropped and one the upstream queue turns away (503) gets a truncated reply that sends it to TCP,
    /// neither of them an answer (the TCP retry is counted when it is answered); `nil` for those.
    static func outcome(_ response: ServiceResponse, over transport: ServiceRequest.Transport) -> AnswerOutcome? {
        if transport == .udp, response.status == 429 || response.status == 503 { return nil }
        return AnswerOutcome(response)
    }

    /// Whether `endpoint`'s answers are DNS outcomes (`AnswerOutcome`); the rest serve the operator or take
    /// reports.
    static func answers(_ endpoint: String) -> Bool {
        endpoint == "dns-query" || endpoint == "resolve" || endpoint == "alibaba" || endpoint == "tencent"
    }

    func clientText(_ client: IPAddress?) -> String {
        guard let client else { return "-" }
        if configuration.logFullClientAddresses { return client.description }
        var bytes = client.bytes
        let kept = bytes.count == 4 ? 3 : 6
        for index in kept..<bytes.count { bytes[index] = 0 }
        return "\(IPAddress(bytes: bytes)?.description ?? "-")/\(kept * 8)"
    }
}
