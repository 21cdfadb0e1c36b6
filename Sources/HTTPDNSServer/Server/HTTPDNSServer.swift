import CoreMetrics
public import HTTPDNS
public import Logging
public import NIOCore
import NIOHTTP1
public import NIOPosix
import NIOSSL
import NIOTLS
public import ServiceLifecycle

/// The network front of an ``HTTPDNSService``: HTTP/1.1 with keep-alive, and with a certificate TLS (1.2 at least)
/// with HTTP/2 (many streams per connection) or HTTP/1.1 chosen by ALPN.
///
/// Every connection has an idle timeout, every request a body limit, and at most
/// ``Configuration/maximumConnections`` are open at once (past it the server stops accepting, so new clients wait in
/// the kernel's backlog until a connection closes), at most ``Configuration/maximumConnectionsPerClient`` from one
/// client network (past it a new connection is closed at once); ``shutdown(grace:)`` stops accepting, marks
/// the service as draining (`/readyz` answers 503), lets requests in progress finish for the grace period and then
/// closes what is left.
public final class HTTPDNSServer: Sendable {
    /// Where and how to listen.
    public struct Configuration: Sendable, Hashable {
        /// The address to listen on (an IP literal).
        public var host: String
        /// The port; 0 picks a free one (see ``HTTPDNSServer/port``).
        public var port: Int
        /// The PEM certificate chain file; with ``privateKeyPath`` the server speaks TLS with HTTP/2 and HTTP/1.1.
        public var certificatePath: String?
        /// The PEM private key file.
        public var privateKeyPath: String?
        /// The largest request body (a DoH POST); larger ones get 413.
        public var maximumBodyBytes: Int
        /// A connection with no request in progress is closed this long after its last complete request (bytes
        /// that do not make a request do not restart it).
        public var idleTimeout: Duration
        /// The TLS handshake must end within this of the accept.
        public var handshakeTimeout: Duration
        /// A request head must arrive whole within this: the first one from the handshake (or the accept), on
        /// HTTP/1.1 each later one from its first byte.
        public var requestHeadTimeout: Duration
        /// A request body must arrive whole within this of its head.
        public var requestBodyTimeout: Duration
        /// A connection whose answers stay unsent (the client does not read them) for this long is closed.
        public var writeTimeout: Duration
        /// The most answer bytes queued on one connection; past it the connection is closed at once. Reading stops
        /// well before (while more than 64 KiB wait), so only a client that stopped reading reaches it.
        public var maximumQueuedBytes: Int
        /// How much of a client's address names its network for ``maximumConnectionsPerClient``.
        public var clientPrefixes: ClientPrefixes
        /// The most connections open at once. At the limit the server stops accepting: new clients wait in the
        /// listen backlog (and see their connect time out if none closes) instead of taking descriptors and memory.
        public var maximumConnections: Int
        /// The most connections open at once from one client network (see ``clientPrefixes``: an IPv4 address, an
        /// IPv6 /56 by default), so that one client cannot hold every place of ``maximumConnections``; past it a new
        /// connection is closed at once.
        public var maximumConnectionsPerClient: Int
        /// Where plain DNS is served over UDP and TCP (RFC 1035, RFC 7766); `nil` for nowhere. Port 0 picks one
        /// (``HTTPDNSServer/dnsPort``).
        public var dnsListen: ServerAddress?
        /// Where DNS over TLS is served (RFC 7858) with the certificate; `nil` for nowhere. Port 0 picks one
        /// (``HTTPDNSServer/dotPort``).
        public var dotListen: ServerAddress?

        /// Creates a configuration; plain HTTP on 127.0.0.1:8053 by default.
        public init(
            host: String = "127.0.0.1", port: Int = 8053, certificatePath: String? = nil,
            privateKeyPath: String? = nil, maximumBodyBytes: Int = 65_535, idleTimeout: Duration = .seconds(30),
            maximumConnections: Int = 10_000, maximumConnectionsPerClient: Int = 1_000,
            handshakeTimeout: Duration = .seconds(10), requestHeadTimeout: Duration = .seconds(10),
            requestBodyTimeout: Duration = .seconds(10), writeTimeout: Duration = .seconds(10),
            maximumQueuedBytes: Int = 1 << 20, clientPrefixes: ClientPrefixes = ClientPrefixes(),
            dnsListen: ServerAddress? = nil, dotListen: ServerAddress? = nil
        ) {
            self.dnsListen = dnsListen
            self.dotListen = dotListen
            self.host = host
            self.port = port
            self.certificatePath = certificatePath
            self.privateKeyPath = privateKeyPath
            self.maximumBodyBytes = maximumBodyBytes
            self.idleTimeout = idleTimeout
            self.maximumConnections = maximumConnections
            self.maximumConnectionsPerClient = maximumConnectionsPerClient
            self.handshakeTimeout = handshakeTimeout
            self.requestHeadTimeout = requestHeadTimeout
            self.requestBodyTimeout = requestBodyTimeout
            self.writeTimeout = writeTimeout
            self.maximumQueuedBytes = maximumQueuedBytes
            self.clientPrefixes = clientPrefixes
        }

        /// The configuration the `serve.*` settings describe, listening on `listen` (by default `serve.listen`).
        package init(settings: ServeSettings, listen: ServerAddress? = nil) {
            let address = listen ?? settings.listen
            self.init(
                host: address.ip.description, port: Int(address.port), certificatePath: settings.certificate,
                privateKeyPath: settings.privateKey, maximumBodyBytes: settings.maximumBodyBytes,
                idleTimeout: .milliseconds(settings.idleTimeoutMilliseconds),
                maximumConnections: settings.maximumConnections,
                maximumConnectionsPerClient: settings.maximumConnectionsPerClient,
                handshakeTimeout: .milliseconds(settings.handshakeTimeoutMilliseconds),
                requestHeadTimeout: .milliseconds(settings.requestHeadTimeoutMilliseconds),
                requestBodyTimeout: .milliseconds(settings.requestBodyTimeoutMilliseconds),
                writeTimeout: .milliseconds(settings.writeTimeoutMilliseconds),
                maximumQueuedBytes: settings.maximumQueuedBytes,
                clientPrefixes: ClientPrefixes(ipv4: settings.clientPrefixV4, ipv6: settings.clientPrefixV6),
                dnsListen: settings.dnsListen, dotListen: settings.dotListen)
        }
    }

    /// The service requests go to.
    public let service: HTTPDNSService
    /// The port the server listens on.
    public let port: Int
    /// The port plain DNS is served on (UDP and TCP), when it is.
    public let dnsPort: Int?
    /// The port DNS over TLS is served on, when it is.
    public let dotPort: Int?
    private let listener: any Channel
    /// The plain DNS and DNS-over-TLS sockets.
    private let dnsListeners: [any Channel]
    private let connections: Connections
    private let counts: Locked<ProtocolCounts>
    private let logger: Logger

    /// Connections accepted, how many of the TLS ones negotiated HTTP/2 and HTTP/1.1, how often the connection
    /// limit stopped accepting, and how many connections the per-client limit closed.
    package struct ProtocolCounts: Sendable, Hashable {
        package var accepted = 0
        package var pauses = 0
        package var refusedPerClient = 0
        package var http2 = 0
        package var http1OverTLS = 0
        /// Connections accepted by each event loop's listener.
        package var acceptedPerLoop: [ObjectIdentifier: Int] = [:]
    }

    /// The connections accepted so far by protocol.
    package var protocolCounts: ProtocolCounts { counts.withLock { $0 } }

    /// Starts listening.
    /// - Throws: ``DNSError/Code/invalidConfiguration`` for unreadable certificate or key files, or the bind error.
    public static func start(
        service: HTTPDNSService, configuration: Configuration, logger: Logger,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> HTTPDNSServer {
        let tls = try Self.tlsContext(configuration, protocols: ["h2", "http/1.1"])
        let dotTLS = configuration.dotListen == nil ? nil : try Self.tlsContext(configuration, protocols: ["dot"])
        if configuration.dotListen != nil, dotTLS == nil {
            throw DNSError(code: .invalidConfiguration, message: "DNS over TLS needs a certificate and a private key")
        }
        guard configuration.maximumConnections > 0, configuration.maximumConnectionsPerClient > 0 else {
            throw DNSError(
                code: .invalidConfiguration,
                message:
                    "maximumConnections and maximumConnectionsPerClient must be positive, not \(configuration.maximumConnections) and \(configuration.maximumConnectionsPerClient)"
            )
        }
        let counts = Locked(ProtocolCounts())
        let connections = Connections(
            limit: configuration.maximumConnections, perClient: configuration.maximumConnectionsPerClient,
            counts: counts, metrics: service.metrics, logger: logger)
        let limits = Exchange.Limits(maximumBodyBytes: configuration.maximumBodyBytes)
        let guardLimits = ConnectionGuard.Limits(
            handshakeTimeout: TimeAmount(configuration.handshakeTimeout),
            headTimeout: TimeAmount(configuration.requestHeadTimeout),
            bodyTimeout: TimeAmount(configuration.requestBodyTimeout),
            idleTimeout: TimeAmount(configuration.idleTimeout), writeTimeout: TimeAmount(configuration.writeTimeout),
            maximumQueuedBytes: configuration.maximumQueuedBytes)
        let metrics = service.metrics
        let prefixes = configuration.clientPrefixes
        let http2 = HTTP2Setup(settings: HTTP2ServerSession.Settings(maximumBodyBytes: configuration.maximumBodyBytes))
        // One table of kept answers per event loop, used only there.
        var memos: [ObjectIdentifier: NIOLoopBoundBox<AnswerMemo>] = [:]
        for loop in eventLoopGroup.makeIterator() {
            memos[ObjectIdentifier(loop)] = .makeBoxSendingValue(AnswerMemo(), eventLoop: loop)
        }
        let memosByLoop = memos
        let initialize: @Sendable (any Channel) -> EventLoopFuture<Void> = { channel in
            counts.withLock {
                $0.accepted += 1
                $0.acceptedPerLoop[ObjectIdentifier(channel.eventLoop), default: 0] += 1
            }
            let client = Exchange.clientAddress(channel)
            guard connections.admit(channel, client: ClientNetwork(client, prefixes: prefixes)) else {
                // Over the client's own limit, or accepted in the same burst as the one that reached the total
                // limit, before accepting stopped.
                return channel.close()
            }
            return channel.eventLoop.makeCompletedFuture {
                let sync = channel.pipeline.syncOperations
                let exchange = Exchange(
                    service: service, limits: limits, logger: logger, client: client,
                    transport: tls == nil ? .http : .https, memo: memosByLoop[ObjectIdentifier(channel.eventLoop)])
                let connectionGuard = ConnectionGuard(limits: guardLimits, tls: tls != nil) { reason in
                    metrics.closedByGuard(reason.rawValue)
                }
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
        // One listening socket; each connection it accepts is handed to the next event loop of the group in turn,
        // so every core answers. (One socket per loop with SO_REUSEPORT measured no faster, and lets a listener on
        // port 0 share its port with another process's of the same user.)
        let bootstrap = ServerBootstrap(group: eventLoopGroup, childGroup: eventLoopGroup)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer(initialize)
        let listener = try await bootstrap.bind(host: configuration.host, port: configuration.port).get()
        let port = listener.localAddress?.port ?? configuration.port
        // Plain DNS and DNS over TLS: the same service, kept answers, per-client limits and guard.
        var dnsListeners: [any Channel] = []
        var dnsPort: Int?
        var dotPort: Int?
        do {
            let streams: @Sendable (any Channel, NIOSSLContext?) -> EventLoopFuture<Void> = { channel, context in
                let client = Exchange.clientAddress(channel)
                guard connections.admit(channel, client: ClientNetwork(client, prefixes: prefixes)) else {
                    return channel.close()
                }
                return channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    let exchange = Exchange(
                        service: service, limits: limits, logger: logger, client: client,
                        transport: context == nil ? .tcp : .tls,
                        memo: memosByLoop[ObjectIdentifier(channel.eventLoop)])
                    let connectionGuard = ConnectionGuard(limits: guardLimits, tls: context != nil) { reason in
                        metrics.closedByGuard(reason.rawValue)
                    }
                    if let context { try sync.addHandler(NIOSSLServerHandler(context: context)) }
                    try sync.addHandler(connectionGuard)
                    try sync.addHandler(DNSStreamHandler(exchange, connectionGuard: connectionGuard))
                }
            }
            func streamListener(_ address: ServerAddress, _ context: NIOSSLContext?) async throws -> any Channel {
                try await ServerBootstrap(group: eventLoopGroup, childGroup: eventLoopGroup)
                    .serverChannelOption(.backlog, value: 256)
                    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                    .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                    .childChannelInitializer { streams($0, context) }
                    .bind(host: address.ip.description, port: Int(address.port)).get()
            }
            func datagramListener(_ address: ServerAddress) async throws -> any Channel {
                try await DatagramBootstrap(group: eventLoopGroup.next())
                    .channelOption(.socketOption(.so_reuseaddr), value: 1)
                    // Up to 32 datagrams per system call (recvmmsg), a bounded number of calls per wake-up; the
                    // answers of one read burst leave together (sendmmsg).
                    .channelOption(.datagramVectorReadMessageCount, value: 32)
                    .channelOption(.maxMessagesPerRead, value: 8)
                    .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: 4_096))
                    .channelInitializer { channel in
                        channel.eventLoop.makeCompletedFuture {
                            let exchange = Exchange(
                                service: service, limits: limits, logger: logger, client: nil, transport: .udp,
                                memo: memosByLoop[ObjectIdentifier(channel.eventLoop)])
                            try channel.pipeline.syncOperations.addHandler(DNSDatagramHandler(exchange))
                        }
                    }
                    .bind(host: address.ip.description, port: Int(address.port)).get()
            }
            if let address = configuration.dnsListen {
                // UDP first: with port 0 it picks the port, and TCP takes the same one. That port may be taken for
                // TCP by someone else: then both are tried again on another.
                for attempt in 1... {
                    let udp = try await datagramListener(address)
                    let chosen = udp.localAddress?.port ?? Int(address.port)
                    do {
                        let tcp = try await streamListener(ServerAddress(ip: address.ip, port: UInt16(chosen)), nil)
                        dnsListeners += [udp, tcp]
                        dnsPort = chosen
                        break
                    } catch {
                        try? await udp.close()
                        guard address.port == 0, attempt < 20 else { throw error }
                    }
                }
            }
            if let address = configuration.dotListen {
                let dot = try await streamListener(address, dotTLS)
                dnsListeners.append(dot)
                dotPort = dot.localAddress?.port ?? Int(address.port)
            }
        } catch {
            try? await listener.close()
            for channel in dnsListeners { try? await channel.close() }
            throw error
        }
        logger.notice(
            "serving HTTP DNS",
            metadata: ["address": "\(configuration.host):\(port)", "tls": "\(tls != nil)"])
        if let dnsPort {
            logger.notice("serving plain DNS", metadata: ["address": "\(configuration.dnsListen!.ip):\(dnsPort)"])
        }
        if let dotPort {
            logger.notice("serving DNS over TLS", metadata: ["address": "\(configuration.dotListen!.ip):\(dotPort)"])
        }
        return HTTPDNSServer(
            service: service, port: port, dnsPort: dnsPort, dotPort: dotPort, listener: listener,
            dnsListeners: dnsListeners, connections: connections, counts: counts, logger: logger)
    }

    private init(
        service: HTTPDNSService, port: Int, dnsPort: Int?, dotPort: Int?, listener: any Channel,
        dnsListeners: [any Channel], connections: Connections, counts: Locked<ProtocolCounts>, logger: Logger
    ) {
        self.counts = counts
        self.service = service
        self.port = port
        self.dnsPort = dnsPort
        self.dotPort = dotPort
        self.dnsListeners = dnsListeners
        self.listener = listener
        self.connections = connections
        self.logger = logger
    }

    /// How many connections are open.
    public var connectionCount: Int { connections.count }

    /// Stops accepting, lets requests in progress finish for `grace`, then closes every connection.
    public func shutdown(grace: Duration = .seconds(5)) async {
        service.drain()
        try? await listener.close()
        for channel in dnsListeners { try? await channel.close() }
        // HTTP/2 clients are told to open no more streams (GOAWAY); what they have open is answered.
        for open in connections.all { open.pipeline.fireUserInboundEventTriggered(ServerDrainingEvent()) }
        let deadline = ContinuousClock.now + grace
        while connections.count > 0, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        for open in connections.all { try? await open.close() }
        logger.notice("stopped serving HTTP DNS")
    }

    private static func tlsContext(_ configuration: Configuration, protocols: [String]) throws -> NIOSSLContext? {
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
            return try NIOSSLContext(configuration: tls)
        } catch {
            throw DNSError(
                code: .invalidConfiguration,
                message: "cannot use the certificate \(certificatePath) and key \(keyPath): \(error)")
        }
    }

    /// What every HTTP/2 connection of a server shares: its SETTINGS and nghttp2's options.
    private struct HTTP2Setup: Sendable {
        var settings: HTTP2ServerSession.Settings
        var options: HTTP2SessionOptions

        init(settings: HTTP2ServerSession.Settings) {
            self.settings = settings
            options = HTTP2SessionOptions()
        }
    }

    private static func negotiation(
        channel: any Channel, _ exchange: Exchange, _ connectionGuard: ConnectionGuard, http2: HTTP2Setup,
        counts: Locked<ProtocolCounts>
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

/// Run in a swift-service-lifecycle `ServiceGroup`: serves until the group shuts down gracefully (SIGTERM, say) or
/// is cancelled, then shuts down as ``HTTPDNSServer/shutdown(grace:)`` does.
extension HTTPDNSServer: Service {
    /// Waits for graceful shutdown or cancellation, then drains and closes.
    public func run() async throws {
        try? await gracefulShutdown()
        await shutdown()
    }
}

/// The open connections, for graceful shutdown and the connection limits.
///
/// At the total limit, accepting stops by turning `autoRead` off on the listening channel (the kernel keeps queueing
/// connections in the backlog) and starts again when one closes. Both option changes are made under the lock that
/// decides them, so they reach the listening channel's event loop in the order they were decided. A client network
/// at its own limit has its new connection closed at once (the backlog cannot hold one client's connections back
/// while serving others'); the table of counts only holds networks with a connection open.
private final class Connections: Sendable {
    private struct State {
        var open: [ObjectIdentifier: any Channel] = [:]
        var perClient: [ClientNetwork: Int] = [:]
        var paused = false
    }

    private let state = Locked(State())
    private let limit: Int
    private let perClientLimit: Int
    private let counts: Locked<HTTPDNSServer.ProtocolCounts>
    private let metrics: ServiceMetrics
    private let logger: Logger

    init(
        limit: Int, perClient: Int, counts: Locked<HTTPDNSServer.ProtocolCounts>, metrics: ServiceMetrics,
        logger: Logger
    ) {
        self.limit = limit
        self.perClientLimit = perClient
        self.counts = counts
        self.metrics = metrics
        self.logger = logger
    }

    var count: Int { state.withLock { $0.open.count } }

    var all: [any Channel] { state.withLock { Array($0.open.values) } }

    /// Counts `channel` from `client` as open until it closes; `false` (and nothing counted) when the total limit
    /// or the client's is already reached.
    func admit(_ channel: any Channel, client: ClientNetwork) -> Bool {
        let key = ObjectIdentifier(channel)
        // Connections without an address to go by (not TCP) count only towards the total.
        let counted = client != .shared
        let (admitted, paused, overClientLimit) = state.withLock { state in
            guard state.open.count < limit else { return (false, false, false) }
            if counted {
                let current = state.perClient[client, default: 0]
                guard current < perClientLimit else { return (false, false, true) }
                state.perClient[client] = current + 1
            }
            state.open[key] = channel
            // Recorded under the lock, so the gauge's last value is the last count.
            metrics.connectionsOpen.record(state.open.count)
            guard state.open.count == limit, !state.paused, let listener = channel.parent else {
                return (true, false, false)
            }
            state.paused = true
            listener.setOption(.autoRead, value: false).whenFailure { _ in }
            return (true, true, false)
        }
        if overClientLimit {
            counts.withLock { $0.refusedPerClient += 1 }
            metrics.connectionsRefused.increment()
            logger.debug(
                "a client network is at its connection limit; closing its new connection",
                metadata: ["limit": "\(perClientLimit)"])
        }
        if paused {
            counts.withLock { $0.pauses += 1 }
            metrics.acceptPauses.increment()
            logger.notice(
                "connection limit reached; new connections wait in the backlog", metadata: ["limit": "\(limit)"])
        }
        guard admitted else { return false }
        channel.closeFuture.whenComplete { [self] _ in
            state.withLock { state in
                state.open[key] = nil
                metrics.connectionsOpen.record(state.open.count)
                if counted {
                    let remaining = state.perClient[client, default: 1] - 1
                    state.perClient[client] = remaining > 0 ? remaining : nil
                }
                if state.paused, state.open.count < limit, let listener = channel.parent {
                    state.paused = false
                    listener.setOption(.autoRead, value: true).whenFailure { _ in }
                }
            }
        }
        return true
    }
}
