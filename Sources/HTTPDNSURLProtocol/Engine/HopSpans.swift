import Foundation
import HTTPDNS
import Tracing
import HTTPDNSCore

/// The spans of one hop (swift-distributed-tracing), following AsyncHTTPClient's conventions for its own: the hop is
/// a client span named by its method with OpenTelemetry's HTTP attributes (`http.request.method`, `server.address`,
/// `server.port`, `url.scheme`, `url.path`, `http.response.status_code`, `network.peer.address`), a child of the
/// caller's span when the caller's task has one. Under it: `httpdns.resolve` (where the answer came from, how many
/// addresses, whether synthesized under NAT64), `httpdns.race` (the connection race and its winner) and one
/// `httpdns.attempt` per address tried (the address, and the error when it failed). The URL's query, its user and
/// password, and header values are never attributes: they may hold credentials.
///
/// With no tracer (the process's `InstrumentationSystem` not bootstrapped, the default) nothing is created.
struct HopSpans: Sendable {
    private let tracer: (any Tracer)?
    private let span: (any Span)?

    /// No spans.
    static let none = HopSpans(tracer: nil, span: nil)

    private init(tracer: (any Tracer)?, span: (any Span)?) {
        self.tracer = tracer
        self.span = span
    }

    /// Starts the hop's span, under the calling task's span if any.
    init(policy: ConnectionPolicy, method: String, url: URL, target: HopTarget) {
        // Most processes bootstrap no instrument: a look at its type is cheaper than finding a tracer in it.
        if policy.tracer == nil, type(of: InstrumentationSystem.instrument) == NoOpInstrument.self {
            self.init(tracer: nil, span: nil)
            return
        }
        let tracer = policy.tracer ?? InstrumentationSystem.tracer
        guard !(tracer is NoOpTracer) else {
            self.init(tracer: nil, span: nil)
            return
        }
        let span = tracer.startSpan(method, ofKind: .client)
        span.attributes["http.request.method"] = method
        span.attributes["server.address"] = target.host
        span.attributes["server.port"] = target.port
        span.attributes["url.scheme"] = url.scheme?.lowercased()
        span.attributes["url.path"] = url.path.isEmpty ? "/" : url.path
        self.init(tracer: tracer, span: span)
    }

    /// Whether spans are recorded.
    var isRecording: Bool { span != nil }

    /// A child span of the hop; `nil` when not recording.
    func child(_ name: String, ofKind kind: SpanKind = .internal) -> (any Span)? {
        guard let tracer, let span else { return nil }
        return tracer.startSpan(name, context: span.context, ofKind: kind)
    }

    /// Ends the resolve span with what the answer was.
    static func endResolve(_ span: (any Span)?, _ answer: RankedResolution?, error: (any Error)?) {
        guard let span else { return }
        if let answer {
            span.attributes["httpdns.answer.freshness"] = answer.freshness.rawValue
            span.attributes["httpdns.answer.origin"] = answer.origin.name
            span.attributes["httpdns.answer.addresses"] = answer.addresses.count
            span.attributes["httpdns.answer.synthesized"] = answer.addresses.contains { $0.isSynthesized }
        }
        if let error { fail(span, error) }
        span.end()
    }

    /// Ends an attempt's span: the address it went to and, when it failed, why.
    static func endAttempt(_ span: (any Span)?, address: IPAddress?, error: HTTPDNSError?) {
        guard let span else { return }
        if let address { span.attributes["network.peer.address"] = address.description }
        if let error { fail(span, error) }
        span.end()
    }

    /// Ends the hop's span with what the hop did.
    func end(_ hop: RequestTrace.Hop, error: (any Error)?) {
        guard let span else { return }
        if let address = hop.address { span.attributes["network.peer.address"] = address.description }
        if let status = hop.status { span.attributes["http.response.status_code"] = status }
        span.attributes["httpdns.attempts"] = hop.failedAttempts.count + (hop.status == nil ? 0 : 1)
        span.attributes["httpdns.raced"] = hop.raced
        if let freshness = hop.freshness { span.attributes["httpdns.answer.freshness"] = freshness.rawValue }
        if let origin = hop.synthesizedFrom { span.attributes["httpdns.synthesized_from"] = origin.description }
        if let error { Self.fail(span, error) }
        span.end()
    }

    /// Marks `span` failed with the error's code only: an error's description may quote the URL, query included,
    /// so it is not recorded.
    private static func fail(_ span: any Span, _ error: any Error) {
        let code = (error as? HTTPDNSError)?.code.description ?? "\(type(of: error))"
        span.attributes["error.type"] = code
        span.setStatus(SpanStatus(code: .error, message: code))
    }
}
