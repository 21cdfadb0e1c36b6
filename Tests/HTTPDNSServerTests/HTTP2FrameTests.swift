import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSServer

/// The server's HTTP/2 handling frame by frame, with a client that writes the frames itself: what this package's
/// client never sends (trailers, resets, oversized bodies) must still be answered correctly.
@Suite("HTTP DNS server over raw HTTP/2 frames")
struct HTTP2FrameTests {
    static let logger = Logger(label: "h2-frame-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    /// One frame as the client received it.
    struct Received: Sendable {
        var stream: Int
        var status: String?
        var data: [UInt8] = []
        var reset = false
        var endStream = false
    }

    /// Records every frame the client receives.
    final class Recorder: ChannelInboundHandler, Sendable {
        typealias InboundIn = HTTP2Frame
        let frames = Locked<[Received]>([])

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let frame = unwrapInboundIn(data)
            let stream = Int(Int32(frame.streamID))
            switch frame.payload {
            case .headers(let headers):
                frames.withLock {
                    $0.append(
                        Received(
                            stream: stream, status: headers.headers.first(name: ":status"), endStream: headers.endStream
                        ))
                }
            case .data(let payload):
                if case .byteBuffer(var buffer) = payload.data {
                    let bytes = buffer.readBytes(length: buffer.readableBytes) ?? []
                    frames.withLock { $0.append(Received(stream: stream, data: bytes, endStream: payload.endStream)) }
                }
            case .rstStream:
                frames.withLock { $0.append(Received(stream: stream, reset: true)) }
            default:
                break
            }
        }

        func on(_ stream: Int) -> [Received] { frames.withLock { $0.filter { $0.stream == stream } } }
        func status(_ stream: Int) -> String? { on(stream).compactMap(\.status).first }
        func body(_ stream: Int) -> [UInt8] { on(stream).flatMap(\.data) }
        func ended(_ stream: Int) -> Bool { on(stream).contains { $0.endStream || $0.reset } }
    }

    @Test(
        "a body in several DATA frames ended by trailers is answered; an oversized body gets 413 and a reset; a stream reset while its answer waits leaves the connection serving"
    )
    func frames() async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        let leaf = try certificates.leaf(for: "doh.test")
        let answer = FakeHTTPDNS.dnsJSON()
        let slow = try await LocalHTTPServer { request in .delayed(.milliseconds(800), answer(request)) }
        let overrides = try TemporaryFiles.file("127.0.0.5 fast.test\n", name: "hosts")
        let settings = try SettingsFile.parse(
            Array(
                """
                {
                  "sources": { "order": ["overrides", "httpdns"], "systemFallback": false },
                  "overrides": { "file": "\(overrides)" },
                  "reload": { "intervalMs": 0 }, "probe": { "enabled": false }, "cache": { "enabled": false },
                  "httpdns": { "providers": ["json"],
                               "provider": { "json": { "api": "doh-json", "urls": ["\(slow.url)/resolve"] } } }
                }
                """.utf8), path: "h2.json", environment: [:]
        ).get()
        let resolver = try HostResolver(settings: settings, logger: Self.logger)
        let service = HTTPDNSService(resolver: resolver, logger: Self.logger)
        let server = try await HTTPDNSServer.start(
            service: service,
            configuration: .init(
                port: 0, certificatePath: leaf.certificatePath, privateKeyPath: leaf.keyPath, maximumBodyBytes: 1024),
            logger: Self.logger)

        let client = try await HostileClientTests.H2Client.connect(port: server.port, ca: certificates.caPath)
        let (channel, recorder) = (client.channel, client.recorder)
        let type: HPACKHeaders = ["content-type": "application/dns-message"]
        func headers(_ method: String, _ path: String, stream: Int, end: Bool, extra: HPACKHeaders = [:])
            -> HTTP2Frame
        {
            client.headers(method, path, stream: stream, end: end, extra: extra)
        }
        func data(_ bytes: [UInt8], stream: Int, end: Bool) -> HTTP2Frame {
            client.data(bytes, stream: stream, end: end)
        }
        let query = try DNSWireMessage.query(for: try HostName("fast.test"), type: .a)
        let half = query.count / 2
        var frames: [HTTP2Frame] = [
            // 1: a POST whose body comes in two DATA frames, the request ended by trailers.
            headers("POST", "/dns-query", stream: 1, end: false, extra: type),
            data(Array(query[..<half]), stream: 1, end: false),
            data(Array(query[half...]), stream: 1, end: false),
            HTTP2Frame(streamID: 1, payload: .headers(.init(headers: ["x-checksum": "none"], endStream: true))),
            // 3: a body over the 1,024-byte limit, more of it still to come.
            headers("POST", "/dns-query", stream: 3, end: false, extra: type),
            data([UInt8](repeating: 0, count: 2000), stream: 3, end: false),
            // 5: a name only the slow upstream knows, reset by the client while the server waits.
            headers("GET", "/resolve?name=multi.test", stream: 5, end: true),
            HTTP2Frame(streamID: 5, payload: .rstStream(.cancel)),
        ]
        for frame in frames { channel.write(frame, promise: nil) }
        channel.flush()
        #expect(try await waitUntil { recorder.ended(1) && recorder.ended(3) })
        #expect(recorder.status(1) == "200")
        var body = recorder.body(1)
        #expect(body.count > 12)
        if body.count > 12 {
            body[0] = 0
            body[1] = 0
            let addresses = try DNSWireMessage.addresses(
                in: body, for: try HostName("fast.test"), type: .a, source: "t")
            #expect(addresses.map(\.ip.description) == ["127.0.0.5"])
        }
        #expect(recorder.status(3) == "413")
        #expect(try await waitUntil { recorder.on(3).contains { $0.reset } }, "the rest of the body is refused")
        // After the slow upstream has answered the reset stream, the connection still serves, and stream 5 got
        // nothing.
        try await Task.sleep(for: .milliseconds(1200))
        frames = [headers("GET", "/resolve?name=fast.test", stream: 7, end: true)]
        for frame in frames { channel.write(frame, promise: nil) }
        channel.flush()
        #expect(try await waitUntil { recorder.ended(7) })
        #expect(recorder.status(7) == "200")
        #expect(String(decoding: recorder.body(7), as: UTF8.self).contains("127.0.0.5"))
        #expect(recorder.on(5).allSatisfy { $0.status == nil && $0.data.isEmpty })

        try await channel.close()
        await server.shutdown(grace: .milliseconds(100))
        await resolver.shutdown()
        await slow.stop()
    }
}
