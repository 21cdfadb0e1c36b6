import CoreMetrics
import HTTPDNS
import HTTPDNSHTTP2
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOTLS

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension HTTPDNSServer {
    /// How long a closing TLS connection waits for the client's close_notify.
    static let tlsShutdownTimeout = TimeAmount.milliseconds(500)

    /// The TLS context of the certificate and key in `configuration`, offering `protocols` by ALPN; `nil` without a
    /// certificate.
    static func tlsContext(_ configuration: Configuration, protocols: [String]) throws -> NIOSSLContext? {
        guard let certificatePath = configuration.certificatePath, let keyPath = configuration.privateKeyPath else {
            return nil
        }
        do {
            let chain = try NIOSSLCertificate.fromPEMFile(certificatePath).map {
                NIOSSLCertificateSource.certificate($0)
            }
            var tls = TLSConfiguration.makeServerConfiguration(
                certificateChain: chain, privateKey: .privateKey(try NIOSSLPrivateKey(file: keyPath, format: .pem)))
            tls.minimumTLSVersion = .tlsv12
            tls.applicationProtocols = protocols
            // Closing, the server sends close_notify and waits this long for the client's (reading, and discarding,
            // whatever else the client sends meanwhile): NIOSSL's 5 s let a client push hundreds of megabytes into
            // a connection the server had already given up on.
            tls.shutdownTimeout = Self.tlsShutdownTimeout
            return try NIOSSLContext(configuration: tls)
        } catch {
            throw HTTPDNSError(
                code: .invalidConfiguration,
                message: "cannot use the certificate \(certificatePath) and key \(keyPath): \(error)")
        }
    }
}

/// What every listener of one server shares, and how each binds: the HTTP listener (TLS with ALPN, or plain
/// HTTP/1.1), plain DNS over UDP and TCP, and DNS over TLS. Every accepted connection passes the connection limits
/// first and then gets its deadlines (``ConnectionGuard``) and an ``Exchange`` with its event loop's kept answers.
struct ListenerSetup: Sendable {
    let service: HTTPDNSService
    let logger: Logger
    let eventLoopGroup: any EventLoopGroup
    let counts: Locked<HTTPDNSServer.ProtocolCounts>
    let connections: Connections
    /// The admin listener's connections, limited apart from the public ones.
    let adminConnections: Connections
    let listenerLimits: HTTPDNSServer.Configuration.ListenerLimits
    let limits: Exchange.Limits
    let guardLimits: ConnectionGuard.Limits
    let prefixes: ClientPrefixes
    /// The rate of new TLS connections, in all and per network (the CPU of handshakes).
    let handshakes: HandshakeBudget
    let http2: HTTP2Setup
    /// One table of kept answers per event loop, used only there.
    let memos: [ObjectIdentifier: NIOLoopBoundBox<AnswerMemo>]

    init(
        service: HTTPDNSService, configuration: HTTPDNSServer.Configuration, logger: Logger,
        eventLoopGroup: any EventLoopGroup, counts: Locked<HTTPDNSServer.ProtocolCounts>
    ) {
        self.service = service
        self.logger = logger
        self.eventLoopGroup = eventLoopGroup
        self.counts = counts
        connections = Connections(
            limit: configuration.maximumConnections, perClient: configuration.maximumConnectionsPerClient,
            prefixes: configuration.clientPrefixes, counts: counts, metrics: service.metrics, logger: logger)
        adminConnections = Connections(
            limit: configuration.maximumAdminConnections,
            perClient: max(1, configuration.maximumAdminConnections / 4), prefixes: configuration.clientPrefixes,
            counts: Locked(HTTPDNSServer.ProtocolCounts()),
            metrics: nil, logger: logger)
        listenerLimits = configuration.listenerLimits
        limits = Exchange.Limits(maximumBodyBytes: configuration.maximumBodyBytes)
        guardLimits = ConnectionGuard.Limits(
            handshakeTimeout: TimeAmount(configuration.handshakeTimeout),
            headTimeout: TimeAmount(configuration.requestHeadTimeout),
            bodyTimeout: TimeAmount(configuration.requestBodyTimeout),
            idleTimeout: TimeAmount(configuration.idleTimeout), writeTimeout: TimeAmount(configuration.writeTimeout),
            maximumQueuedBytes: configuration.maximumQueuedBytes)
        prefixes = configuration.clientPrefixes
        handshakes = HandshakeBudget(
            perSecond: configuration.maximumHandshakesPerSecond, prefixes: configuration.clientPrefixes)
        http2 = HTTP2Setup(settings: HTTP2ServerSession.Settings(maximumBodyBytes: configuration.maximumBodyBytes))
        var memos: [ObjectIdentifier: NIOLoopBoundBox<AnswerMemo>] = [:]
        for loop in eventLoopGroup.makeIterator() {
            memos[ObjectIdentifier(loop)] = .makeBoxSendingValue(AnswerMemo(), eventLoop: loop)
        }
        self.memos = memos
    }

    /// The plain DNS and DNS-over-TLS sockets, and the ports they took.
    struct DNSListeners {
        var channels: [any Channel] = []
        var dnsPort: Int?
        var dotPort: Int?
    }

    /// Admits a new connection from its client's network. Returns the client's address (itself `nil` when the
    /// channel has none), or `nil` when the connection is refused: over the client's own limit, or accepted in the
    /// same burst as the one that reached the total limit, before accepting stopped. The caller closes it then.
    private func admit(_ channel: any Channel, to table: Connections, listenerLimit: Int?, tls: Bool = false)
        -> Admitted?
    {
        let client = Exchange.clientAddress(channel)
        if tls, !handshakes.admit(client) {
            service.metrics.handshakesRefused.increment()
            return nil
        }
        guard
            let activity = table.admit(
                channel, client: ClientNetwork(client, prefixes: prefixes), listenerLimit: listenerLimit)
        else { return nil }
        return Admitted(client: client, activity: activity)
    }

    /// An admitted connection's client and where its guard says whether it is idle.
    private struct Admitted {
        var client: IPAddress?
        var activity: ConnectionActivity
    }

    /// The exchange and deadlines of a connection accepted on `channel`.
    private func exchange(
        _ channel: any Channel, _ admitted: Admitted, transport: ServiceRequest.Transport, tls: Bool,
        listener: ServiceRequest.Listener = .service
    ) -> (Exchange, ConnectionGuard) {
        let metrics = service.metrics
        let exchange = Exchange(
            service: service, limits: limits, logger: logger, client: admitted.client, transport: transport,
            memo: listener == .service ? memos[ObjectIdentifier(channel.eventLoop)] : nil, listener: listener)
        let connectionGuard = ConnectionGuard(limits: guardLimits, tls: tls, activity: admitted.activity) { reason in
            metrics.closedByGuard(reason.rawValue)
        }
        return (exchange, connectionGuard)
    }

    /// One listening socket for HTTP; each connection it accepts is handed to the next event loop of the group in
    /// turn, so every core answers. (One socket per loop with SO_REUSEPORT measured no faster, and lets a listener on
    /// port 0 share its port with another process's of the same user.)
    func bindHTTP(host: String, port: Int, tls: NIOSSLContext?) async throws -> any Channel {
        let (setup, counts, http2) = (self, counts, http2)
        return try await streamBootstrap()
            .childChannelInitializer { channel in
                counts.withLock {
                    $0.accepted += 1
                    $0.acceptedPerLoop[ObjectIdentifier(channel.eventLoop), default: 0] += 1
                }
                guard
                    let admitted = setup.admit(
                        channel, to: setup.connections, listenerLimit: setup.listenerLimits.http, tls: tls != nil)
                else { return channel.close() }
                return channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    let (exchange, connectionGuard) = setup.exchange(
                        channel, admitted, transport: tls == nil ? .http : .https, tls: tls != nil)
                    if let tls {
                        try sync.addHandler(NIOSSLServerHandler(context: tls))
                        try sync.addHandler(connectionGuard)
                        try sync.addHandler(
                            Self.negotiation(channel: channel, exchange, connectionGuard, http2: http2, counts: counts))
                    } else {
                        try sync.addHandler(connectionGuard)
                        try Self.http1(channel.pipeline, exchange, connectionGuard)
                    }
                }
            }
            .bind(host: host, port: port).get()
    }

    /// The admin listener: plain HTTP/1.1 for the operator's endpoints, with the same deadlines as the public one
    /// but a table of connections of its own.
    func bindAdmin(_ address: ServerAddress, hostNames: [String]) async throws -> any Channel {
        let setup = self
        let origin = AdminOrigin(listen: address.ip, names: hostNames)
        return try await streamBootstrap()
            .childChannelInitializer { channel in
                guard let admitted = setup.admit(channel, to: setup.adminConnections, listenerLimit: nil) else {
                    return channel.close()
                }
                return channel.eventLoop.makeCompletedFuture {
                    var (exchange, connectionGuard) = setup.exchange(
                        channel, admitted, transport: .http, tls: false, listener: .admin)
                    exchange.adminOrigin = origin
                    try channel.pipeline.syncOperations.addHandler(connectionGuard)
                    try Self.http1(channel.pipeline, exchange, connectionGuard)
                }
            }
            .bind(host: address.ip.description, port: Int(address.port)).get()
    }

    /// Plain DNS (UDP and TCP on one port) and DNS over TLS, where configured: the same service, kept answers,
    /// per-client limits and deadlines as HTTP. On failure every socket opened here is closed again.
    func bindDNS(dnsListen: ServerAddress?, dotListen: ServerAddress?, dotTLS: NIOSSLContext?) async throws
        -> DNSListeners
    {
        var listeners = DNSListeners()
        do {
            if let address = dnsListen {
                let (channels, port) = try await bindPlainDNS(address)
                listeners.channels += channels
                listeners.dnsPort = port
            }
            if let address = dotListen {
                let dot = try await HTTPDNSServer.listening("dot.listen", address) {
                    try await streamListener(address, dotTLS)
                }
                listeners.channels.append(dot)
                listeners.dotPort = dot.localAddress?.port ?? Int(address.port)
            }
        } catch {
            for channel in listeners.channels { try? await channel.close() }
            throw error
        }
        return listeners
    }

    /// Binds plain DNS at `address`, UDP and TCP on one port: the channels and the port. UDP first: with port 0 it
    /// picks the port, and TCP takes the same one. That port may be taken for TCP by someone else: then both are
    /// tried again on another.
    private func bindPlainDNS(_ address: ServerAddress) async throws -> (channels: [any Channel], port: Int) {
        for attempt in 1... {
            let udp = try await HTTPDNSServer.listening("dns.listen", address, over: "UDP") {
                try await datagramListeners(address)
            }
            let chosen = udp.first?.localAddress?.port ?? Int(address.port)
            do {
                let tcp = try await HTTPDNSServer.listening("dns.listen", address, over: "TCP") {
                    try await streamListener(ServerAddress(ip: address.ip, port: UInt16(chosen)), nil)
                }
                return (udp + [tcp], chosen)
            } catch {
                for channel in udp { try? await channel.close() }
                guard address.port == 0, attempt < 20 else { throw error }
            }
        }
        preconditionFailure("the loop returns or throws")
    }

    /// A listening TCP socket's options, shared by HTTP, DNS over TCP and DNS over TLS: its connections are spread
    /// over the group's event loops.
    private func streamBootstrap() -> ServerBootstrap {
        ServerBootstrap(group: eventLoopGroup, childGroup: eventLoopGroup)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            // Reads sized to what arrives, but never past 16 KiB (a TLS record), four to a wake-up: a connection's read
            // buffers and the TLS layer's decrypted buffer stay at most that size, where NIO's default lets them grow
            // to 64 KiB for a client that sends fast (docs/security.md: what a connection costs).
            .childChannelOption(
                .recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 2_048, maximum: 16_384))
    }

    /// DNS over TCP (`context` nil) or over TLS.
    private func streamListener(_ address: ServerAddress, _ context: NIOSSLContext?) async throws -> any Channel {
        let setup = self
        return try await streamBootstrap()
            .childChannelInitializer { channel in
                let limit = context == nil ? setup.listenerLimits.dns : setup.listenerLimits.dot
                guard
                    let admitted = setup.admit(
                        channel, to: setup.connections, listenerLimit: limit, tls: context != nil)
                else {
                    return channel.close()
                }
                return channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    let (exchange, connectionGuard) = setup.exchange(
                        channel, admitted, transport: context == nil ? .tcp : .tls, tls: context != nil)
                    if let context { try sync.addHandler(NIOSSLServerHandler(context: context)) }
                    try sync.addHandler(connectionGuard)
                    try sync.addHandler(DNSStreamHandler(exchange, connectionGuard: connectionGuard))
                }
            }
            .bind(host: address.ip.description, port: Int(address.port)).get()
    }

    /// DNS over UDP: one socket on each event loop of the group, all bound to one port with `SO_REUSEPORT` (the
    /// kernel admits to the group only sockets of this process's user), so that UDP is answered on every core as TCP
    /// is. Each datagram goes to a socket at random (``DatagramSpread``), not by the client's address and port. With
    /// port 0 the first socket picks it.
    private func datagramListeners(_ address: ServerAddress) async throws -> [any Channel] {
        var channels: [any Channel] = []
        let rateLimited = DNSDatagramHandler.RateLimitedCount()
        let cookies = DNSCookies()
        do {
            var port = address.port
            for loop in eventLoopGroup.makeIterator() {
                let channel = try await datagramListener(
                    ServerAddress(ip: address.ip, port: port), on: loop, rateLimited: rateLimited, cookies: cookies)
                channels.append(channel)
                port = channel.localAddress?.port.map { UInt16($0) } ?? port
            }
        } catch {
            for channel in channels { try? await channel.close() }
            throw error
        }
        do {
            if let first = channels.first { try await DatagramSpread.attach(to: first, sockets: channels.count) }
        } catch {
            logger.notice(
                "UDP queries go to the event loops by client address and port: the kernel refused to spread them",
                metadata: ["error": "\(error)"])
        }
        return channels
    }

    /// One UDP socket of ``datagramListeners(_:)``, on `loop`.
    private func datagramListener(
        _ address: ServerAddress, on loop: any EventLoop, rateLimited: DNSDatagramHandler.RateLimitedCount,
        cookies: DNSCookies
    ) async throws -> any Channel {
        let (service, limits, logger, memos) = (service, limits, logger, memos)
        return try await DatagramBootstrap(group: loop)
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            .channelOption(.socketOption(NIOBSDSocket.Option(rawValue: SO_REUSEPORT)), value: 1)
            // Up to 32 datagrams per system call (recvmmsg), a bounded number of calls per wake-up; the answers of
            // one read burst leave together (sendmmsg).
            .channelOption(.datagramVectorReadMessageCount, value: 32)
            .channelOption(.maxMessagesPerRead, value: 8)
            // NIO gives each datagram of a vector read an equal slice of the buffer: 4 KiB each (a buffer of 4 KiB
            // gave each query 128 bytes, and cut longer ones).
            .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: 32 * 4_096))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let exchange = Exchange(
                        service: service, limits: limits, logger: logger, client: nil, transport: .udp,
                        memo: memos[ObjectIdentifier(channel.eventLoop)])
                    try channel.pipeline.syncOperations.addHandler(
                        DNSDatagramHandler(exchange, rateLimited: rateLimited, cookies: cookies))
                }
            }
            .bind(host: address.ip.description, port: Int(address.port)).get()
    }

    /// What every HTTP/2 connection of a server shares: its SETTINGS and nghttp2's options.
    struct HTTP2Setup: Sendable {
        var settings: HTTP2ServerSession.Settings
        var options: HTTP2SessionOptions

        init(settings: HTTP2ServerSession.Settings) {
            self.settings = settings
            options = HTTP2SessionOptions()
        }
    }

    private static func negotiation(
        channel: any Channel, _ exchange: Exchange, _ connectionGuard: ConnectionGuard, http2: HTTP2Setup,
        counts: Locked<HTTPDNSServer.ProtocolCounts>
    ) -> ApplicationProtocolNegotiationHandler {
        let bound = NIOLoopBound(connectionGuard, eventLoop: channel.eventLoop)
        return ApplicationProtocolNegotiationHandler { result in
            channel.eventLoop.makeCompletedFuture {
                switch result {
                case .negotiated("h2"):
                    counts.withLock { $0.http2 += 1 }
                    try channel.pipeline.syncOperations.addHandler(
                        HTTP2ServiceHandler(
                            exchange, connectionGuard: bound.value, settings: http2.settings, options: http2.options))
                default:
                    counts.withLock { $0.http1OverTLS += 1 }
                    try http1(channel.pipeline, exchange, bound.value)
                }
            }
        }
    }

    private static func http1(
        _ pipeline: ChannelPipeline, _ exchange: Exchange, _ connectionGuard: ConnectionGuard
    ) throws {
        try pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
        try pipeline.syncOperations.addHandler(HTTP1ServiceHandler(exchange, connectionGuard: connectionGuard))
    }
}
