import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import Synchronization

/// A DoH server (RFC 8484 GET and POST) over TLS with HTTP/2, on swift-nio-http2, whose behaviour a test scripts:
/// how many streams it allows at once, when it sends GOAWAY, which names it never answers or answers with an
/// oversized body. Every other A query gets `192.0.2.1` (TTL 60); AAAA gets no data. It counts connections,
/// streams and the most streams it had open at once.
public final class LocalHTTP2DoHServer: Sendable {
    /// What the server does.
    public struct Behaviour: Sendable {
        /// `SETTINGS_MAX_CONCURRENT_STREAMS`.
        public var maxConcurrentStreams = 100
        /// After this many streams on one connection the server sends GOAWAY naming that stream as the last one it
        /// will answer, answers what it has, and closes the connection 300 ms later.
        public var goAwayAfterStreams: Int?
        /// Names (lower case, no trailing dot) never answered.
        public var stalled: Set<String> = []
        /// Names answered with a body of this many bytes.
        public var oversized: [String: Int] = [:]
        /// The delay before each answer.
        public var delay: Duration = .zero
        /// Names whose streams are reset (RST_STREAM with this HTTP/2 error code, 2 for INTERNAL_ERROR) instead of
        /// answered.
        public var reset: [String: UInt32] = [:]
        /// Whether every answer is preceded by an informational response (103 Early Hints).
        public var informational = false
        /// Names answered with a head and the first 16 of 512 announced bytes, then nothing: a body that stalls.
        public var stalledAfterHead: Set<String> = []

        /// Creates the default behaviour: answer everything at once, 100 streams at a time.
        public init() {}
    }

    private let channel: any Channel
    private let stats: Stats
    /// The port.
    public let port: Int

    /// Starts a server on `127.0.0.1` with `certificate`.
    public init(certificate: TestCertificates.Leaf, behaviour: Behaviour = .init()) async throws {
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certificate.certificatePath).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: certificate.keyPath, format: .pem))
        )
        tls.applicationProtocols = ["h2"]
        let sslContext = try NIOSSLContext(configuration: tls)
        let stats = Stats()
        var connectionConfiguration = NIOHTTP2Handler.ConnectionConfiguration()
        connectionConfiguration.initialSettings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: behaviour.maxConcurrentStreams),
            HTTP2Setting(parameter: .maxHeaderListSize, value: 16_384),
        ]
        let h2Configuration = connectionConfiguration
        self.channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                stats.connections.add(1, ordering: .relaxed)
                let perConnection = ConnectionStreams()
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                    _ = try channel.pipeline.syncOperations.configureHTTP2Pipeline(
                        mode: .server, connectionConfiguration: h2Configuration, streamConfiguration: .init(),
                        inboundStreamInitializer: { stream in
                            stream.eventLoop.makeCompletedFuture {
                                try stream.pipeline.syncOperations.addHandler(
                                    StreamHandler(behaviour: behaviour, stats: stats, connection: perConnection))
                            }
                        })
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        self.stats = stats
        self.port = channel.localAddress?.port ?? 0
    }

    /// The connections accepted so far.
    public var connections: Int { stats.connections.load(ordering: .relaxed) }
    /// The streams opened so far.
    public var streams: Int { stats.streams.load(ordering: .relaxed) }
    /// The most streams open at once on one connection.
    public var peakConcurrentStreams: Int { stats.peak.load(ordering: .relaxed) }

    /// The names of every request header the server received (lower case, pseudo-headers included).
    public var requestHeaderNames: Set<String> { stats.headerNames.withLock { $0 } }

    /// Stops listening (open connections are left to close with their clients).
    public func stop() async { try? await channel.close() }

    private final class Stats: Sendable {
        let connections = Atomic(0)
        let streams = Atomic(0)
        let peak = Atomic(0)
        let headerNames = Mutex<Set<String>>([])
    }

    /// Streams of one connection, counted on its event loop.
    private final class ConnectionStreams: @unchecked Sendable {
        // Only touched on the connection's event loop (the parent and its stream channels share it).
        var opened = 0
        var open = 0
        var sentGoAway = false
    }

    private final class StreamHandler: ChannelInboundHandler {
        typealias InboundIn = HTTP2Frame.FramePayload
        typealias OutboundOut = HTTP2Frame.FramePayload

        let behaviour: Behaviour
        let stats: Stats
        let connection: ConnectionStreams
        var method = ""
        var path = ""
        var body: [UInt8] = []

        init(behaviour: Behaviour, stats: Stats, connection: ConnectionStreams) {
            self.behaviour = behaviour
            self.stats = stats
            self.connection = connection
        }

        func channelActive(context: ChannelHandlerContext) {
            stats.streams.add(1, ordering: .relaxed)
            connection.opened += 1
            connection.open += 1
            let open = connection.open
            while true {
                let peak = stats.peak.load(ordering: .relaxed)
                if open <= peak
                    || stats.peak.compareExchange(expected: peak, desired: open, ordering: .relaxed).exchanged
                {
                    break
                }
            }
            if let limit = behaviour.goAwayAfterStreams, connection.opened >= limit, !connection.sentGoAway,
                let parent = context.channel.parent,
                let id = try? context.channel.syncOptions?.getOption(HTTP2StreamChannelOptions.streamID)
            {
                connection.sentGoAway = true
                let goAway = HTTP2Frame(
                    streamID: .rootStream, payload: .goAway(lastStreamID: id, errorCode: .noError, opaqueData: nil))
                parent.writeAndFlush(goAway, promise: nil)
                parent.eventLoop.scheduleTask(in: .milliseconds(300)) { parent.close(promise: nil) }
            }
            context.fireChannelActive()
        }

        func channelInactive(context: ChannelHandlerContext) {
            connection.open -= 1
            context.fireChannelInactive()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .headers(let headers):
                method = headers.headers.first(name: ":method") ?? ""
                let names = headers.headers.map { $0.name.lowercased() }
                stats.headerNames.withLock { $0.formUnion(names) }
                path = headers.headers.first(name: ":path") ?? ""
                if headers.endStream { answer(context) }
            case .data(let payload):
                if case .byteBuffer(let buffer) = payload.data { body += buffer.readableBytesView }
                if payload.endStream { answer(context) }
            default:
                break
            }
        }

        private func answer(_ context: ChannelHandlerContext) {
            let query: [UInt8]
            if method == "POST" {
                query = body
            } else {
                var text = String(path.split(separator: "dns=", maxSplits: 1).last ?? "")
                text = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
                while text.count % 4 != 0 { text += "=" }
                query = Array(Data(base64Encoded: text) ?? Data())
            }
            guard let name = Self.questionName(query) else {
                respond(context, status: "400", body: [])
                return
            }
            if behaviour.stalled.contains(name) { return }
            if behaviour.stalledAfterHead.contains(name) {
                let head = HPACKHeaders([
                    (":status", "200"), ("content-type", "application/dns-message"), ("content-length", "512"),
                ])
                context.write(wrapOutboundOut(.headers(.init(headers: head))), promise: nil)
                let start = context.channel.allocator.buffer(repeating: 0, count: 16)
                context.writeAndFlush(wrapOutboundOut(.data(.init(data: .byteBuffer(start)))), promise: nil)
                return
            }
            if let code = behaviour.reset[name] {
                context.writeAndFlush(wrapOutboundOut(.rstStream(HTTP2ErrorCode(networkCode: Int(code)))), promise: nil)
                return
            }
            if behaviour.informational {
                let early = HPACKHeaders([(":status", "103"), ("link", "</style.css>; rel=preload")])
                context.write(wrapOutboundOut(.headers(.init(headers: early))), promise: nil)
            }
            if let size = behaviour.oversized[name] {
                respond(context, status: "200", body: [UInt8](repeating: 0, count: size))
                return
            }
            let type = query.count >= 4 ? Int(query[query.count - 4]) << 8 | Int(query[query.count - 3]) : 0
            let reply = CraftedWire.response(to: query, a: type == 1 ? [[192, 0, 2, 1]] : [])
            if behaviour.delay == .zero {
                respond(context, status: "200", body: reply)
            } else {
                let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                context.eventLoop.scheduleTask(in: TimeAmount(behaviour.delay)) {
                    bound.value.0.respond(bound.value.1, status: "200", body: reply)
                }
            }
        }

        private func respond(_ context: ChannelHandlerContext, status: String, body: [UInt8]) {
            let headers = HPACKHeaders([
                (":status", status), ("content-type", "application/dns-message"),
                ("content-length", String(body.count)),
            ])
            context.write(wrapOutboundOut(.headers(.init(headers: headers))), promise: nil)
            var buffer = context.channel.allocator.buffer(capacity: body.count)
            buffer.writeBytes(body)
            context.writeAndFlush(
                wrapOutboundOut(.data(.init(data: .byteBuffer(buffer), endStream: true))), promise: nil)
        }

        /// The question name of a query, lower case without the trailing dot.
        static func questionName(_ query: [UInt8]) -> String? {
            guard query.count > 12 else { return nil }
            var labels: [String] = []
            var index = 12
            while index < query.count, query[index] != 0 {
                let length = Int(query[index])
                guard length < 64, index + 1 + length <= query.count else { return nil }
                labels.append(String(decoding: query[(index + 1)..<(index + 1 + length)], as: UTF8.self).lowercased())
                index += 1 + length
            }
            return labels.joined(separator: ".")
        }
    }
}
