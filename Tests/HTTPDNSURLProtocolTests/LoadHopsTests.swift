#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Foundation
import HTTPDNS
import HTTPDNSURLProtocol
import NIOCore
import NIOPosix
import Synchronization
import Testing
import TestSupport

/// Where a URL protocol load runs: a cache hit goes from the session's queue to an event loop and back, with no hop
/// to the cooperative pool, and anything that may block stays off the loops.
@Suite("URL protocol load hops", .serialized)
struct LoadHopsTests {
    /// The event loop the trace handler ran on for each request (`nil`: not on one of the NIO singleton's loops).
    final class Seen: Sendable {
        private let loops = Locked<[ObjectIdentifier?]>([])
        func record() {
            let loop = MultiThreadedEventLoopGroup.currentEventLoop
            let known = MultiThreadedEventLoopGroup.singleton.makeIterator().contains { $0 === loop }
            loops.withLock { $0.append(known ? loop.map(ObjectIdentifier.init) : nil) }
        }
        var all: [ObjectIdentifier?] { loops.withLock { $0 } }
    }

    @Test("a cache hit's load runs on an event loop from its start to its answer, the loads taking the loops in turn")
    func cacheHitOnEventLoop() async throws {
        let server = try await LocalHTTPServer(host: "127.0.0.5", handler: echo)
        let seen = Seen()
        let fixture = try ProtocolFixture { $0.connection.traceHandler = { _ in seen.record() } }
        try await withCleanup { () async throws in
            try fixture.pin("api.test", to: "127.0.0.5")
            let url = URL(string: "http://api.test:\(server.port)/hop")!
            for _ in 0..<4 {
                let (data, _) = try await fixture.session.data(for: URLRequest(url: url))
                #expect(text(data).hasPrefix("GET /hop host=api.test:\(server.port) sni=- ip=127.0.0.5"))
            }
            // The trace handler runs in the load task right after the answer: on a loop, so the answer resumed the
            // load there (a task keeps its executor preference from its start).
            let loops = seen.all
            #expect(loops.count == 4)
            #expect(loops.allSatisfy { $0 != nil })
            let loopCount = MultiThreadedEventLoopGroup.singleton.makeIterator().map { $0 }.count
            #expect(Set(loops.compactMap { $0 }).count == min(4, loopCount))
            await fixture.shutdown()
        } cleanup: {
            await server.stop()
        }
    }

    @Test("a request body read from a stream is read off the event loops, and still sent whole")
    func bodyStreamOffTheLoops() async throws {
        let server = try await LocalHTTPServer(host: "127.0.0.5", handler: echo)
        let seen = Seen()
        let fixture = try ProtocolFixture { $0.connection.traceHandler = { _ in seen.record() } }
        try await withCleanup { () async throws in
            try fixture.pin("api.test", to: "127.0.0.5")
            var request = URLRequest(url: URL(string: "http://api.test:\(server.port)/upload")!)
            request.httpMethod = "POST"
            request.httpBodyStream = InputStream(data: Data(repeating: 7, count: 3000))
            let (data, _) = try await fixture.session.data(for: request)
            #expect(text(data).hasPrefix("POST /upload host=api.test:\(server.port) sni=- ip=127.0.0.5"))
            #expect(text(data).hasSuffix("body=3000"))
            #expect(seen.all == [nil])
            await fixture.shutdown()
        } cleanup: {
            await server.stop()
        }
    }

    @Test("cookies a loop-run load receives are stored, and sent with the next request")
    func cookiesFromALoopRunLoad() async throws {
        let server = try await LocalHTTPServer(host: "127.0.0.5") { request in
            if request.path == "/set" {
                return .full(status: 200, headers: [("Set-Cookie", "hop=1; Path=/")], body: Array("set".utf8))
            }
            return echo(request)
        }
        let fixture = try ProtocolFixture()
        try await withCleanup { () async throws in
            try fixture.pin("api.test", to: "127.0.0.5")
            _ = try await fixture.session.data(for: URLRequest(url: URL(string: "http://api.test:\(server.port)/set")!))
            #expect(fixture.cookies.cookies?.map(\.name) == ["hop"])
            let (data, _) = try await fixture.session.data(
                for: URLRequest(url: URL(string: "http://api.test:\(server.port)/echo")!))
            #expect(text(data).contains("cookie=hop=1"))
            await fixture.shutdown()
        } cleanup: {
            await server.stop()
        }
    }
}
