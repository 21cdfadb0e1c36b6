#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Foundation
import HTTPDNS
import HTTPDNSURLProtocol
import Synchronization
import Testing
import TestSupport
import HTTPDNSPinnedClients

/// A resolver with run-time overrides (and optionally a c-ares upstream), an interceptor installed into a session
/// of its own, and the traces of every request.
///
/// The interceptor is process-wide (URLProtocol classes carry no per-session state), so the suites that use a
/// fixture run serialized.
final class ProtocolFixture: Sendable {
    let overrides = HostOverrides()
    let resolver: HostResolver
    let interceptor: HTTPDNSInterceptor
    let session: URLSession
    let cookies: HTTPCookieStorage
    private let cares: CAresResolver?

    init(
        dnsServer: ServerAddress? = nil,
        configure: (inout HTTPDNSInterceptor.Configuration) -> Void = { _ in }
    ) throws {
        var upstreams: [HostResolver.Upstream] = []
        if let dnsServer {
            let cares = try CAresResolver(configuration: .init(servers: [dnsServer], timeout: .seconds(1)))
            upstreams.append(HostResolver.Upstream(name: "cares", kind: .cares, resolver: cares))
            self.cares = cares
        } else {
            self.cares = nil
        }
        resolver = HostResolver(upstreams: upstreams, overrides: overrides, cache: HostCache(), prober: nil)
        cookies = HTTPCookieStorage.sharedCookieStorage(
            forGroupContainerIdentifier: "httpdns-tests-\(UUID().uuidString)")
        cookies.cookieAcceptPolicy = .always
        var configuration = HTTPDNSInterceptor.Configuration(cookieStorage: cookies)
        // Live loopback servers must never miss the connect timeout. A loaded 2-core CI machine once took more than
        // 2 s to see a loopback connect complete (its event loop busy with a parallel test's flood), so the fixture
        // gives 10 s, scaled for sanitizer runs. Tests about timeouts set their own.
        configuration.connection.connectTimeout = TestTiming.scaled(.seconds(10))
        let recorded = TraceLog()
        configuration.connection.traceHandler = { trace in recorded.append(trace) }
        configure(&configuration)
        interceptor = try HTTPDNSInterceptor(resolver: resolver, configuration: configuration)
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        HTTPDNSURLProtocol.install(interceptor, into: sessionConfiguration)
        session = URLSession(configuration: sessionConfiguration)
        traceLog = recorded
    }

    private let traceLog: TraceLog

    /// A configuration like the fixture session's (protocol first, same interceptor).
    func sessionConfiguration() -> URLSessionConfiguration {
        let configuration = URLSessionConfiguration.ephemeral
        HTTPDNSURLProtocol.install(interceptor, into: configuration)
        return configuration
    }

    /// Every trace so far.
    var traces: [RequestTrace] { traceLog.all }

    /// Points `host` at `addresses` through a run-time override.
    func pin(_ host: String, to addresses: String...) throws {
        overrides.set(addresses.compactMap(IPAddress.init), for: try HostPattern(host))
    }

    func shutdown() async {
        session.finishTasksAndInvalidate()
        await interceptor.shutdown()
        await resolver.shutdown()
        cares?.shutdown()
        for cookie in cookies.cookies ?? [] { cookies.deleteCookie(cookie) }
    }
}

/// The traces an interceptor reported.
final class TraceLog: Sendable {
    private let traces = Locked<[RequestTrace]>([])
    func append(_ trace: RequestTrace) { traces.withLock { $0.append(trace) } }
    var all: [RequestTrace] { traces.withLock { $0 } }
}

/// What test servers saw, in order.
final class EventLog: Sendable {
    private let events = Locked<[String]>([])
    func add(_ event: String) { events.withLock { $0.append(event) } }
    func reset() { events.withLock { $0.removeAll() } }
    var all: [String] { events.withLock { $0 } }
}

/// Runs `body`, failing the test if it takes longer than `limit` (the package's own time limit helper).
func withTimeLimit<T: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withTimeLimit(limit, orThrow: TimeLimitExceeded(limit: limit), body)
}

struct TimeLimitExceeded: Error, CustomStringConvertible {
    var limit: Duration
    var description: String { "did not finish within \(limit)" }
}

/// The body as text.
func text(_ data: Data) -> String { String(decoding: data, as: UTF8.self) }

/// A handler that answers with the request as `METHOD path host=HOST sni=SNI ip=IP cookie=COOKIE body=N`.
let echo: @Sendable (LocalHTTPServer.Request) -> LocalHTTPServer.Reply = { request in
    .text(
        "\(request.method) \(request.path) host=\(request.headers["host"] ?? "-") sni=\(request.serverName ?? "-") "
            + "ip=\(request.serverAddress) cookie=\(request.headers["cookie"] ?? "-") "
            + "auth=\(request.headers["authorization"] ?? "-") tag=\(request.headers["x-httpdns-handled"] ?? "-") "
            + "body=\(request.body.count)"
    )
}
