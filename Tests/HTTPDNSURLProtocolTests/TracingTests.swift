import AsyncHTTPClient
import Foundation
import HTTPDNS
@testable import HTTPDNSURLProtocol
import InMemoryTracing
import NIOCore
import NIOHTTP1
import Testing
import TestSupport
import Tracing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Spans an application with a tracer sees: a client span per hop named by its method, as AsyncHTTPClient names
/// its own, under the caller's span, with `httpdns.resolve`, `httpdns.race` and `httpdns.attempt` under it, and no
/// attribute holding the URL's query or a header value.
@Suite("Tracing")
struct TracingTests {
    /// Every attribute of `span` as text.
    static func attributes(_ span: FinishedInMemorySpan) -> [String: String] {
        var values: [String: String] = [:]
        span.attributes.forEach { key, value in
            values[key] =
                switch value {
                case .string(let text): text
                case .int64(let number): "\(number)"
                case .int32(let number): "\(number)"
                case .bool(let flag): "\(flag)"
                default: "\(value)"
                }
        }
        return values
    }

    /// Whether any span of `spans` carries `secret` in a name or an attribute.
    static func leaks(_ secret: String, in spans: [FinishedInMemorySpan]) -> Bool {
        spans.contains { span in
            span.operationName.contains(secret) || attributes(span).values.contains { $0.contains(secret) }
        }
    }

    @Test("AsyncHTTPClient front: the hop under the caller's span, resolve and attempt under the hop; no query leaks")
    func asyncHTTPClientFront() async throws {
        let server = try await LocalHTTPServer(host: "127.0.0.91") { _ in .text("traced") }
        let tracer = InMemoryTracer()
        try await withCleanup { () async throws in
            let fixture = try HTTPDNSClientTests.Fixture { $0.tracer = tracer }
            try fixture.pin("api.test", to: "127.0.0.91")
            var request = HTTPClientRequest(url: "http://api.test:\(server.port)/items?token=s3cr3t-query")
            request.headers.add(name: "Authorization", value: "Bearer s3cr3t-header")
            try await tracer.withSpan("caller") { _ in
                let (status, body) = try await fixture.text(request)
                #expect(status == 200 && body == "traced")
            }
            let spans = tracer.finishedSpans
            let caller = try #require(spans.first { $0.operationName == "caller" })
            let hop = try #require(spans.first { $0.operationName == "GET" })
            #expect(hop.kind == .client && hop.parentSpanID == caller.spanID && hop.traceID == caller.traceID)
            let hopAttributes = Self.attributes(hop)
            #expect(hopAttributes["server.address"] == "api.test")
            #expect(hopAttributes["server.port"] == "\(server.port)")
            #expect(hopAttributes["url.path"] == "/items" && hopAttributes["url.scheme"] == "http")
            #expect(hopAttributes["network.peer.address"] == "127.0.0.91")
            #expect(hopAttributes["http.response.status_code"] == "200" && hopAttributes["httpdns.attempts"] == "1")
            let resolve = try #require(spans.first { $0.operationName == "httpdns.resolve" })
            #expect(resolve.parentSpanID == hop.spanID)
            #expect(Self.attributes(resolve)["httpdns.answer.freshness"] == "override")
            let attempt = try #require(spans.first { $0.operationName == "httpdns.attempt" })
            #expect(attempt.parentSpanID == hop.spanID)
            #expect(Self.attributes(attempt)["network.peer.address"] == "127.0.0.91")
            #expect(!Self.leaks("s3cr3t", in: spans), "a span holds the query or a header value")
            await fixture.shutdown()
        } cleanup: {
            await server.stop()
        }
    }

    @Test("a failover shows as two attempts, the first failed with its code; the hop counts both")
    func failover() async throws {
        let server = try await LocalHTTPServer(host: "127.0.0.93") { _ in .text("second") }
        let refusing = try TCPListener(ip: "127.0.0.92", port: UInt16(server.port), listening: false)
        defer { refusing.close() }
        let tracer = InMemoryTracer()
        try await withCleanup { () async throws in
            let fixture = try HTTPDNSClientTests.Fixture {
                $0.tracer = tracer
                $0.connectionAttemptDelay = .zero
            }
            try fixture.pin("api.test", to: "127.0.0.92", "127.0.0.93")
            let (status, _) = try await fixture.text(HTTPClientRequest(url: "http://api.test:\(server.port)/"))
            #expect(status == 200)
            let attempts = tracer.finishedSpans.filter { $0.operationName == "httpdns.attempt" }
            #expect(attempts.map { Self.attributes($0)["network.peer.address"] } == ["127.0.0.92", "127.0.0.93"])
            #expect(attempts.first?.status?.code == .error && Self.attributes(attempts[0])["error.type"] != nil)
            let hop = try #require(tracer.finishedSpans.first { $0.operationName == "GET" })
            #expect(Self.attributes(hop)["httpdns.attempts"] == "2" && hop.status?.code != .error)
            await fixture.shutdown()
        } cleanup: {
            await server.stop()
        }
    }

    @Test("URL protocol front: the same spans for a URLSession request")
    func urlProtocolFront() async throws {
        let server = try await LocalHTTPServer(host: "127.0.0.94") { _ in .text("via URLSession") }
        let tracer = InMemoryTracer()
        try await withCleanup { () async throws in
            let fixture = try ProtocolFixture { $0.connection.tracer = tracer }
            try fixture.pin("api.test", to: "127.0.0.94")
            let (data, _) = try await fixture.session.data(
                from: URL(string: "http://api.test:\(server.port)/page?session=s3cr3t")!)
            #expect(String(decoding: data, as: UTF8.self) == "via URLSession")
            let spans = tracer.finishedSpans
            let hop = try #require(spans.first { $0.operationName == "GET" })
            #expect(Self.attributes(hop)["network.peer.address"] == "127.0.0.94")
            #expect(spans.contains { $0.operationName == "httpdns.resolve" && $0.parentSpanID == hop.spanID })
            #expect(!Self.leaks("s3cr3t", in: spans))
            await fixture.shutdown()
        } cleanup: {
            await server.stop()
        }
    }

    @Test("no tracer bootstrapped: nothing is recorded and nothing is created")
    func noTracer() throws {
        let url = URL(string: "http://api.test/")!
        let spans = HopSpans(policy: ConnectionPolicy(), method: "GET", url: url, target: try #require(HopTarget(url)))
        #expect(!spans.isRecording && spans.child("x") == nil)
    }
}
