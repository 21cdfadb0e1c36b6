import Foundation
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore

/// The HTTP/2 DoH client against a real HTTP/2 server (swift-nio-http2 over TLS) whose behaviour each test scripts:
/// stream limits, GOAWAY, stalled and oversized answers, idle connections, and a server without HTTP/2.
@Suite("HTTP/2 DoH client")
struct HTTP2ClientTests {
    /// Runs `body` with a scripted server for `doh.test`, a transport trusting its CA, and a resolver for it.
    static func withServer(
        _ behaviour: LocalHTTP2DoHServer.Behaviour = .init(),
        method: HTTPDNSResolver.API.DoHMethod = .get,
        transport configuration: HTTPDNSTransport.Configuration = .init(
            requestTimeout: .seconds(30), connectTimeout: .seconds(30)),
        _ body: (LocalHTTP2DoHServer, HTTPDNSResolver) async throws -> Void
    ) async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        let server = try await LocalHTTP2DoHServer(
            certificate: try certificates.leaf(for: "doh.test"), behaviour: behaviour)
        var configuration = configuration
        configuration.additionalTrustRoots = [certificates.caPath]
        let transport = try HTTPDNSTransport(configuration: configuration)
        let resolver = try HTTPDNSResolver(
            configuration: .init(
                api: .dnsMessage(method: method),
                endpoints: [
                    try HTTPDNSEndpoint(
                        "https://doh.test:\(server.port)/dns-query", bootstrapAddresses: [IPAddress("127.0.0.1")!])
                ],
                allowNonPublicAddresses: true),
            transport: transport)
        try await withCleanup {
            try await body(server, resolver)
        } cleanup: {
            await transport.shutdown()
            await server.stop()
        }
    }

    static func lookUp(_ resolver: HTTPDNSResolver, _ names: [String]) async -> [String] {
        await withTaskGroup(of: String.self) { group in
            for name in names {
                group.addTask {
                    do {
                        let answer = try await resolver.resolve(try HostName(name), family: .ipv4)
                        return answer.addresses.map(\.ip.description).joined(separator: ",")
                    } catch let error as HTTPDNSError {
                        return "error: \(error.code) \(error.message)"
                    } catch {
                        return "error: \(error)"
                    }
                }
            }
            var results: [String] = []
            for await result in group { results.append(result) }
            return results
        }
    }

    @Test(
        "300 lookups at once share one connection and never exceed the server's stream limit",
        arguments: [
            HTTPDNSResolver.API.DoHMethod.get, .post,
        ])
    func manyStreams(method: HTTPDNSResolver.API.DoHMethod) async throws {
        var behaviour = LocalHTTP2DoHServer.Behaviour()
        behaviour.maxConcurrentStreams = 8
        behaviour.delay = .milliseconds(2)
        try await Self.withServer(behaviour, method: method) { server, resolver in
            let results = await Self.lookUp(resolver, (0..<300).map { "n\($0).test" })
            #expect(results == Array(repeating: "192.0.2.1", count: 300))
            #expect(server.connections == 1)
            #expect(server.streams == 300)
            #expect(server.peakConcurrentStreams <= 8)
            #expect(server.peakConcurrentStreams > 1, "the lookups were multiplexed")
        }
    }

    @Test("GOAWAY: streams the server will not answer go again on a new connection, and nothing fails")
    func goAway() async throws {
        var behaviour = LocalHTTP2DoHServer.Behaviour()
        behaviour.goAwayAfterStreams = 10
        behaviour.delay = .milliseconds(20)
        try await Self.withServer(behaviour) { server, resolver in
            // 25 at once against 10 streams per connection: the refused ones go again, up to three times.
            let results = await Self.lookUp(resolver, (0..<25).map { "n\($0).test" })
            #expect(results == Array(repeating: "192.0.2.1", count: 25))
            #expect(server.connections == 3)
            // After the server closed its side, later lookups open a fresh connection on their own.
            try await Task.sleep(for: .milliseconds(500))
            #expect(await Self.lookUp(resolver, ["late.test"]) == ["192.0.2.1"])
        }
    }

    @Test("GOAWAY while lookups wait for a stream slot: the waiting ones go again on a new connection at once")
    func goAwayWithQueuedStreams() async throws {
        var behaviour = LocalHTTP2DoHServer.Behaviour()
        behaviour.maxConcurrentStreams = 2
        behaviour.goAwayAfterStreams = 3
        behaviour.delay = .milliseconds(20)
        // Queued lookups must not wait for their 30 s timeout: the whole batch is answered well before it.
        try await Self.withServer(behaviour) { server, resolver in
            let started = ContinuousClock.now
            let results = await Self.lookUp(resolver, (0..<8).map { "q\($0).test" })
            #expect(results == Array(repeating: "192.0.2.1", count: 8), "\(results)")
            #expect(ContinuousClock.now - started < .seconds(20), "no lookup waited for its timeout")
            #expect(server.connections >= 3)
        }
    }

    @Test("a stream that is never answered times out alone; the connection keeps serving the others")
    func stalledStream() async throws {
        var behaviour = LocalHTTP2DoHServer.Behaviour()
        behaviour.stalled = ["stall.test"]
        // Short enough that the stalled stream times out soon, long enough that the answered streams make it while
        // the whole suite runs at once on two cores (1 s did not, in CI); scaled again for a sanitizer build.
        let configuration = HTTPDNSTransport.Configuration(
            requestTimeout: TestTiming.scaled(.seconds(4)), connectTimeout: .seconds(30))
        try await Self.withServer(behaviour, transport: configuration) { server, resolver in
            // The connection first, so the three streams below share it and only the exchange is timed.
            #expect(await Self.lookUp(resolver, ["warm.test"]) == ["192.0.2.1"])
            let results = await Self.lookUp(resolver, ["stall.test", "a.test", "b.test"])
            #expect(results.filter { $0 == "192.0.2.1" }.count == 2, "\(results)")
            #expect(results.contains { $0.hasPrefix("error: timeout") }, "\(results)")
            #expect(await Self.lookUp(resolver, ["c.test"]) == ["192.0.2.1"])
            #expect(server.connections == 1)
        }
    }

    @Test("an answer above the size cap fails with responseTooLarge; the connection stays usable")
    func oversized() async throws {
        var behaviour = LocalHTTP2DoHServer.Behaviour()
        behaviour.oversized = ["big.test": 200_000]
        let configuration = HTTPDNSTransport.Configuration(
            requestTimeout: .seconds(30), connectTimeout: .seconds(30), maximumResponseBytes: 4096)
        try await Self.withServer(behaviour, transport: configuration) { server, resolver in
            let results = await Self.lookUp(resolver, ["big.test"])
            #expect(results.count == 1 && results[0].hasPrefix("error: responseTooLarge"), "\(results)")
            #expect(await Self.lookUp(resolver, ["small.test"]) == ["192.0.2.1"])
            #expect(server.connections == 1)
        }
    }

    @Test("cancelling a lookup whose answer never comes ends it with CancellationError, not a timeout")
    func cancellation() async throws {
        var behaviour = LocalHTTP2DoHServer.Behaviour()
        behaviour.stalled = ["stall.test"]
        try await Self.withServer(behaviour) { server, resolver in
            let task = Task { try await resolver.resolve(try HostName("stall.test"), family: .ipv4) }
            let reached = try await waitUntil { server.streams == 1 }
            #expect(reached, "the stream reached the server")
            task.cancel()
            let result = await task.result
            #expect(throws: CancellationError.self) { try result.get() }
            #expect(await Self.lookUp(resolver, ["after.test"]) == ["192.0.2.1"])
        }
    }

    @Test(
        "on a ready connection a lookup needs no task until its answer: a cancelled one ends with CancellationError, and one the first endpoint leaves undecided goes on from there, the first asked once"
    )
    func readyConnectionPath() async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        var failing = LocalHTTP2DoHServer.Behaviour()
        failing.reset = ["broken.test": 2]  // INTERNAL_ERROR: not a refused stream, so not sent again there
        failing.stalled = ["stall.test"]
        let first = try await LocalHTTP2DoHServer(
            certificate: try certificates.leaf(for: "doh.test"), behaviour: failing)
        let second = try await LocalHTTP2DoHServer(certificate: try certificates.leaf(for: "doh.test"))
        let transport = try HTTPDNSTransport(
            configuration: .init(
                requestTimeout: .seconds(30), connectTimeout: .seconds(30),
                additionalTrustRoots: [certificates.caPath]))
        let resolver = try HTTPDNSResolver(
            configuration: .init(
                api: .dnsMessage(method: .get),
                endpoints: [first, second].map {
                    try! HTTPDNSEndpoint(
                        "https://doh.test:\($0.port)/dns-query", bootstrapAddresses: [IPAddress("127.0.0.1")!])
                },
                allowNonPublicAddresses: true),
            transport: transport)
        try await withCleanup { () async throws in
            // The first endpoint's connection, made by the tasks' path.
            #expect(await Self.lookUp(resolver, ["warm.test"]) == ["192.0.2.1"])
            #expect(resolver.prepareDoH(try HostName("x.test"), type: .a, subnet: nil) != nil, "a ready connection")
            #expect((first.streams, second.streams) == (1, 0))
            // Reset on the first endpoint: answered by the second, the first asked once.
            #expect(await Self.lookUp(resolver, ["broken.test"]) == ["192.0.2.1"])
            #expect((first.streams, second.streams) == (2, 1))
            // Cancelled while the first endpoint holds its stream: CancellationError, nothing sent elsewhere.
            let task = Task { try await resolver.resolve(try HostName("stall.test"), family: .ipv4) }
            #expect(try await waitUntil { first.streams == 3 }, "the stream reached the server")
            task.cancel()
            let result = await task.result
            #expect(throws: CancellationError.self) { try result.get() }
            #expect(second.streams == 1)
            #expect(await Self.lookUp(resolver, ["after.test"]) == ["192.0.2.1"])
            #expect((first.connections, first.streams, second.streams) == (1, 4, 1))
        } cleanup: {
            await transport.shutdown()
            await first.stop()
            await second.stop()
        }
    }

    /// A listener that takes TCP connections (the kernel's backlog) and never answers the TLS client hello, and a
    /// DoH resolver on a transport of its own asking it, with `timeout` for connecting and for each request.
    static func silentServer(timeout: Duration) throws -> (TCPListener, HTTPDNSTransport, HTTPDNSResolver) {
        let silent = try TCPListener(ip: "127.0.0.1", port: 0)
        let transport = try HTTPDNSTransport(configuration: .init(requestTimeout: timeout, connectTimeout: timeout))
        let resolver = try HTTPDNSResolver(
            configuration: .init(
                api: .dnsMessage(method: .get),
                endpoints: [
                    try HTTPDNSEndpoint(
                        "https://doh.test:\(silent.port)/dns-query", bootstrapAddresses: [IPAddress("127.0.0.1")!])
                ]),
            transport: transport)
        return (silent, transport, resolver)
    }

    @Test(
        "lookups waiting for a connection whose handshake never ends stop at once when cancelled; the attempt stays for the next caller"
    )
    func cancellationWhileConnecting() async throws {
        // The lookups must end on their cancellation, well before the attempt's timeout.
        let (silent, transport, resolver) = try Self.silentServer(timeout: .seconds(10))
        defer { silent.close() }
        try await withCleanup { () async throws in
            let first = Task { try await resolver.resolve(try HostName("a.test"), family: .ipv4) }
            #expect(try await waitUntil { transport.connectionsBeingSetUp == 1 }, "the first lookup is connecting")
            let second = Task { try await resolver.resolve(try HostName("b.test"), family: .ipv4) }
            first.cancel()
            second.cancel()
            for task in [first, second] {
                let result = await task.result
                #expect(throws: CancellationError.self) { try result.get() }
            }
            // Not failed by its timeout yet, so the lookups ended on their cancellation.
            #expect(transport.connectionsBeingSetUp == 1, "the attempt is still there for the next caller")
        } cleanup: {
            await transport.shutdown()
        }
    }

    @Test(
        "shutting down gives up a connection whose handshake never ends: its waiting lookups fail as shut down, not at its timeout",
        .timeLimit(.minutes(1))
    )
    func shutdownWhileConnecting() async throws {
        // Timeouts past the test's time limit: a lookup that waited them out would fail the test.
        let (silent, transport, resolver) = try Self.silentServer(timeout: .seconds(600))
        defer { silent.close() }
        // The lookups are child tasks, so that the time limit, if it is reached, cancels them and the test ends.
        let (codes, shutdown) = try await withThrowingTaskGroup(of: HTTPDNSError.Code?.self) { group in
            for index in 0..<3 {
                group.addTask {
                    do {
                        _ = try await resolver.resolve(try HostName("n\(index).test"), family: .ipv4)
                        return nil
                    } catch let error as HTTPDNSError {
                        return error.code
                    } catch {
                        return nil
                    }
                }
            }
            #expect(try await waitUntil { transport.connectionsBeingSetUp == 1 }, "the lookups wait for one attempt")
            let shutdown = Task { await transport.shutdown() }
            return (try await group.reduce(into: []) { $0.append($1) }, shutdown)
        }
        #expect(codes == [.shutdown, .shutdown, .shutdown])
        // Had the lookups waited out the attempt, so would the shutdown: it is not waited for then.
        guard codes == [.shutdown, .shutdown, .shutdown] else { return }
        await shutdown.value
        #expect(transport.connectionsBeingSetUp == 0)
        await #expect(throws: HTTPDNSError.self) {
            try await resolver.resolve(try HostName("late.test"), family: .ipv4)
        }
    }

    @Test("a stream the server resets fails alone with its error code named; the connection keeps serving")
    func serverResetsOneStream() async throws {
        var behaviour = LocalHTTP2DoHServer.Behaviour()
        behaviour.reset = ["broken.test": 2]  // INTERNAL_ERROR
        try await Self.withServer(behaviour) { server, resolver in
            #expect(await Self.lookUp(resolver, ["warm.test"]) == ["192.0.2.1"])
            let results = await Self.lookUp(resolver, ["a.test", "broken.test", "b.test"])
            #expect(results.filter { $0 == "192.0.2.1" }.count == 2, "\(results)")
            #expect(results.contains { $0.hasPrefix("error:") && $0.contains("INTERNAL_ERROR") }, "\(results)")
            #expect(await Self.lookUp(resolver, ["c.test"]) == ["192.0.2.1"])
            #expect(server.connections == 1)
        }
    }

    @Test("an informational response (103) before the answer is skipped; the final status and body are used")
    func informationalResponse() async throws {
        var behaviour = LocalHTTP2DoHServer.Behaviour()
        behaviour.informational = true
        for method in [HTTPDNSResolver.API.DoHMethod.get, .post] {
            try await Self.withServer(behaviour, method: method) { _, resolver in
                #expect(await Self.lookUp(resolver, ["early.test", "hints.test"]) == ["192.0.2.1", "192.0.2.1"])
            }
        }
    }

    @Test("an idle connection closes after idleConnectionTimeout; the next lookup opens a new one")
    func idleClose() async throws {
        let configuration = HTTPDNSTransport.Configuration(
            requestTimeout: .seconds(30), connectTimeout: .seconds(30), idleConnectionTimeout: .milliseconds(300))
        try await Self.withServer(transport: configuration) { server, resolver in
            #expect(await Self.lookUp(resolver, ["one.test"]) == ["192.0.2.1"])
            // One, or more when a loaded machine lets a new connection sit idle past 300 ms before its first stream
            // (the lookup then goes again on another one, as the result above shows).
            let before = server.connections
            #expect(before >= 1)
            try await Task.sleep(for: .milliseconds(1200))
            #expect(await Self.lookUp(resolver, ["two.test"]) == ["192.0.2.1"])
            #expect(server.connections > before, "the idle connection was closed and a new one opened")
        }
    }

    @Test("a TLS server that does not offer HTTP/2 in ALPN is asked over HTTP/1.1, SNI and certificate unchanged")
    func http1Fallback() async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        let names = Locked<[String?]>([])
        let answer = FakeHTTPDNS.dnsJSON()
        let server = try await LocalHTTPServer(tls: try certificates.leaf(for: "doh.test")) { request in
            names.withLock { $0.append(request.serverName) }
            return answer(request)
        }
        let transport = try HTTPDNSTransport(
            configuration: .init(
                requestTimeout: .seconds(30), connectTimeout: .seconds(30), additionalTrustRoots: [certificates.caPath])
        )
        let resolver = try HTTPDNSResolver(
            configuration: .init(
                api: .dnsJSON,
                endpoints: [
                    try HTTPDNSEndpoint(
                        "https://doh.test:\(server.port)/resolve", bootstrapAddresses: [IPAddress("127.0.0.1")!])
                ],
                allowNonPublicAddresses: true),
            transport: transport)
        let first = try await resolver.resolve(try HostName("v4only.test"), family: .ipv4)
        let second = try await resolver.resolve(try HostName("v4only.test"), family: .ipv4)
        #expect(first.addresses.map(\.ip.description) == ["192.0.2.10"])
        #expect(second.addresses.map(\.ip.description) == ["192.0.2.10"])
        #expect(names.withLock { $0 } == ["doh.test", "doh.test"])
        // One connection refused for want of h2, then one HTTP/1.1 connection kept for both lookups.
        #expect(server.connections == 2)
        await transport.shutdown()
        await server.stop()
    }
}
