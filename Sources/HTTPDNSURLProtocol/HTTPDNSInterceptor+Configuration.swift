#if canImport(FoundationNetworking)
    public import FoundationNetworking
#endif
import CoreMetrics
import Foundation
public import HTTPDNS
import Logging
import AsyncHTTPClient
import NIOHTTP1
import NIOCore
import NIOPosix
import Synchronization

extension HTTPDNSInterceptor {
    /// Interceptor settings; every property has a documented default.
    public struct Configuration: Sendable {
        /// Which hosts are rewritten (default: every host but IP literals and `localhost`).
        public var scope: InterceptionScope
        /// Follow redirects (default `true`); `false` delivers the 3xx answer as it is.
        public var followRedirects: Bool
        /// Redirects followed before the request fails with ``InterceptionError/Code/tooManyRedirects`` (default 16).
        public var maximumRedirects: Int
        /// How many further addresses a hop may try after the first fails to connect (default 2).
        public var maximumFailovers: Int
        /// The time a TCP connect plus TLS handshake may take on one address (default 2 s).
        public var connectTimeout: Duration
        /// How long an idle connection is kept for reuse (default 60 s).
        public var idleConnectionTimeout: Duration
        /// PEM files with extra trusted CA certificates for the intercepted traffic, added to the system roots
        /// (settings: `interception.trustCA`; the HTTP DNS endpoints' own roots, `httpdns.trustCA`, are not used here).
        public var additionalTrustRoots: [String]
        /// Pinned (host, IP) clients kept; the least recently used beyond it are closed (default 64).
        public var maximumPinnedClients: Int
        /// HTTP/1.1 connections opened to one pinned address at once (default 8); HTTP/2 multiplexes on one.
        public var maximumConnectionsPerHost: Int
        /// The largest request body read from an `httpBodyStream` (default 64 MiB).
        public var maximumRequestBodyBytes: Int
        /// The largest response body delivered whole (default 256 MiB), which bounds memory; a body streamed to a
        /// session delegate part by part is kept nowhere and not bounded by it.
        public var maximumResponseBytes: Int
        /// Where cookies come from and go to for requests with `httpShouldHandleCookies` (default
        /// `HTTPCookieStorage.shared`, the storage of the default session configuration); `nil` turns cookie
        /// handling off. Cookies are always stored against the real host, never the IP.
        public var cookieStorage: HTTPCookieStorage?
        /// Called once per request with its trace, when it finishes or fails.
        public var traceHandler: (@Sendable (RequestTrace) -> Void)?
        /// Race TCP connects before a request whose best address has not proven itself (default `true`): see
        /// ``connectionAttemptDelay``.
        public var raceConnections: Bool
        /// The connection race's delay (default 250 ms, RFC 8305's recommendation): when the best address has
        /// neither connected nor failed by then, the next-ranked one is tried in parallel, and so on; the first to
        /// connect gets the request. Shorter for an address whose measured connect time predicts a faster answer.
        public var connectionAttemptDelay: Duration
        /// What happens to a request the environment sends through a proxy (``proxies``): by default
        /// (``InterceptionSettings/ProxyMode/bypass``) the protocol does not take it, so URLSession sends it through the
        /// proxy exactly as without the library; ``InterceptionSettings/ProxyMode/tunnel`` sends it through the proxy
        /// itself with an HTTP CONNECT to the real host name (the proxy resolves the name).
        public var proxyMode: InterceptionSettings.ProxyMode
        /// The environment's proxies (`http_proxy`, `https_proxy`, `all_proxy`, `no_proxy`), read when the
        /// configuration is made.
        public var proxies: ProxyEnvironment
        /// Follow a redirect from `https` to `http` (default `false`: it fails with
        /// ``InterceptionError/Code/insecureRedirect``, so nothing the TLS connection protected goes out in clear).
        public var allowsInsecureRedirects: Bool
        /// Called before each redirect is followed, with the 3xx answer and the request the rules made for the next
        /// hop: return it (or a changed one) to follow, or `nil` to stop and deliver the 3xx answer as it is.
        public var redirectHandler: (@Sendable (HTTPURLResponse, URLRequest) -> URLRequest?)?

        /// Creates a configuration; every parameter has the documented default.
        public init(
            scope: InterceptionScope = .everyHost,
            followRedirects: Bool = true,
            maximumRedirects: Int = 16,
            maximumFailovers: Int = 2,
            connectTimeout: Duration = .seconds(2),
            idleConnectionTimeout: Duration = .seconds(60),
            additionalTrustRoots: [String] = [],
            maximumPinnedClients: Int = 64,
            maximumConnectionsPerHost: Int = 8,
            maximumRequestBodyBytes: Int = 64 << 20,
            maximumResponseBytes: Int = 256 << 20,
            cookieStorage: HTTPCookieStorage? = .shared,
            traceHandler: (@Sendable (RequestTrace) -> Void)? = nil,
            raceConnections: Bool = true,
            connectionAttemptDelay: Duration = .milliseconds(250),
            proxyMode: InterceptionSettings.ProxyMode = .bypass,
            proxies: ProxyEnvironment = ProxyEnvironment(),
            allowsInsecureRedirects: Bool = false,
            redirectHandler: (@Sendable (HTTPURLResponse, URLRequest) -> URLRequest?)? = nil
        ) {
            self.scope = scope
            self.followRedirects = followRedirects
            self.maximumRedirects = maximumRedirects
            self.maximumFailovers = maximumFailovers
            self.connectTimeout = connectTimeout
            self.idleConnectionTimeout = idleConnectionTimeout
            self.additionalTrustRoots = additionalTrustRoots
            self.maximumPinnedClients = maximumPinnedClients
            self.maximumConnectionsPerHost = maximumConnectionsPerHost
            self.maximumRequestBodyBytes = maximumRequestBodyBytes
            self.maximumResponseBytes = maximumResponseBytes
            self.cookieStorage = cookieStorage
            self.traceHandler = traceHandler
            self.raceConnections = raceConnections
            self.connectionAttemptDelay = connectionAttemptDelay
            self.proxyMode = proxyMode
            self.proxies = proxies
            self.allowsInsecureRedirects = allowsInsecureRedirects
            self.redirectHandler = redirectHandler
        }

        /// The defaults with the scope (`interception.include`/`.exclude`), the connection race
        /// (`interception.connectionAttemptDelayMs`), the proxy mode (`interception.proxy`), insecure redirects
        /// (`interception.allowInsecureRedirects`) and trust roots (`interception.trustCA`) from `settings`.
        public init(settings: InterceptionSettings) {
            self.init()
            apply(settings)
            connectTimeout = .milliseconds(settings.connectTimeoutMilliseconds)
            additionalTrustRoots = settings.trustCA
        }

        /// Takes the settings a running interceptor follows: scope, connection race, proxy mode, and the
        /// environment's proxies read again.
        mutating func apply(_ settings: InterceptionSettings) {
            scope = InterceptionScope(include: settings.include, exclude: settings.exclude)
            raceConnections = settings.connectionAttemptDelayMilliseconds > 0
            connectionAttemptDelay = .milliseconds(max(settings.connectionAttemptDelayMilliseconds, 1))
            proxyMode = settings.proxyMode
            proxies = ProxyEnvironment()
            allowsInsecureRedirects = settings.allowInsecureRedirects
        }

        /// What the exchange engine needs of these settings.
        var policy: ExchangeEngine.Policy {
            ExchangeEngine.Policy(
                scope: scope, maximumFailovers: maximumFailovers, raceConnections: raceConnections,
                connectionAttemptDelay: connectionAttemptDelay, connectTimeout: connectTimeout)
        }

        /// The pinned clients' limits.
        var transportLimits: PinnedTransport.Configuration {
            PinnedTransport.Configuration(
                connectTimeout: connectTimeout, idleConnectionTimeout: idleConnectionTimeout,
                additionalTrustRoots: additionalTrustRoots, maximumClients: maximumPinnedClients,
                maximumConnectionsPerHost: maximumConnectionsPerHost)
        }
    }
}
