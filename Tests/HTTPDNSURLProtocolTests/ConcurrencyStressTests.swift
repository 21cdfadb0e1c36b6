#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Foundation
import HTTPDNS
import HTTPDNSURLProtocol
import Testing
import TestSupport

/// Many requests at once through one URLSession with the protocol in front: `URLSession.shared` after an early
/// global registration, and a session of its own; async, completion-handler and delegate callers; a share cancelled
/// mid-flight and a share failing over from a refused address. Each run is a child process (`httpdns-stress`), so a
/// crash inside URLSession fails the test that caused it and leaves the runner alive.
@Suite("Concurrent requests through one URLSession", .serialized)
struct ConcurrencyStressTests {
    /// The server the runs talk to, on an address no other test uses; the refused address holds the same port bound
    /// without listening, so connects to it are refused.
    private static let live = "127.0.0.40"
    private static let dead = "127.0.0.41"

    static func echoOrSlow(_ request: LocalHTTPServer.Request) -> LocalHTTPServer.Reply {
        let parts = request.path.split(separator: "/")
        guard parts.count == 2 else { return .text("no such path", status: 404) }
        let reply = LocalHTTPServer.Reply.text("echo \(parts[1]) host=\(request.headers["host"] ?? "-")")
        return parts[0] == "slow" ? .delayed(.milliseconds(300), reply) : reply
    }

    struct Report: Decodable {
        var ok: Int
        var cancelled: Int
        var failed: Int
        var mismatched: Int
        var failovers: Int
        var errors: [String]
    }

    @Test(
        "every answer reaches its own caller: 2, 16 and 64 in flight, shared and custom sessions",
        arguments: [("shared", 2), ("shared", 16), ("shared", 64), ("custom", 2), ("custom", 16), ("custom", 64)]
    )
    func concurrentRequests(session: String, concurrency: Int) async throws {
        let server = try await LocalHTTPServer(host: Self.live, handler: Self.echoOrSlow)
        let refused = try TCPListener(ip: Self.dead, port: UInt16(server.port), listening: false)
        defer { refused.close() }
        let requests = concurrency == 2 ? 1000 : 3000
        let callers = session == "shared" ? "async,completion" : "async,completion,delegate"
        let output = try await HostsCTLProcess.run(
            executable: HostsCTLProcess.executable(named: "httpdns-stress"),
            [
                "--port", "\(server.port)", "--live", Self.live, "--dead", Self.dead, "--session", session,
                "--concurrency", "\(concurrency)", "--requests", "\(requests)", "--cancel-every", "10",
                "--failover-every", "7", "--callers", callers,
            ])
        await server.stop()
        #expect(
            output.status == 0,
            "exit \(output.status) (\(output.status > 128 ? "signal \(output.status - 128)" : "no signal")): \(output.standardError.prefix(3000)) \(output.standardOutput)"
        )
        let line = try #require(
            output.standardOutput.split(separator: "\n").last, "no report: \(output.standardError.suffix(2000))")
        let report = try JSONDecoder().decode(Report.self, from: Data(line.utf8))
        #expect(report.failed == 0 && report.mismatched == 0, "\(report.errors)")
        #expect(report.ok + report.cancelled == requests)
        // Every tenth request is cancelled while the server holds its answer for 300 ms; a few may finish first on a
        // loaded machine, but most must be cancelled mid-flight.
        #expect(report.cancelled > requests / 20)
        // Every seventh request that is not cancelled goes to failover.test, whose first address refuses.
        #expect(report.failovers > 0)
    }
}
