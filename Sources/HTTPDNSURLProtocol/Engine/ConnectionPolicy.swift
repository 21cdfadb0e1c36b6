public import Configuration
public import HTTPDNS
public import Tracing
import HTTPDNSCore

/// How both fronts (``HTTPDNSInterceptor`` for URLSession, ``HTTPDNSClient`` for AsyncHTTPClient) reach a host:
/// which hosts they resolve, how far a request fails over and when it races connects, their redirects, timeouts,
/// trust roots, pinned-client limits, and where each request's trace and spans go. One value, read by the exchange
/// engine and the pinned transport as it is: `HTTPDNSClient.Configuration` is this type, and
/// `HTTPDNSInterceptor.Configuration` holds one as `connection` beside what only URLSession needs.
public struct ConnectionPolicy: Sendable {
    /// Which hosts are resolved here (default: every host but IP literals and `localhost`); others are left to the
    /// client's own resolution.
    public var scope: InterceptionScope
    /// Follow redirects (default `true`), each hop resolved again; `false` returns the 3xx answer as it is.
    public var followRedirects: Bool
    /// Redirects followed before the request fails with `HTTPDNSError.Code.tooManyRedirects` (default 16).
    public var maximumRedirects: Int
    /// Follow a redirect from `https` to `http` (default `false`: it fails with
    /// `HTTPDNSError.Code.insecureRedirect`, so nothing the TLS connection protected goes out in clear).
    public var allowsInsecureRedirects: Bool
    /// How many further addresses a hop may try after the first fails to connect (default 2).
    public var maximumFailovers: Int
    /// The time a TCP connect plus TLS handshake may take on one address (default 2 s).
    public var connectTimeout: Duration
    /// How long an idle connection is kept for reuse (default 60 s).
    public var idleConnectionTimeout: Duration
    /// PEM files with extra trusted CA certificates, added to the system roots; nothing turns verification off.
    public var additionalTrustRoots: [String]
    /// Pinned (host, IP) clients kept; the least recently used beyond it are closed once idle (default 64).
    public var maximumPinnedClients: Int
    /// HTTP/1.1 connections to one pinned address at once (default 8; 100 streams once it speaks HTTP/2); more
    /// requests queue, in arrival order, until their deadline.
    public var maximumConnectionsPerHost: Int
    /// The connection race's delay between attempts (default 250 ms; `.zero` turns racing off). TCP connects to the
    /// ranked addresses race when the best one has not proven itself, so a dead first address costs this delay
    /// rather than a connect timeout.
    public var connectionAttemptDelay: Duration
    /// Where each hop's spans go (swift-distributed-tracing): `nil` (the default) uses the process's
    /// `InstrumentationSystem.tracer`, which records nothing unless the application bootstrapped one (swift-otel,
    /// say). A hop is a client span named by its method, as AsyncHTTPClient names its own, with `httpdns.resolve`,
    /// `httpdns.race` and one `httpdns.attempt` per address tried under it; no attribute holds the URL's query or
    /// a header value.
    public var tracer: (any Tracer)? = nil
    /// Called once per request with its trace: when it finished (for a streamed body, when the body was read to its
    /// end, failed or was dropped) or failed before an answer. It may be called on an event loop thread: it must
    /// return quickly and never block.
    public var traceHandler: (@Sendable (RequestTrace) -> Void)?

    /// Creates a policy; every parameter has the documented default.
    public init(
        scope: InterceptionScope = InterceptionScope(),
        followRedirects: Bool = true,
        maximumRedirects: Int = 16,
        allowsInsecureRedirects: Bool = false,
        maximumFailovers: Int = 2,
        connectTimeout: Duration = .seconds(2),
        idleConnectionTimeout: Duration = .seconds(60),
        additionalTrustRoots: [String] = [],
        maximumPinnedClients: Int = 64,
        maximumConnectionsPerHost: Int = 8,
        connectionAttemptDelay: Duration = .milliseconds(250),
        traceHandler: (@Sendable (RequestTrace) -> Void)? = nil
    ) {
        self.scope = scope
        self.followRedirects = followRedirects
        self.maximumRedirects = maximumRedirects
        self.allowsInsecureRedirects = allowsInsecureRedirects
        self.maximumFailovers = maximumFailovers
        self.connectTimeout = connectTimeout
        self.idleConnectionTimeout = idleConnectionTimeout
        self.additionalTrustRoots = additionalTrustRoots
        self.maximumPinnedClients = maximumPinnedClients
        self.maximumConnectionsPerHost = maximumConnectionsPerHost
        self.connectionAttemptDelay = connectionAttemptDelay
        self.traceHandler = traceHandler
    }

    /// The defaults with the `interception.*` keys it owns, read from `config`, a reader scoped to that section: the
    /// scope (`include`, `exclude`), the connection race (`connectionAttemptDelayMs`; 0 turns it off), the connect
    /// timeout (`connectTimeoutMs`), insecure redirects (`allowInsecureRedirects`) and trust roots (`trustCA`).
    /// - Throws: `HTTPDNSError.Code.invalidConfiguration` naming the key for a bad value.
    public init(configReader config: ConfigReader) throws(HTTPDNSError) {
        self = try HTTPDNSInterceptor.Configuration(configReader: config).connection
    }

    /// Whether connects race (a positive ``connectionAttemptDelay``).
    var racesConnections: Bool { connectionAttemptDelay > .zero }

    /// The connection race's delay in whole milliseconds, 0 when racing is off: what
    /// `interception.connectionAttemptDelayMs` sets.
    var connectionAttemptDelayMilliseconds: Int {
        get { racesConnections ? Int(connectionAttemptDelay.roundedUpMilliseconds) : 0 }
        set { connectionAttemptDelay = .milliseconds(max(newValue, 0)) }
    }

    /// Takes the settings a running front follows from `edited` (trust roots, the connect timeout and limits, fixed
    /// in its pinned clients, take a restart).
    mutating func follow(_ edited: ConnectionPolicy) {
        scope = edited.scope
        connectionAttemptDelay = edited.connectionAttemptDelay
        allowsInsecureRedirects = edited.allowsInsecureRedirects
    }
}
