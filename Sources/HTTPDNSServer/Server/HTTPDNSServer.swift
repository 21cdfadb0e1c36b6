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
        /// The largest request body (a DoH POST); larger ones get 413. 4 KiB by default: a DNS query with every
        /// EDNS option a client sends (subnet, cookie, padding to 128 bytes) is a few hundred bytes.
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
        /// The most connections open at once from one client network (see ``clientPrefixes``: an IPv4 /24, an IPv6
        /// /48 by default), so that one client cannot hold every place of ``maximumConnections``; past it a new
        /// connection is closed at once.
        public var maximumConnectionsPerClient: Int
        /// Where plain DNS is served over UDP and TCP (RFC 1035, RFC 7766); `nil` for nowhere. Port 0 picks one
        /// (``HTTPDNSServer/dnsPort``).
        public var dnsListen: ServerAddress?
        /// Where DNS over TLS is served (RFC 7858) with the certificate; `nil` for nowhere. Port 0 picks one
        /// (``HTTPDNSServer/dotPort``).
        public var dotListen: ServerAddress?
        /// Where the operator's endpoints are served over plain HTTP/1.1: `/metrics`, `/healthz` and `/readyz`;
        /// `nil` for nowhere. The public listener never serves `/metrics`. Port 0 picks one
        /// (``HTTPDNSServer/adminPort``). Keep it on loopback or a private network: it has no TLS and no rate limit.
        public var adminListen: ServerAddress?
        /// The most connections open at once on the admin listener (at most a quarter of them from one client
        /// network), counted apart from ``maximumConnections``, so that clients filling the public listeners never
        /// lock the operator out.
        public var maximumAdminConnections: Int
        /// Names besides loopback literals, `localhost` and its own address that the admin listener answers for in
        /// `Host` (any other gets 421: a DNS rebinding defence, see docs/security.md).
        public var adminHostNames: [String] = []
        /// New TLS connections (HTTPS and DNS over TLS) a second in all, a sixteenth of it per client network, each
        /// with a burst of twice its rate; past it a connection is closed before its handshake (the CPU a handshake
        /// costs, docs/security.md).
        public var maximumHandshakesPerSecond: Int = 1_024
        /// Limits of each public listener's own, within ``maximumConnections``.
        public var listenerLimits: ListenerLimits

        /// The most connections one public listener may hold, within the shared ``maximumConnections``; `nil` for
        /// no limit of its own. A listener at its limit stops accepting (new clients wait in its backlog) until one
        /// of its own connections closes, so one protocol's clients cannot take every place.
        public struct ListenerLimits: Sendable, Hashable {
            /// The HTTP listener (DoH, the JSON and vendor APIs).
            public var http: Int?
            /// Plain DNS over TCP.
            public var dns: Int?
            /// DNS over TLS.
            public var dot: Int?

            /// Creates limits; none by default.
            public init(http: Int? = nil, dns: Int? = nil, dot: Int? = nil) {
                self.http = http
                self.dns = dns
                self.dot = dot
            }
        }

        /// Creates a configuration; plain HTTP on 127.0.0.1:8053 by default.
        public init(
            host: String = "127.0.0.1", port: Int = 8053, certificatePath: String? = nil,
            privateKeyPath: String? = nil, maximumBodyBytes: Int = 4_096, idleTimeout: Duration = .seconds(30),
            maximumConnections: Int = 768, maximumConnectionsPerClient: Int = 48,
            handshakeTimeout: Duration = .seconds(10), requestHeadTimeout: Duration = .seconds(10),
            requestBodyTimeout: Duration = .seconds(10), writeTimeout: Duration = .seconds(10),
            maximumQueuedBytes: Int = 1 << 20, clientPrefixes: ClientPrefixes = ClientPrefixes(),
            dnsListen: ServerAddress? = nil, dotListen: ServerAddress? = nil, adminListen: ServerAddress? = nil,
            maximumAdminConnections: Int = 64, listenerLimits: ListenerLimits = ListenerLimits()
        ) {
            self.adminListen = adminListen
            self.maximumAdminConnections = maximumAdminConnections
            self.listenerLimits = listenerLimits
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

        /// The address and port to listen on, as one value (`serve.listen`).
        package var listen: ServerAddress {
            get {
                // Settings always give an IP literal; only a `host` set in code can be anything else.
                ServerAddress(ip: IPAddress(host) ?? IPAddress(ipv4: 127, 0, 0, 1), port: UInt16(clamping: port))
            }
            set {
                host = newValue.ip.description
                port = Int(newValue.port)
            }
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
    /// The port of the admin listener (`/metrics`), when there is one.
    public let adminPort: Int?
    private let listener: any Channel
    /// The plain DNS and DNS-over-TLS sockets.
    private let dnsListeners: [any Channel]
    private let connections: Connections
    /// The admin listener and its connections, apart from the public ones.
    private let admin: (listener: any Channel, connections: Connections)?
    private let counts: Locked<ProtocolCounts>
    private let logger: Logger

    /// Connections accepted, how many of the TLS ones negotiated HTTP/2 and HTTP/1.1, how often the connection
    /// limit stopped accepting, how many idle connections were closed to make room, and how many connections the
    /// per-client limit closed.
    struct ProtocolCounts: Sendable, Hashable {
        var accepted = 0
        var pauses = 0
        var shed = 0
        var refusedPerClient = 0
        var http2 = 0
        var http1OverTLS = 0
        /// Connections accepted by each event loop's listener.
        var acceptedPerLoop: [ObjectIdentifier: Int] = [:]
    }

    /// The connections accepted so far by protocol.
    var protocolCounts: ProtocolCounts { counts.withLock { $0 } }

    /// Runs `bind` for the listener of settings key `key` at `address` (`over` a protocol, when the listener has
    /// two); a failure names them.
    /// - Throws: `HTTPDNSError.Code.listenFailed`, with the system's reason and call.
    static func listening<Result>(
        _ key: String, _ address: ServerAddress, over transport: String? = nil, _ bind: () async throws -> Result
    ) async throws -> Result {
        do {
            return try await bind()
        } catch let error as HTTPDNSError where error.code == .listenFailed {
            throw error
        } catch {
            let over = transport.map { " (\($0))" } ?? ""
            throw HTTPDNSError(
                code: .listenFailed,
                message: "cannot listen on \(address)\(over) for serve.\(key): \(Self.reason(error))")
        }
    }

    /// The system's reason in a bind error and the call that failed (`Address already in use (bind)`), without
    /// NIO's argument list.
    static func reason(_ error: any Error) -> String {
        guard let error = error as? IOError else { return "\(error)" }
        let call = error.description.split(separator: "(").first.map { " (\($0))" } ?? ""
        return String(cString: strerror(error.errnoCode)) + call
    }

    /// Starts listening.
    /// - Throws: `HTTPDNSError.Code.invalidConfiguration` for unreadable certificate or key files or listeners that
    ///   share a port; `HTTPDNSError.Code.listenFailed` naming the listener's key and address when one cannot open.
    public static func start(
        service: HTTPDNSService, configuration: Configuration, logger: Logger,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> HTTPDNSServer {
        // A certificate without its key (or the other way round) is a mistake, never a reason to serve plain HTTP.
        guard (configuration.certificatePath == nil) == (configuration.privateKeyPath == nil) else {
            throw HTTPDNSError(
                code: .invalidConfiguration, message: "a certificate and a private key go together; one is missing")
        }
        if let (key, problem) = configuration.listenerClash() {
            throw HTTPDNSError(code: .invalidConfiguration, message: "serve.\(key): \(problem)")
        }
        let tls = try Self.tlsContext(configuration, protocols: ["h2", "http/1.1"])
        let dotTLS = configuration.dotListen == nil ? nil : try Self.tlsContext(configuration, protocols: ["dot"])
        if configuration.dotListen != nil, dotTLS == nil {
            throw HTTPDNSError(
                code: .invalidConfiguration, message: "DNS over TLS needs a certificate and a private key")
        }
        let limits = [
            configuration.maximumConnections, configuration.maximumConnectionsPerClient,
            configuration.maximumAdminConnections,
        ]
        let listenerLimits = [
            configuration.listenerLimits.http, configuration.listenerLimits.dns, configuration.listenerLimits.dot,
        ]
        guard limits.allSatisfy({ $0 > 0 }), listenerLimits.allSatisfy({ $0 ?? 1 > 0 }) else {
            throw HTTPDNSError(
                code: .invalidConfiguration,
                message:
                    "maximumConnections, maximumConnectionsPerClient, maximumAdminConnections and listenerLimits must be positive, not \(limits) and \(listenerLimits)"
            )
        }
        let counts = Locked(ProtocolCounts())
        let setup = ListenerSetup(
            service: service, configuration: configuration, logger: logger, eventLoopGroup: eventLoopGroup,
            counts: counts)
        // The admin listener first: it has a fixed port by default, the likeliest to be taken.
        var admin: (any Channel)?
        if let address = configuration.adminListen {
            admin = try await Self.listening("admin.listen", address) {
                try await setup.bindAdmin(address, hostNames: configuration.adminHostNames)
            }
        }
        let listener: any Channel
        let dns: ListenerSetup.DNSListeners
        do {
            listener = try await Self.listening("listen", configuration.listen) {
                try await setup.bindHTTP(host: configuration.host, port: configuration.port, tls: tls)
            }
            do {
                dns = try await setup.bindDNS(
                    dnsListen: configuration.dnsListen, dotListen: configuration.dotListen, dotTLS: dotTLS)
            } catch {
                try? await listener.close()
                throw error
            }
        } catch {
            try? await admin?.close()
            throw error
        }
        let server = HTTPDNSServer(
            service: service, listener: listener, dns: dns,
            admin: admin.map { (listener: $0, connections: setup.adminConnections) }, connections: setup.connections,
            counts: counts,
            logger: logger)
        server.logListeners(configuration, tls: tls != nil)
        service.setListeners(server.listening(configuration, tls: tls != nil))
        return server
    }

    /// Where the server listens, with the ports bound (a configured port 0 is the one the system chose).
    private func listening(_ configuration: Configuration, tls: Bool) -> [ServerStatus.Listener] {
        func address(_ ip: IPAddress, _ port: Int) -> String { ServerAddress(ip: ip, port: UInt16(port)).description }
        var listeners = [
            ServerStatus.Listener(kind: tls ? "https" : "http", address: address(configuration.listen.ip, port))
        ]
        if let dnsPort, let listen = configuration.dnsListen {
            listeners.append(.init(kind: "dns", address: address(listen.ip, dnsPort)))
        }
        if let dotPort, let listen = configuration.dotListen {
            listeners.append(.init(kind: "dot", address: address(listen.ip, dotPort)))
        }
        if let adminPort, let listen = configuration.adminListen {
            listeners.append(.init(kind: "admin", address: address(listen.ip, adminPort)))
        }
        return listeners
    }

    private init(
        service: HTTPDNSService, listener: any Channel, dns: ListenerSetup.DNSListeners,
        admin: (listener: any Channel, connections: Connections)?, connections: Connections,
        counts: Locked<ProtocolCounts>, logger: Logger
    ) {
        self.counts = counts
        self.service = service
        self.port = listener.localAddress?.port ?? 0
        self.dnsPort = dns.dnsPort
        self.dotPort = dns.dotPort
        self.dnsListeners = dns.channels
        self.listener = listener
        self.admin = admin
        self.adminPort = admin?.listener.localAddress?.port
        self.connections = connections
        self.logger = logger
    }

    private func logListeners(_ configuration: Configuration, tls: Bool) {
        logger.notice(
            "serving HTTP DNS", metadata: ["address": "\(configuration.host):\(port)", "tls": "\(tls)"])
        if let dnsPort, let address = configuration.dnsListen {
            logger.notice("serving plain DNS", metadata: ["address": "\(address.ip):\(dnsPort)"])
        }
        if let dotPort, let address = configuration.dotListen {
            logger.notice("serving DNS over TLS", metadata: ["address": "\(address.ip):\(dotPort)"])
        }
        if let adminPort, let address = configuration.adminListen {
            logger.notice("serving metrics and health checks", metadata: ["address": "\(address.ip):\(adminPort)"])
        }
    }

    /// How many connections are open on the public listeners.
    public var connectionCount: Int { connections.count }

    /// How many of the public listeners' connections are between requests.
    var idleConnectionCount: Int { connections.idleCount }

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
        // The admin listener answered /readyz (503) and /metrics through the grace period; now it goes too.
        if let admin {
            try? await admin.listener.close()
            for open in admin.connections.all { try? await open.close() }
        }
        logger.notice("stopped serving HTTP DNS")
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
