import AsyncHTTPClient
import Foundation
import HTTPDNS
@testable import HTTPDNSURLProtocol
import NIOCore
import NIOHTTP1
import Testing
import TestSupport

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The request a connection race ran for goes out on the connection the race won: each address is dialled once.
/// Every lab has a blackholed address ranked first (its connect never completes) and a live one behind it, so the
/// live one wins the race after the attempt delay; the live server counts the connections it accepted.
@Suite("Raced connections", .serialized)
struct RacedConnectionTests {
    @Test(
        "a raced HTTPS request is sent on the race's connection with the real host's SNI and Host: the winner is dialled once"
    )
    func httpsOnTheWinner() async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        let live = try await LocalHTTPServer(
            host: "127.0.0.170", tls: try certificates.leaf(for: "api.test"), handler: echo)
        try await withCleanup { () async throws in
            let blackhole = try BlackholeListener(ip: "127.0.0.171", port: UInt16(live.port))
            defer { blackhole.close() }
            let fixture = try ProtocolFixture {
                $0.connection.additionalTrustRoots = [certificates.caPath]
                $0.connection.connectTimeout = TestTiming.scaled(.seconds(3))
            }
            try fixture.pin("api.test", to: "127.0.0.171", "127.0.0.170")
            var request = URLRequest(url: URL(string: "https://api.test:\(live.port)/upload?x=1")!)
            request.httpMethod = "POST"
            request.httpBody = Data("hello".utf8)
            let (data, response) = try await fixture.session.data(for: request)
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(
                text(data).hasPrefix("POST /upload host=api.test:\(live.port) sni=api.test ip=127.0.0.170 "),
                "\(text(data))")
            #expect(text(data).hasSuffix(" body=5"))
            let hop = try #require(fixture.traces.last?.hops.first)
            #expect(hop.raced && hop.address == IPAddress("127.0.0.170") && hop.failedAttempts.isEmpty)
            #expect(live.connections == 1, "the race's connection carried the request")
            #expect(try await waitUntil { live.closedConnections == 1 }, "and closed after its one exchange")

            // The blackholed attempt ends at its connect timeout and backs off; from then on the live address is the
            // proven best whatever its measured connect time (on a loaded machine it can exceed the 250 ms assumed
            // for an unmeasured address, which would otherwise rank the blackhole first and race again).
            #expect(
                try await waitUntil {
                    let ranked = try? await fixture.resolver.resolveRanked("api.test")
                    return ranked?.addresses.contains { $0.ip == IPAddress("127.0.0.171") && $0.failures > 0 } ?? false
                })
            // The raced connection carried one exchange; the next request goes through the pinned client.
            let (again, _) = try await fixture.session.data(
                for: URLRequest(url: URL(string: "https://api.test:\(live.port)/next")!))
            #expect(text(again).hasPrefix("GET /next host=api.test:\(live.port) sni=api.test "))
            #expect(fixture.traces.last?.hops.first?.raced == false)
            await fixture.shutdown()
        } cleanup: {
            await live.stop()
        }
    }

    @Test(
        "a server that speaks only HTTP/2 answers the race's HTTP/1.1 request with its preface: the request dials again and gets h2"
    )
    func http2OnlyServer() async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        let server = try await LocalHTTP2DoHServer(certificate: try certificates.leaf(for: "h2only.test"))
        try await withCleanup { () async throws in
            let blackhole = try BlackholeListener(ip: "127.0.0.178", port: UInt16(server.port))
            defer { blackhole.close() }
            let fixture = try ProtocolFixture {
                $0.connection.additionalTrustRoots = [certificates.caPath]
                $0.connection.connectTimeout = TestTiming.scaled(.seconds(3))
            }
            try fixture.pin("h2only.test", to: "127.0.0.178", "127.0.0.1")
            // Without a `dns` parameter the DoH server answers 400: an answer all the same.
            let url = URL(string: "https://h2only.test:\(server.port)/dns-query")!
            let (_, response) = try await fixture.session.data(for: URLRequest(url: url))
            #expect((response as? HTTPURLResponse)?.statusCode == 400)
            let hop = try #require(fixture.traces.last?.hops.first)
            #expect(hop.raced && hop.address == IPAddress("127.0.0.1") && hop.failedAttempts.isEmpty)
            // NIOSSL's server goes on without ALPN when the client offers only http/1.1, then sends its SETTINGS.
            #expect(server.connections == 2, "the race's connection, then the pinned client's")
            await fixture.shutdown()
        } cleanup: {
            await server.stop()
        }
    }

    @Test("a certificate for another name on the race's connection is rejected, and nothing is sent elsewhere")
    func certificateRejectedOnTheWinner() async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        let live = try await LocalHTTPServer(
            host: "127.0.0.172", tls: try certificates.leaf(for: "other.test"), handler: echo)
        try await withCleanup { () async throws in
            let blackhole = try BlackholeListener(ip: "127.0.0.173", port: UInt16(live.port))
            defer { blackhole.close() }
            let fixture = try ProtocolFixture {
                $0.connection.additionalTrustRoots = [certificates.caPath]
                $0.connection.connectTimeout = TestTiming.scaled(.seconds(3))
            }
            try fixture.pin("api.test", to: "127.0.0.173", "127.0.0.172")
            let error = await #expect(throws: URLError.self) {
                try await fixture.session.data(for: URLRequest(url: URL(string: "https://api.test:\(live.port)/")!))
            }
            #expect(error.flatMap { HTTPDNSError($0) }?.code == .certificateRejected)
            let hop = try #require(fixture.traces.last?.hops.first)
            #expect(hop.raced && hop.failedAttempts.count == 1)
            #expect(live.connections == 1, "the rejected certificate was not asked for again")
            await fixture.shutdown()
        } cleanup: {
            await live.stop()
        }
    }

    @Test(
        "the AsyncHTTPClient front streams a raced answer with back-pressure; a stalled raced answer ends at its deadline"
    )
    func streamedOnTheWinner() async throws {
        let size = 2 << 20
        let live = try await LocalHTTPServer(host: "127.0.0.174") { request in
            switch request.path {
            case "/stall": .stall
            default: .respond(status: 200, contentType: nil, body: [UInt8](repeating: 7, count: size))
            }
        }
        try await withCleanup { () async throws in
            let blackhole = try BlackholeListener(ip: "127.0.0.175", port: UInt16(live.port))
            defer { blackhole.close() }
            let fixture = try HTTPDNSClientTests.Fixture()
            try fixture.pin("big.test", to: "127.0.0.175", "127.0.0.174")
            try fixture.pin("stall.test", to: "127.0.0.175", "127.0.0.174")

            let response = try await fixture.client.execute(
                HTTPClientRequest(url: "http://big.test:\(live.port)/big"), timeout: .seconds(30))
            #expect(response.status == .ok)
            // A slow reader first: the connection stops being read while the reader is behind, and resumes.
            var read = 0
            var parts = 0
            for try await part in response.body {
                read += part.readableBytes
                parts += 1
                if parts <= 5 { try await Task.sleep(for: .milliseconds(20)) }
            }
            #expect(read == size)
            #expect(try await waitUntil { fixture.traces.count == 1 })
            #expect(fixture.traces.first?.hops.first?.raced == true)
            #expect(fixture.traces.first?.bytes == size)
            #expect(live.connections == 1, "the race's connection carried the request")

            // Another host, so another race: its answer stalls after the head and runs into the request's time
            // (which the race's 250 ms attempt delay, on a loaded machine more, comes out of).
            let stalled = try await fixture.client.execute(
                HTTPClientRequest(url: "http://stall.test:\(live.port)/stall"), timeout: .seconds(3))
            let late = await #expect(throws: HTTPDNSError.self) {
                _ = try await stalled.body.collect(upTo: 1 << 20)
            }
            #expect(late?.code == .timeout)
            #expect(live.connections == 2)
            await fixture.shutdown()
        } cleanup: {
            await live.stop()
        }
    }
}
