import Foundation
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore

/// `HTTPDNSResolver.resolveAll`: many names as one batch on the HTTP/2 connection, against dnsdist (every result
/// the same as `resolve` gives) and against the scripted HTTP/2 server (windows, stream limits, GOAWAY, stalls,
/// resets, cancellation).
@Suite("DoH lookups in batches")
struct DoHBatchTests {
    /// The addresses of each result, or its error code.
    static func outcomes(_ results: [Result<Resolution, HTTPDNSError>]) -> [String] {
        results.map { result in
            switch result {
            case .success(let resolution): resolution.addresses.map(\.ip.description).sorted().joined(separator: ",")
            case .failure(let error): "error: \(error.code)"
            }
        }
    }

    @Test(
        "against dnsdist every batch result is the one resolve gives: addresses, both families, NXDOMAIN, no data, the guard",
        arguments: [AddressFamily.ipv4, .ipv6, .any])
    func sameAsResolve(family: AddressFamily) async throws {
        try await DoHResolverTests.withDoH(tlsName: "doh.test") { _, dnsdist, transport in
            let doh = try DoHResolverTests.doh(
                try #require(dnsdist.httpsURL), bootstrap: ["127.0.0.1"], transport: transport)
            // n*.test answer 10.1.x.y, which the private-address guard rejects: asked again one by one, as resolve
            // would ask, and rejected there too.
            let names =
                [
                    "multi.test", "v4only.test", "v6only.test", "alias.test", "nosuch.test", "dangling.test",
                    "multi.test",
                ]
                + (0..<5).map { "n\($0).test" }
            let hosts = try names.map { try HostName($0) }
            let batch = Self.outcomes(try await doh.resolveAll(hosts, family: family, maximumInFlight: 4))
            var single: [Result<Resolution, HTTPDNSError>] = []
            for host in hosts {
                do {
                    single.append(.success(try await doh.resolve(host, family: family)))
                } catch let error as HTTPDNSError {
                    single.append(.failure(error))
                }
            }
            #expect(batch == Self.outcomes(single))
            #expect(batch.count == names.count)
            #expect(batch[0] != "" && !batch[0].hasPrefix("error"), "\(batch)")
            #expect(batch[7] == (family == .ipv6 ? "error: noData" : "error: privateAddress"), "\(batch)")
        }
    }

    @Test("1,000 names through dnsdist in one call: every answer right and in order")
    func manyThroughDNSDist() async throws {
        try await DoHResolverTests.withDoH(tlsName: "doh.test") { _, dnsdist, transport in
            let doh = try DoHResolverTests.doh(
                try #require(dnsdist.httpsURL), bootstrap: ["127.0.0.1"], allowNonPublic: true, transport: transport)
            let indices = (0..<1000).map { ($0 * 7) % TestZone.bulkNames }
            let hosts = try indices.map { try HostName("n\($0).test") }
            let results = Self.outcomes(try await doh.resolveAll(hosts, family: .ipv4))
            #expect(results == indices.map { TestZone.bulkAddress($0) })
        }
    }

    @Test(
        "the window bounds the streams open at once, and the server's stream limit bounds them below it",
        arguments: [HTTPDNSResolver.API.DoHMethod.get, .post])
    func window(method: HTTPDNSResolver.API.DoHMethod) async throws {
        var behaviour = LocalHTTP2DoHServer.Behaviour()
        behaviour.delay = .milliseconds(2)
        try await HTTP2ClientTests.withServer(behaviour, method: method) { server, resolver in
            let hosts = try (0..<300).map { try HostName("n\($0).test") }
            let results = Self.outcomes(try await resolver.resolveAll(hosts, family: .ipv4, maximumInFlight: 6))
            #expect(results == Array(repeating: "192.0.2.1", count: 300))
            #expect(server.connections == 1)
            #expect(server.streams == 300)
            #expect(server.peakConcurrentStreams <= 6)
            #expect(server.peakConcurrentStreams > 1, "the batch was multiplexed")
        }
        behaviour.maxConcurrentStreams = 4
        try await HTTP2ClientTests.withServer(behaviour, method: method) { server, resolver in
            let hosts = try (0..<100).map { try HostName("m\($0).test") }
            let results = Self.outcomes(try await resolver.resolveAll(hosts, family: .any, maximumInFlight: 50))
            #expect(results == Array(repeating: "192.0.2.1", count: 100))
            #expect(server.streams == 200, "A and AAAA for each name")
            #expect(server.peakConcurrentStreams <= 4)
        }
    }

    @Test("a stalled stream times out, a reset one fails: each is asked again alone and fails alone; the rest answer")
    func failuresAskedAgain() async throws {
        var behaviour = LocalHTTP2DoHServer.Behaviour()
        behaviour.stalled = ["stall.test"]
        behaviour.reset = ["broken.test": 2]
        let configuration = HTTPDNSTransport.Configuration(
            requestTimeout: TestTiming.scaled(.seconds(2)), connectTimeout: .seconds(30))
        try await HTTP2ClientTests.withServer(behaviour, transport: configuration) { server, resolver in
            let names = ["a.test", "stall.test", "b.test", "broken.test", "c.test"]
            let results = Self.outcomes(
                try await resolver.resolveAll(try names.map { try HostName($0) }, family: .ipv4))
            #expect(
                results == ["192.0.2.1", "error: timeout", "192.0.2.1", "error: connectionLost", "192.0.2.1"],
                "\(results)")
            // Five in the batch, then the two failures once more each.
            #expect(server.streams == 7)
            #expect(server.connections == 1)
        }
    }

    @Test("GOAWAY in the middle of a batch: what the server will not answer is asked on a new connection")
    func goAway() async throws {
        var behaviour = LocalHTTP2DoHServer.Behaviour()
        behaviour.goAwayAfterStreams = 10
        behaviour.delay = .milliseconds(5)
        try await HTTP2ClientTests.withServer(behaviour) { server, resolver in
            let hosts = try (0..<40).map { try HostName("g\($0).test") }
            let results = Self.outcomes(try await resolver.resolveAll(hosts, family: .ipv4, maximumInFlight: 8))
            #expect(results == Array(repeating: "192.0.2.1", count: 40), "\(results)")
            #expect(server.connections >= 2)
        }
    }

    @Test("cancelling a batch ends it at once with CancellationError; the connection keeps serving")
    func cancellation() async throws {
        var behaviour = LocalHTTP2DoHServer.Behaviour()
        behaviour.stalled = ["stall.test"]
        try await HTTP2ClientTests.withServer(behaviour) { server, resolver in
            let hosts = try ["a.test", "stall.test", "b.test"].map { try HostName($0) }
            let task = Task { try await resolver.resolveAll(hosts, family: .ipv4) }
            let reached = try await waitUntil { server.streams == 3 }
            #expect(reached, "the batch's streams reached the server")
            task.cancel()
            let result = await task.result
            #expect(throws: CancellationError.self) { try result.get() }
            let after = Self.outcomes(try await resolver.resolveAll([try HostName("after.test")], family: .ipv4))
            #expect(after == ["192.0.2.1"])
            #expect(server.connections == 1)
        }
    }

    @Test("an empty list answers at once; a resolver without HTTP/2 asks each name with resolve")
    func emptyAndHTTP1() async throws {
        try await HTTP2ClientTests.withServer { server, resolver in
            let empty = try await resolver.resolveAll([], family: .any)
            #expect(empty.isEmpty)
            #expect(server.connections == 0)
        }
        try await DoHResolverTests.withDoH { _, dnsdist, transport in
            // Plain http: no HTTP/2 connection, so each name goes through resolve.
            let doh = try DoHResolverTests.doh(
                "http://doh.test:\(dnsdist.httpPort)/dns-query", bootstrap: ["127.0.0.1"], transport: transport)
            let results = Self.outcomes(
                try await doh.resolveAll(
                    try ["multi.test", "nosuch.test"].map { try HostName($0) }, family: .ipv4, maximumInFlight: 1))
            #expect(results == [TestZone.multiV4.joined(separator: ","), "error: notFound"])
        }
    }
}
