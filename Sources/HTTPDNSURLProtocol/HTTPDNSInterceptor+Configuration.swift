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
    /// Interceptor settings; every property has a documented default. The connection policy's properties
    /// (``ConnectionPolicy``: scope, redirects, failover, the race, timeouts, trust roots, client limits) read and
    /// write through this value too, e.g. `configuration.connectTimeout = .seconds(5)`.
    @dynamicMemberLookup
    public struct Configuration: Sendable {
        /// How hosts are reached, shared with ``HTTPDNSClient``. Its trust roots are for the intercepted traffic
        /// (settings: `interception.trustCA`; the HTTP DNS endpoints' own roots, `httpdns.trustCA`, are not used here).
        public var connection: ConnectionPolicy
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
        /// What happens to a request the environment sends through a proxy (``proxies``): by default
        /// (`ProxyMode.bypass`) the protocol does not take it, so URLSession sends it through the
        /// proxy exactly as without the library; `ProxyMode.tunnel` sends it through the proxy
        /// itself with an HTTP CONNECT to the real host name (the proxy resolves the name).
        public var proxyMode: ProxyMode
        /// The environment's proxies (`http_proxy`, `https_proxy`, `all_proxy`, `no_proxy`), read when the
        /// configuration is made.
        public var proxies: ProxyEnvironment
        /// Called before each redirect is followed, with the 3xx answer and the request the rules made for the next
        /// hop: return it (or a changed one) to follow, or `nil` to stop and deliver the 3xx answer as it is.
        public var redirectHandler: (@Sendable (HTTPURLResponse, URLRequest) -> URLRequest?)?

        /// Creates a configuration; every parameter has the documented default.
        public init(
            connection: ConnectionPolicy = ConnectionPolicy(),
            maximumRequestBodyBytes: Int = 64 << 20,
            maximumResponseBytes: Int = 256 << 20,
            cookieStorage: HTTPCookieStorage? = .shared,
            traceHandler: (@Sendable (RequestTrace) -> Void)? = nil,
            proxyMode: ProxyMode = .bypass,
            proxies: ProxyEnvironment = ProxyEnvironment(),
            redirectHandler: (@Sendable (HTTPURLResponse, URLRequest) -> URLRequest?)? = nil
        ) {
            self.connection = connection
            self.maximumRequestBodyBytes = maximumRequestBodyBytes
            self.maximumResponseBytes = maximumResponseBytes
            self.cookieStorage = cookieStorage
            self.traceHandler = traceHandler
            self.proxyMode = proxyMode
            self.proxies = proxies
            self.redirectHandler = redirectHandler
        }

        /// The defaults with the connection policy of `settings` (``ConnectionPolicy/init(settings:)``) and its
        /// proxy mode (`interception.proxy`).
        /// - Throws: `ConfigurationError` for an unknown `interception` key or a bad value, with its position in
        ///   the settings file.
        public init(settings: ResolverSettings) throws(ConfigurationError) {
            self.init(interception: try settings.read(InterceptionSettings.section))
        }

        /// The defaults with checked `interception.*` settings.
        init(interception: InterceptionSettings) {
            self.init(connection: ConnectionPolicy(interception: interception))
            proxyMode = interception.proxyMode
        }

        /// A property of the connection policy.
        public subscript<Value>(dynamicMember keyPath: WritableKeyPath<ConnectionPolicy, Value>) -> Value {
            get { connection[keyPath: keyPath] }
            set { connection[keyPath: keyPath] = newValue }
        }

        /// Takes the settings a running interceptor follows: scope, connection race, insecure redirects, proxy mode,
        /// and the environment's proxies read again.
        mutating func apply(_ settings: InterceptionSettings) {
            connection.apply(settings)
            proxyMode = settings.proxyMode
            proxies = ProxyEnvironment()
        }
    }
}
