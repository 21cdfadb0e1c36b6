import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization
#if canImport(Glibc)
    import Glibc
#endif

/// A small HTTP/1.1 server on a loopback address for the HTTP APIs that have no real local server (vendor HTTPDNS,
/// the JSON DNS API), for the URL protocol's origin servers (optionally over TLS, recording the SNI each connection
/// sent) and for hostile behaviour (garbage, stalls, oversized bodies, hang-ups).
public final class LocalHTTPServer: Sendable {
    /// A request as the server saw it.
    public struct Request: Sendable {
        /// `GET`, `POST`, …
        public var method: String
        /// The path without the query, e.g. `/123/d`.
        public var path: String
        /// The query parameters (last one wins), percent-decoded.
        public var query: [String: String]
        /// The request headers, names lowercased.
        public var headers: [String: String]
        /// The request body.
        public var body: [UInt8]
        /// The TLS server name the client sent (SNI); `nil` over plain HTTP or without SNI.
        public var serverName: String? = nil
        /// The address the server listens on (which 127.0.0.x the client reached).
        public var serverAddress: String = ""
    }

    /// What the server does with a request.
    public indirect enum Reply: Sendable {
        /// Answers with a status, a content type and a body; `declareLength: false` sends it chunked.
        case respond(status: Int, contentType: String?, body: [UInt8], declareLength: Bool = true)
        /// Sends the head (promising 1,000 bytes) and a few bytes of body, then nothing more.
        case stall
        /// Closes the connection without answering.
        case hangUp
        /// Resets the connection (RST, through `SO_LINGER` 0) without answering, after reading the whole request.
        case reset
        /// Answers with a status, any header fields and a body (`Content-Length` is added).
        case full(status: Int, headers: [(String, String)], body: [UInt8])
        /// Sends `reply` after `delay` (the connection stays open meanwhile), for requests cancelled mid-flight.
        case delayed(Duration, Reply)
        /// Sends a head promising `bytes` bytes, then one byte of body every `interval`: a slowly dripping body.
        case drip(bytes: Int, every: Duration)
        /// Sends a head promising 1,000 bytes and 10 of them, then resets the connection: over TLS, an unclean close
        /// (no close_notify) in the middle of the answer.
        case truncated

        /// A redirect to `location`.
        public static func redirect(to location: String, status: Int = 302) -> Reply {
            .full(status: status, headers: [("Location", location)], body: [])
        }

        /// A 200 answer with a text body.
        public static func text(_ text: String, status: Int = 200, contentType: String = "text/plain") -> Reply {
            .respond(status: status, contentType: contentType, body: Array(text.utf8))
        }
    }

    /// The port the server listens on.
    public let port: Int
    /// The address the server listens on.
    public let host: String
    /// Whether the server speaks TLS.
    public let isTLS: Bool
    private let channel: any Channel
    private let accepted: Counter
    private let closed: Counter

    /// Starts a server that answers every request with `handler`.
    /// - Parameters:
    ///   - host: The loopback address to listen on (Linux routes all of 127.0.0.0/8 to loopback).
    ///   - port: The port; 0 picks a free one.
    ///   - tls: Serve HTTPS with this certificate; each request records the SNI its connection sent.
    ///   - legacyTLSOnly: Speak TLS 1.0 and 1.1 only, like an old server.
    public init(
        host: String = "127.0.0.1",
        port: Int = 0,
        tls: TestCertificates.Leaf? = nil,
        legacyTLSOnly: Bool = false,
        handler: @escaping @Sendable (Request) -> Reply
    ) async throws {
        let sslContext = try tls.map { leaf in
            var configuration = TLSConfiguration.makeServerConfiguration(
                certificateChain: try NIOSSLCertificate.fromPEMFile(leaf.certificatePath).map { .certificate($0) },
                privateKey: .privateKey(try NIOSSLPrivateKey(file: leaf.keyPath, format: .pem))
            )
            if legacyTLSOnly {
                configuration.minimumTLSVersion = .tlsv1
                configuration.maximumTLSVersion = .tlsv11
            }
            return try NIOSSLContext(configuration: configuration)
        }
        let accepted = Counter()
        let closed = Counter()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                accepted.increment()
                channel.closeFuture.whenComplete { _ in closed.increment() }
                return channel.eventLoop.makeCompletedFuture {
                    let handler = Handler(handler: handler, serverAddress: host)
                    if let sslContext {
                        let sni = ByteToMessageHandler(
                            SNIHandler { result in
                                if case .hostname(let name) = result { handler.serverName = name }
                                return channel.eventLoop.makeSucceededVoidFuture()
                            })
                        try channel.pipeline.syncOperations.addHandler(sni)
                        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                    }
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
            .bind(host: host, port: port).get()
        self.channel = channel
        self.port = channel.localAddress?.port ?? 0
        self.host = host
        self.isTLS = tls != nil
        self.accepted = accepted
        self.closed = closed
    }

    /// The base URL by address, `http://127.0.0.1:PORT` (or https).
    public var url: String { "\(isTLS ? "https" : "http")://\(host):\(port)" }

    /// The connections accepted so far.
    public var connections: Int { accepted.value }

    /// The accepted connections that have closed since.
    public var closedConnections: Int { closed.value }

    /// Stops listening.
    public func stop() async {
        try? await channel.close()
    }

    private final class Handler: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart

        let handler: @Sendable (Request) -> Reply
        let serverAddress: String
        var serverName: String?
        var head: HTTPRequestHead?
        var body: [UInt8] = []

        init(handler: @escaping @Sendable (Request) -> Reply, serverAddress: String) {
            self.handler = handler
            self.serverAddress = serverAddress
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head):
                self.head = head
                body = []
            case .body(var buffer):
                body += buffer.readBytes(length: buffer.readableBytes) ?? []
            case .end:
                guard let head else { return }
                var request = LocalHTTPServer.parse(head, body: body)
                request.serverName = serverName
                request.serverAddress = serverAddress
                respond(context: context, to: request)
            }
        }

        private func respond(context: ChannelHandlerContext, to request: Request) {
            send(handler(request), context: context)
        }

        private func send(_ reply: Reply, context: ChannelHandlerContext) {
            switch reply {
            case .delayed(let delay, let reply):
                let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                context.eventLoop.scheduleTask(
                    in: .nanoseconds(
                        Int64(delay.components.seconds) * 1_000_000_000 + delay.components.attoseconds / 1_000_000_000)
                ) {
                    let (handler, context) = bound.value
                    guard context.channel.isActive else { return }
                    handler.send(reply, context: context)
                }
            case .respond(let status, let contentType, let body, let declareLength):
                var headers = HTTPHeaders()
                if let contentType { headers.add(name: "Content-Type", value: contentType) }
                if declareLength { headers.add(name: "Content-Length", value: String(body.count)) }
                let responseHead = HTTPResponseHead(
                    version: .http1_1, status: HTTPResponseStatus(statusCode: status), headers: headers)
                context.write(wrapOutboundOut(.head(responseHead)), promise: nil)
                if !body.isEmpty {
                    context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: body)))), promise: nil)
                }
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            case .stall:
                var headers = HTTPHeaders()
                headers.add(name: "Content-Type", value: "application/dns-message")
                headers.add(name: "Content-Length", value: "1000")
                context.write(
                    wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))),
                    promise: nil)
                context.writeAndFlush(
                    wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: [0, 0, 0x81, 0x80])))), promise: nil)
            case .drip(let bytes, let interval):
                var headers = HTTPHeaders()
                headers.add(name: "Content-Length", value: String(bytes))
                context.writeAndFlush(
                    wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))),
                    promise: nil)
                let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                let nanoseconds =
                    Int64(interval.components.seconds) * 1_000_000_000 + interval.components.attoseconds / 1_000_000_000
                for index in 0..<bytes {
                    context.eventLoop.scheduleTask(in: .nanoseconds(nanoseconds * Int64(index + 1))) {
                        let (handler, context) = bound.value
                        guard context.channel.isActive else { return }
                        context.writeAndFlush(
                            handler.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: [0x2E])))), promise: nil)
                        if index == bytes - 1 {
                            context.writeAndFlush(handler.wrapOutboundOut(.end(nil)), promise: nil)
                        }
                    }
                }
            case .truncated:
                var headers = HTTPHeaders()
                headers.add(name: "Content-Length", value: "1000")
                context.write(
                    wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))),
                    promise: nil)
                let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                context.writeAndFlush(
                    wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: Array(repeating: 0x2E, count: 10)))))
                )
                .whenComplete { _ in
                    let (handler, context) = bound.value
                    handler.send(.reset, context: context)
                }
            case .hangUp:
                context.close(promise: nil)
            case .reset:
                let channel = context.channel
                guard let socket = channel as? any SocketOptionProvider else {
                    channel.close(promise: nil)
                    return
                }
                socket.setSoLinger(linger(l_onoff: 1, l_linger: 0)).whenComplete { _ in channel.close(promise: nil) }
            case .full(let status, let fields, let body):
                var headers = HTTPHeaders(fields)
                headers.add(name: "Content-Length", value: String(body.count))
                let responseHead = HTTPResponseHead(
                    version: .http1_1, status: HTTPResponseStatus(statusCode: status), headers: headers)
                context.write(wrapOutboundOut(.head(responseHead)), promise: nil)
                if !body.isEmpty {
                    context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: body)))), promise: nil)
                }
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            }
        }
    }

    static func parse(_ head: HTTPRequestHead, body: [UInt8]) -> Request {
        let parts = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        var query: [String: String] = [:]
        if parts.count == 2 {
            for pair in parts[1].split(separator: "&") {
                let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let value = kv.count == 2 ? String(kv[1]).removingPercentEncodingLeniently : ""
                query[String(kv[0])] = value
            }
        }
        var headers: [String: String] = [:]
        for (name, value) in head.headers { headers[name.lowercased()] = value }
        return Request(method: head.method.rawValue, path: String(parts[0]), query: query, headers: headers, body: body)
    }
}

/// A thread-safe counter.
final class Counter: Sendable {
    private let count = Atomic<Int>(0)
    func increment() { count.add(1, ordering: .relaxed) }
    var value: Int { count.load(ordering: .relaxed) }
}

extension String {
    /// `%XX` sequences decoded; invalid ones are kept as they are.
    var removingPercentEncodingLeniently: String {
        var out: [UInt8] = []
        let bytes = Array(utf8)
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count,
                let value = UInt8(String(decoding: bytes[(index + 1)...(index + 2)], as: UTF8.self), radix: 16)
            {
                out.append(value)
                index += 3
            } else {
                out.append(bytes[index])
                index += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
