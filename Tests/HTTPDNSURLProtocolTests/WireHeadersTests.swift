#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Foundation
import HTTPDNS
import HTTPDNSURLProtocol
import Testing
import TestSupport

/// The headers and body as they cross the URL protocol: the application's fields go on the wire once each (the
/// transport's own dropped), and the answer's repeated fields reach Foundation as URLSession delivers them.
@Suite("URL protocol headers and body on the wire", .serialized)
struct WireHeadersTests {
    @Test(
        "request fields go out once each without the hop-by-hop ones; repeated answer fields are joined; every Set-Cookie is stored"
    )
    func headersBothWays() async throws {
        let seen = Locked<LocalHTTPServer.Request?>(nil)
        let server = try await LocalHTTPServer(host: "127.0.0.5") { request in
            seen.withLock { $0 = request }
            return .full(
                status: 200,
                headers: [
                    ("X-Multi", "a"), ("x-multi", "b"), ("Set-Cookie", "one=1; Path=/"),
                    ("Set-Cookie", "two=2; Path=/"), ("Content-Type", "text/plain"),
                ],
                body: Array("ok".utf8))
        }
        let fixture = try ProtocolFixture()
        try await withCleanup { () async throws in
            try fixture.pin("api.test", to: "127.0.0.5")
            var request = URLRequest(url: URL(string: "http://api.test:\(server.port)/fields")!)
            request.httpMethod = "PUT"
            request.setValue("kept", forHTTPHeaderField: "X-App")
            request.setValue("upgrade-me", forHTTPHeaderField: "Upgrade")
            request.setValue("999", forHTTPHeaderField: "Content-Length")
            request.httpBody = Data("payload".utf8)
            let (data, response) = try await fixture.session.data(for: request)
            let http = try #require(response as? HTTPURLResponse)
            #expect(text(data) == "ok")
            #expect(http.value(forHTTPHeaderField: "X-Multi") == "a, b")
            #expect(fixture.cookies.cookies?.map(\.name).sorted() == ["one", "two"])

            let wire = try #require(seen.withLock { $0 })
            #expect(wire.method == "PUT")
            #expect(wire.headers["x-app"] == "kept")
            #expect(wire.headers["upgrade"] == nil, "a hop-by-hop field of the application's never goes out")
            #expect(wire.headers["content-length"] == "7", "the length is the body's own")
            #expect(wire.headers["host"] == "api.test:\(server.port)")
            #expect(wire.headers[RequestRewriting.handledHeader.lowercased()] == nil)
            #expect(String(decoding: wire.body, as: UTF8.self) == "payload")
            await fixture.shutdown()
        } cleanup: {
            await server.stop()
        }
    }

    /// Foundation drops a value with CR or LF itself; other control characters and names that are not tokens reach
    /// the protocol.
    @Test(
        "a field with a control character in its value or a name that is not a token is refused before anything is sent, without its value",
        arguments: [("X-Note", "secret\u{7F}1"), ("Bad Name", "secret")])
    func invalidFieldRefused(name: String, value: String) async throws {
        let requests = Locked(0)
        let server = try await LocalHTTPServer(host: "127.0.0.5") { _ in
            requests.withLock { $0 += 1 }
            return .text("reached")
        }
        let fixture = try ProtocolFixture()
        try await withCleanup { () async throws in
            try fixture.pin("api.test", to: "127.0.0.5")
            var request = URLRequest(url: URL(string: "http://api.test:\(server.port)/bad")!)
            request.setValue(value, forHTTPHeaderField: name)
            let error = await #expect(throws: (any Error).self) {
                _ = try await fixture.session.data(for: request)
            }
            #expect(!String(describing: error).contains("secret"))
            #expect(requests.withLock { $0 } == 0)
            await #expect(throws: HTTPDNSError.self) { _ = try await fixture.interceptor.load(request) }
            await fixture.shutdown()
        } cleanup: {
            await server.stop()
        }
    }
}
