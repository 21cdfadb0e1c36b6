import Foundation
import Glibc
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore
@testable import HTTPDNSServer

/// The server as an attacker meets it, over real sockets: clients that trickle, stall, never read, pipeline
/// without end, or break HTTP/2's rules. Each case failed (hung, grew or stalled) before the server had deadlines,
/// back-pressure and flow control.
@Suite("HTTP DNS server against hostile clients")
struct HostileClientTests {
    static let logger = Logger(label: "hostile-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    /// A server answering `fast.test` from an override, with short deadlines.
    struct Target {
        let resolver: HostResolver
        let server: HTTPDNSServer

        /// `deadline` is the request deadlines' (head, body) and half the idle and write times. The TLS handshake
        /// gets `handshake` (10 s by default), and a test whose subject is another deadline can give the head and
        /// idle deadlines more time too: on a loaded machine (the whole suite at once on 2 cores) the test's own task
        /// can wait a second or two for a thread, and a short deadline it is not testing must not end its connection.
        static func start(
            tls: TestCertificates.Leaf? = nil, deadline: Duration = .seconds(1), handshake: Duration = .seconds(10),
            head: Duration? = nil, idle: Duration? = nil, exporter: (@Sendable () -> [UInt8])? = nil
        ) async throws -> Target {
            let overrides = HostOverrides()
            overrides.set([IPAddress(ipv4: 127, 0, 0, 5)], for: try HostPattern("fast.test"))
            let resolver = HostResolver(upstreams: [], overrides: overrides, cache: HostCache(), prober: nil)
            let service = HTTPDNSService(resolver: resolver, logger: logger, metricsExporter: exporter)
            let scaled = TestTiming.scaled(deadline)
            let server = try await HTTPDNSServer.start(
                service: service,
                configuration: .init(
                    port: 0, certificatePath: tls?.certificatePath, privateKeyPath: tls?.keyPath,
                    idleTimeout: idle.map(TestTiming.scaled) ?? scaled * 2,
                    handshakeTimeout: TestTiming.scaled(handshake),
                    requestHeadTimeout: head.map(TestTiming.scaled) ?? scaled, requestBodyTimeout: scaled,
                    writeTimeout: scaled * 2, maximumQueuedBytes: 1 << 20,
                    adminListen: exporter == nil ? nil : ServerAddress(ip: IPAddress(ipv4: 127, 0, 0, 1), port: 0)),
                logger: logger)
            return Target(resolver: resolver, server: server)
        }

        func stop() async {
            await server.shutdown(grace: .milliseconds(100))
            await resolver.shutdown()
        }
    }

    /// Sends `bytes` one at a time, `every` apart, for at most `limit`; returns whether the server closed the
    /// connection before that (off the cooperative pool: it blocks).
    static func trickle(
        _ bytes: [UInt8], to port: Int, every: Duration, for limit: Duration, after prefix: [UInt8] = []
    ) async throws -> Bool {
        try await offThePool {
            let fd = try LoopbackTCP.connect(port: port, receiveTimeout: .seconds(1))
            defer { close(fd) }
            if !prefix.isEmpty {
                _ = prefix.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            }
            let end = ContinuousClock.now + limit
            for byte in bytes where ContinuousClock.now < end {
                var one = byte
                if send(fd, &one, 1, Int32(MSG_NOSIGNAL)) <= 0 { return true }
                // Whatever the server answers is read; an end of stream means it closed.
                var flags = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                if poll(&flags, 1, Int32(every / .milliseconds(1))) > 0 {
                    var buffer = [UInt8](repeating: 0, count: 4096)
                    if recv(fd, &buffer, buffer.count, 0) <= 0 { return true }
                }
            }
            return false
        }
    }

    @Test("a request head or body trickled a byte at a time is cut off by its deadline; so is an idle trickle")
    func slowloris() async throws {
        // Deadlines of 2 s against trickles of up to ten times as long: a trickle ends as soon as the server closes,
        // so the margin costs nothing when the deadline works, and it is wide enough for a loaded machine, where the
        // whole suite shares the event loops of 2 cores (scaled together with them under the sanitizers).
        let target = try await Target.start(deadline: .seconds(2))
        let port = target.server.port
        let limit = TestTiming.scaled(.seconds(20))
        let head = Array(
            "GET /resolve?name=fast.test HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: \(String(repeating: "a", count: 4000))\r\n\r\n"
                .utf8)
        #expect(
            try await Self.trickle(head, to: port, every: .milliseconds(40), for: limit), "a trickled head is cut off")
        // A body promised whole, trickled: cut off by the body deadline.
        let post = Array(
            "POST /dns-query HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/dns-message\r\nContent-Length: 9000\r\n\r\n"
                .utf8)
        #expect(
            try await Self.trickle(
                [UInt8](repeating: 0, count: 8000), to: port, every: .milliseconds(40), for: limit, after: post),
            "a trickled body is cut off")
        // After a complete request, bytes that never make the next one do not keep the connection.
        let answered = Array("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        #expect(
            try await Self.trickle(
                [UInt8](repeating: 0x20, count: 8000), to: port, every: .milliseconds(40), for: limit, after: answered),
            "an idle trickle is cut off")
        // A connection that says nothing at all is closed too, and a well-behaved one is answered meanwhile.
        let silent = try await HTTPDNSServerTests.exchange(port: port, [], timeout: TestTiming.scaled(.seconds(20)))
        #expect(silent.closedByServer)
        let fine = try await HTTPDNSServerTests.exchange(
            port: port,
            Array("GET /resolve?name=fast.test HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8))
        #expect(
            fine.reply.hasPrefix("HTTP/1.1 200") && fine.reply.contains("127.0.0.5"),
            "\(fine.reply.prefix(300)) closed: \(fine.closedByServer)")
        await target.stop()
    }

    @Test("HEAD is answered as GET without a body, and the next request on the connection is read as a request")
    func head() async throws {
        let target = try await Target.start(deadline: .seconds(5))
        let reply = try await HTTPDNSServerTests.exchange(
            port: target.server.port,
            Array(
                ("HEAD /resolve?name=fast.test HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                    + "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").utf8))
        let responses = reply.reply.components(separatedBy: "HTTP/1.1 ").dropFirst()
        #expect(responses.count == 2, "\(reply.reply)")
        let first = responses.first ?? ""
        #expect(first.hasPrefix("200") && first.lowercased().contains("content-length: "), "\(first)")
        #expect(!first.contains("127.0.0.5"), "no body after a HEAD answer: \(first)")
        #expect(responses.last?.hasSuffix("ok\n") == true)
        await target.stop()
    }

    @Test("a TLS handshake trickled a byte at a time is cut off by the handshake deadline")
    func slowHandshake() async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        let target = try await Target.start(tls: try certificates.leaf(for: "doh.test"), handshake: .seconds(1))
        // The first bytes of a TLS 1.2 ClientHello record header and then junk, slowly.
        let hello: [UInt8] = [0x16, 0x03, 0x01, 0x02, 0x00] + [UInt8](repeating: 0x01, count: 4000)
        #expect(
            try await Self.trickle(
                hello, to: target.server.port, every: .milliseconds(40), for: TestTiming.scaled(.seconds(20))))
        await target.stop()
    }

    @Test("20,000 pipelined requests on one connection are all answered, in order, without deep recursion")
    func pipelinedBurst() async throws {
        let target = try await Target.start(deadline: .seconds(10))
        let count = 20_000
        let one = Array("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        let answers = try await offThePool { () -> Int in
            let fd = try LoopbackTCP.connect(port: target.server.port, receiveTimeout: TestTiming.scaled(.seconds(20)))
            defer { close(fd) }
            // A writer thread sends everything while this thread reads, so neither side's buffers stall the other.
            let writer = Thread {
                var burst: [UInt8] = []
                for _ in 0..<count { burst += one }
                var sent = 0
                while sent < burst.count {
                    let written = burst[sent...].withUnsafeBytes {
                        send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
                    }
                    if written <= 0 { return }
                    sent += written
                }
            }
            writer.start()
            var seen = 0
            var tail: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65_536)
            let marker = Array("HTTP/1.1 200".utf8)
            while seen < count {
                let received = recv(fd, &buffer, buffer.count, 0)
                if received <= 0 { break }
                let chunk = tail + buffer[0..<received]
                var index = 0
                while index + marker.count <= chunk.count {
                    if chunk[index] == marker[0], Array(chunk[index..<index + marker.count]) == marker {
                        seen += 1
                        index += marker.count
                    } else {
                        index += 1
                    }
                }
                tail = Array(chunk.suffix(marker.count - 1))
            }
            return seen
        }
        #expect(answers == count)
        await target.stop()
    }

    @Test(
        "a client that pipelines /metrics on the admin listener and never reads is stopped and then closed; others are answered meanwhile"
    )
    func nonReader() async throws {
        // A 100 KB metrics page: every unread answer would cost that much.
        let page = [UInt8](repeating: UInt8(ascii: "m"), count: 100_000)
        let target = try await Target.start(deadline: .seconds(1), head: .seconds(10), exporter: { page })
        let port = try #require(target.server.adminPort)
        // The public listener has no /metrics at all.
        let onPublic = try await HTTPDNSServerTests.exchange(
            port: target.server.port,
            Array("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8))
        #expect(onPublic.reply.hasPrefix("HTTP/1.1 404"))
        let outcome = try await offThePool { () -> (sentBytes: Int, closed: Bool) in
            let fd = try LoopbackTCP.connect(
                port: port, receiveTimeout: .seconds(1), receiveBuffer: 4096, sendTimeout: .milliseconds(200))
            defer { close(fd) }
            let request = Array(String(repeating: "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", count: 100).utf8)
            var sent = 0
            let started = ContinuousClock.now
            while ContinuousClock.now - started < TestTiming.scaled(.seconds(6)) {
                let written = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if written < 0, errno == EPIPE || errno == ECONNRESET { return (sent, true) }
                if written > 0 { sent += written }
            }
            return (sent, false)
        }
        // The server stopped reading (the client's sends blocked) long before 6 s of requests went in, and closed the
        // connection once it stayed unwritable past the write timeout.
        #expect(outcome.closed, "the non-reading client's connection was closed")
        #expect(outcome.sentBytes < 8 << 20, "the server stopped reading: \(outcome.sentBytes) bytes went in")
        let other = try await HTTPDNSServerTests.exchange(
            port: target.server.port,
            Array("GET /resolve?name=fast.test HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8))
        #expect(other.reply.hasPrefix("HTTP/1.1 200"))
        let scrape = try await HTTPDNSServerTests.exchange(
            port: port, Array("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8))
        #expect(scrape.reply.hasPrefix("HTTP/1.1 200"), "another scrape is answered")
        await target.stop()
    }

    /// An HTTP/2 client over TLS that writes frames itself.
    struct H2Client {
        let channel: any Channel
        let recorder: HTTP2FrameTests.Recorder

        /// `receiveBuffer`: the socket's receive buffer (a non-reader's small window fills sooner).
        static func connect(port: Int, ca: String, receiveBuffer: Int? = nil) async throws -> H2Client {
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.trustRoots = .file(ca)
            tls.applicationProtocols = ["h2"]
            let context = try NIOSSLContext(configuration: tls)
            let recorder = HTTP2FrameTests.Recorder()
            var bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            if let receiveBuffer {
                bootstrap = bootstrap.channelOption(.socketOption(.so_rcvbuf), value: receiveBuffer)
            }
            let channel =
                try await bootstrap
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let sync = channel.pipeline.syncOperations
                        try sync.addHandler(try NIOSSLClientHandler(context: context, serverHostname: "doh.test"))
                        // No content-length checks of its own, so the server's can be tried.
                        try sync.addHandler(NIOHTTP2Handler(mode: .client, contentLengthValidation: .disabled))
                        try sync.addHandler(WindowReplenisher())
                        try sync.addHandler(recorder)
                    }
                }
                .connect(host: "127.0.0.1", port: port).get()
            return H2Client(channel: channel, recorder: recorder)
        }

        func headers(_ method: String, _ path: String, stream: Int, end: Bool, extra: HPACKHeaders = [:]) -> HTTP2Frame
        {
            var fields: HPACKHeaders = [":method": method, ":path": path, ":scheme": "https", ":authority": "doh.test"]
            fields.add(contentsOf: extra)
            return HTTP2Frame(
                streamID: HTTP2StreamID(stream), payload: .headers(.init(headers: fields, endStream: end)))
        }

        func data(_ bytes: [UInt8], stream: Int, end: Bool) -> HTTP2Frame {
            HTTP2Frame(
                streamID: HTTP2StreamID(stream),
                payload: .data(.init(data: .byteBuffer(ByteBuffer(bytes: bytes)), endStream: end)))
        }

        /// Writes `frames` and flushes; a frame the client's own HTTP/2 handler refuses is kept in `refused`.
        func send(_ frames: [HTTP2Frame]) {
            let refused = recorder.refused
            for frame in frames {
                let stream = Int(Int32(frame.streamID))
                channel.write(frame).whenFailure { error in refused.withLock { $0.append("\(stream): \(error)") } }
            }
            channel.flush()
        }
    }

    @Test("10,000 RFC 8484 POSTs on one HTTP/2 connection are all answered: the connection window is given back")
    func http2FlowControl() async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        let target = try await Target.start(tls: try certificates.leaf(for: "doh.test"), deadline: .seconds(10))
        let client = try await H2Client.connect(port: target.server.port, ca: certificates.caPath)
        let query = DNSWireMessage.query(for: try HostName("fast.test"), type: .a)
        let type: HPACKHeaders = ["content-type": "application/dns-message"]
        var stream = 1
        var answered = 0
        // In rounds of 50 streams (the server allows 100 at once); 10,000 bodies are about 290 KB, over four
        // times the connection's initial 64 KiB window.
        for _ in 0..<200 {
            let first = stream
            var frames: [HTTP2Frame] = []
            for _ in 0..<50 {
                frames.append(client.headers("POST", "/dns-query", stream: stream, end: false, extra: type))
                frames.append(client.data(query, stream: stream, end: true))
                stream += 2
            }
            client.send(frames)
            let last = stream - 2
            guard try await waitUntil({ client.recorder.ended(last) && client.recorder.ended(first) }) else { break }
            answered += (0..<50).filter { client.recorder.status(first + 2 * $0) == "200" }.count
            client.recorder.frames.withLock { $0.removeAll() }
        }
        #expect(answered == 10_000)
        try await client.channel.close()
        await target.stop()
    }

    @Test("a stream the HTTP/2 layer resets itself is forgotten: its body deadline does not close the connection")
    func http2StreamErrors() async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        // The body deadline (2 s) is the subject; the first-request and idle deadlines are not.
        let target = try await Target.start(
            tls: try certificates.leaf(for: "doh.test"), deadline: .seconds(2), head: .seconds(10), idle: .seconds(10))
        let client = try await H2Client.connect(port: target.server.port, ca: certificates.caPath)
        // A body longer than its content-length: a stream error nghttp2 answers with RST_STREAM itself.
        let type: HPACKHeaders = ["content-type": "application/dns-message", "content-length": "4"]
        client.send([
            client.headers("POST", "/dns-query", stream: 1, end: false, extra: type),
            client.data([UInt8](repeating: 0, count: 40), stream: 1, end: false),
        ])
        #expect(
            try await waitUntil { client.recorder.ended(1) },
            "active: \(client.channel.isActive), frames: \(client.recorder.frames.withLock { $0.map { "\($0.stream) \($0.status ?? "-") \($0.reset)" } }), refused: \(client.recorder.refused.withLock { $0 })"
        )
        // Keep the connection busy for well past the 2 s body deadline with requests: still served.
        var stream = 3
        let until = ContinuousClock.now + TestTiming.scaled(.seconds(5))
        while ContinuousClock.now < until, client.channel.isActive {
            client.send([client.headers("GET", "/resolve?name=fast.test", stream: stream, end: true)])
            #expect(try await waitUntil { client.recorder.ended(stream) })
            stream += 2
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(client.channel.isActive, "the connection outlived the reset stream's body deadline")
        #expect(client.recorder.status(stream - 2) == "200")
        try await client.channel.close()
        await target.stop()
    }

    @Test("an HTTP/2 client that floods PINGs and never reads the acknowledgements is stopped and closed")
    func http2PingFlood() async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        // Head and idle deadlines out of the way: the write bound (2 s unwritable) is the subject.
        let target = try await Target.start(
            tls: try certificates.leaf(for: "doh.test"), deadline: .seconds(1), head: .seconds(30), idle: .seconds(30))
        let client = try await H2Client.connect(port: target.server.port, ca: certificates.caPath, receiveBuffer: 4096)
        #expect(try await waitUntil { client.recorder.settings != nil }, "the connection speaks HTTP/2")
        // From now on the client reads nothing: every acknowledgement stays with the server (about 4 MB fill the
        // socket buffers on loopback, some 250,000 of them).
        try await client.channel.setOption(.autoRead, value: false).get()
        // The PING frames are written as bytes under the client's HTTP/2 handler, straight into TLS: 5,000 per
        // write (a frame: length 8, type 6, no flags, stream 0, then 8 bytes of data).
        var burst = ByteBuffer()
        for _ in 0..<5_000 { burst.writeBytes([0, 0, 8, 6, 0, 0, 0, 0, 0] + [UInt8](repeating: 7, count: 8)) }
        var sent = 0
        let until = ContinuousClock.now + TestTiming.scaled(.seconds(60))
        while client.channel.isActive, ContinuousClock.now < until {
            let channel = client.channel
            let frames = burst
            try? await channel.eventLoop.submit {
                let http2 = try channel.pipeline.syncOperations.context(handlerType: NIOHTTP2Handler.self)
                http2.writeAndFlush(NIOAny(frames), promise: nil)
            }.get()
            sent += 5_000
            try await Task.sleep(for: .milliseconds(2))
        }
        #expect(!client.channel.isActive, "closed after \(sent) PINGs")
        // Another client is served meanwhile.
        let other = try await H2Client.connect(port: target.server.port, ca: certificates.caPath)
        other.send([other.headers("GET", "/resolve?name=fast.test", stream: 1, end: true)])
        #expect(try await waitUntil { other.recorder.status(1) == "200" })
        try? await client.channel.close()
        try await other.channel.close()
        await target.stop()
    }

    @Test("an HTTP/2 client that only pings is closed by the first-request deadline")
    func http2Pinger() async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        let target = try await Target.start(tls: try certificates.leaf(for: "doh.test"), deadline: .seconds(1))
        let client = try await H2Client.connect(port: target.server.port, ca: certificates.caPath)
        var closed = false
        for _ in 0..<300 {
            client.send([HTTP2Frame(streamID: .rootStream, payload: .ping(HTTP2PingData(withInteger: 7), ack: false))])
            try await Task.sleep(for: .milliseconds(50))
            if !client.channel.isActive {
                closed = true
                break
            }
        }
        #expect(closed, "pings do not keep a connection that never asks anything")
        try? await client.channel.close()
        await target.stop()
    }
}

/// Gives the server its connection window back for every DATA frame received, as a client with a stream multiplexer
/// would (without it, 64 KiB of answers would stall the test's own client).
final class WindowReplenisher: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTP2Frame
    typealias InboundOut = HTTP2Frame
    typealias OutboundOut = HTTP2Frame
    private var consumed = 0

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .data(let payload) = unwrapInboundIn(data).payload { consumed += payload.data.readableBytes }
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if consumed > 0 {
            context.writeAndFlush(
                wrapOutboundOut(
                    HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: consumed))),
                promise: nil)
            consumed = 0
        }
        context.fireChannelReadComplete()
    }
}
