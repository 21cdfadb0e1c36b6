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

/// Every URLSession API form behaves with the library started as without it: each form is run by
/// `httpdns-url-forms` once in a process that never starts the library and once in one that does (registration is
/// process-wide), and the two reports must match line by line. The server tells which path served each request.
@Suite("URLSession API forms with and without the library", .serialized)
struct URLSessionFormsTests {
    /// An address no other test uses.
    static let address = "127.0.0.57"

    /// A deterministic body of `count` bytes.
    static func pattern(_ count: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) }
    }

    /// /small, /big (256 KiB), /echo (what was posted), /redirect (to /small), /slow (5 s), each with the caller's
    /// User-Agent in `X-Agent`.
    static func handler(_ request: LocalHTTPServer.Request) -> LocalHTTPServer.Reply {
        let agent = request.headers["user-agent"].map { $0.contains("curl") ? "urlsession" : "other" } ?? "none"
        var headers = [("X-Agent", agent), ("Content-Type", "application/octet-stream"), ("X-Form", "1")]
        switch request.path {
        case "/small":
            return .full(status: 200, headers: headers, body: Array("a small answer".utf8))
        case "/big":
            return .full(status: 200, headers: headers, body: pattern(256 * 1024))
        case "/echo":
            let text = "\(request.method) \(request.body.count) bytes, first \(request.body.first ?? 0)"
            return .full(status: 201, headers: headers, body: Array(text.utf8))
        case "/redirect":
            headers.append(("Location", "/small"))
            return .full(status: 302, headers: headers, body: [])
        case "/slow":
            return .delayed(.seconds(5), .full(status: 200, headers: headers, body: Array("late".utf8)))
        default:
            return .full(status: 404, headers: headers, body: [])
        }
    }

    struct Line: Decodable, Equatable {
        var form: String
        var status: Int?
        var headers: [String: String]?
        var body: String?
        var file: String?
        var events: [String]
        var dataEvents: Int
        var error: String?
        var agent: String?
    }

    static let executable = HostsCTLProcess.executable(named: "httpdns-url-forms")

    /// Runs one form in a process of its own, started with or without the library, with a temporary directory of
    /// its own (`TMPDIR`, where URLSession puts downloads), removed afterwards.
    /// - Returns: The form's report, and the files the process left in its temporary directory.
    static func run(_ form: String, library: Bool, base: String) async throws -> (line: Line?, leftovers: [String]) {
        let temporary = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-forms-\(UUID())")
        try FileManager.default.createDirectory(at: temporary, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: temporary) }
        let output = try await HostsCTLProcess.run(
            executable: executable, (library ? ["--library"] : []) + [base, form],
            environment: ["TMPDIR": temporary.path])
        #expect(
            output.status == 0,
            "\(form) \(library ? "with" : "without") the library exited \(output.status): \(output.standardError)")
        let line = try output.standardOutput.split(separator: "\n").first.map {
            try JSONDecoder().decode(Line.self, from: Data($0.utf8))
        }
        return (line, (try? FileManager.default.contentsOfDirectory(atPath: temporary.path)) ?? [])
    }

    /// The forms the library serves itself; every other one goes to URLSession's own HTTP support.
    static let rewritten: Set<String> = [
        "dataTask(with:completionHandler:)", "dataTask(with:completionHandler:) redirected", "dataTask POST httpBody",
        "dataTask session delegate", "dataTask session delegate redirected",
        "dataTask session delegate redirect refused",
        "dataTask(with:completionHandler:) on a delegate session, redirected",
        "data(for:)", "data(from:)",
    ]

    @Test("each form: the same status, headers, body or file, delegate callbacks and errors, and no crash")
    func matrix() async throws {
        let server = try await LocalHTTPServer(host: Self.address, handler: Self.handler)
        defer { Task { await server.stop() } }
        let forms = try await HostsCTLProcess.run(executable: Self.executable, [server.url, "--list"])
            .standardOutput.split(separator: "\n").map(String.init)
        #expect(forms.count == 25)
        var plain: [Line] = []
        for form in forms {
            let plainRun = try await Self.run(form, library: false, base: server.url)
            let without = try #require(plainRun.line)
            plain.append(without)
            let libraryRun = try await Self.run(form, library: true, base: server.url)
            // Files left behind (URLSession's own, for some download forms): no more with the library.
            #expect(
                libraryRun.leftovers.count <= plainRun.leftovers.count,
                "\(form) left \(libraryRun.leftovers) with the library, \(plainRun.leftovers) without")
            guard let with = libraryRun.line else {
                Issue.record("\(form) reported nothing with the library")
                continue
            }
            var comparable = with
            comparable.agent = without.agent
            // How a body is cut into parts is the transport's; that parts arrive is what counts.
            comparable.dataEvents = without.dataEvents
            #expect(comparable == without, "\(form): with the library \(with), without \(without)")
            if with.dataEvents > 0 { #expect(without.dataEvents > 0) }
            if Self.rewritten.contains(form), with.error == nil, with.status != nil {
                #expect(with.agent == "none", "\(form) is served by the library")
            } else if with.status != nil {
                #expect(with.agent == "urlsession", "\(form) is left to URLSession")
            }
        }
        let served = plain.filter { $0.error == nil && $0.status != nil }
        #expect(served.count >= 17, "the forms that answer do answer: \(plain.map(\.form))")
    }

    @Test("a session delegate gets the body in parts as they arrive, then the completion; cancelling stops the parts")
    func delegateProgress() async throws {
        // 40 bytes, one every 50 ms: a body that is still arriving for two seconds; and one that goes on for minutes.
        let server = try await LocalHTTPServer(host: "127.0.0.58") { request in
            request.path == "/endless"
                ? .drip(bytes: 100_000, every: .milliseconds(20)) : .drip(bytes: 40, every: .milliseconds(50))
        }
        try await withCleanup { () async throws in
            let fixture = try ProtocolFixture()
            try fixture.pin("drip.test", to: "127.0.0.58")
            let collector = DataCollector()
            let session = URLSession(
                configuration: fixture.sessionConfiguration(), delegate: collector, delegateQueue: nil)
            session.dataTask(with: URL(string: "http://drip.test:\(server.port)/")!).resume()
            let (data, error) = try await withTimeLimit(TestTiming.scaled(.seconds(30))) { await collector.result() }
            #expect(error == nil)
            #expect(data.count == 40)
            #expect(collector.respondedFirst, "the response comes before the body")
            #expect(collector.partSizes.count >= 2, "the body arrives in parts: \(collector.partSizes)")
            #expect((collector.partSizes.first ?? 40) < 40, "the first part comes before the body is complete")
            #expect(fixture.traces.last?.bytes == 40, "the trace counts the streamed body")

            // A body that never ends: cancelled after its first parts, the task completes as cancelled.
            let endless = DataCollector()
            let endlessSession = URLSession(
                configuration: fixture.sessionConfiguration(), delegate: endless, delegateQueue: nil)
            let task = endlessSession.dataTask(with: URL(string: "http://drip.test:\(server.port)/endless")!)
            task.resume()
            #expect(try await waitUntil { endless.partSizes.count >= 2 }, "parts of the endless body arrive")
            task.cancel()
            let (_, cancelled) = try await withTimeLimit(TestTiming.scaled(.seconds(10))) { await endless.result() }
            #expect((cancelled as? URLError)?.code == .cancelled)
            let partsAtCancel = endless.partSizes.count
            try await Task.sleep(for: .milliseconds(200))
            #expect(endless.partSizes.count == partsAtCancel, "no part after the cancellation")
            session.finishTasksAndInvalidate()
            endlessSession.finishTasksAndInvalidate()
            await fixture.shutdown()
        } cleanup: {
            await server.stop()
        }
    }
}
