#if canImport(FoundationNetworking)
    public import FoundationNetworking
#endif
import CoreMetrics
import Foundation
public import Configuration
public import HTTPDNS
public import HTTPDNSSettings
import HTTPDNSCore
import Logging
import AsyncHTTPClient
import NIOHTTP1
import NIOCore
import NIOPosix
import Synchronization

extension HTTPDNSInterceptor {
    /// Interceptor settings; every property has a documented default. How hosts are reached (scope, redirects,
    /// failover, the race, timeouts, trust roots, client limits, traces) is the ``connection`` policy, e.g.
    /// `configuration.connection.connectTimeout = .seconds(5)`.
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
        /// What happens to a request the environment sends through a proxy: by default
        /// (`ProxyMode.bypass`) the protocol does not take it, so URLSession sends it through the
        /// proxy exactly as without the library; `ProxyMode.tunnel` sends it through the proxy
        /// itself with an HTTP CONNECT to the real host name (the proxy resolves the name).
        public var proxyMode: ProxyMode
        /// The environment's proxies (`http_proxy`, `https_proxy`, `all_proxy`, `no_proxy`), read when the
        /// configuration is made and again when the settings are applied. Package access: proxies come from the
        /// process environment, as for libcurl; tests set them here.
        var proxies = ProxyEnvironment()
        /// Called before each redirect is followed, with the 3xx answer and the request the rules made for the next
        /// hop: return it (or a changed one) to follow, or `nil` to stop and deliver the 3xx answer as it is. For
        /// the URL protocol's loads it is called on an event loop thread: it must return quickly and never block.
        public var redirectHandler: (@Sendable (HTTPURLResponse, URLRequest) -> URLRequest?)?

        /// Creates a configuration; every parameter has the documented default.
        public init(
            connection: ConnectionPolicy = ConnectionPolicy(),
            maximumRequestBodyBytes: Int = 64 << 20,
            maximumResponseBytes: Int = 256 << 20,
            cookieStorage: HTTPCookieStorage? = .shared,
            proxyMode: ProxyMode = .bypass,
            redirectHandler: (@Sendable (HTTPURLResponse, URLRequest) -> URLRequest?)? = nil
        ) {
            self.connection = connection
            self.maximumRequestBodyBytes = maximumRequestBodyBytes
            self.maximumResponseBytes = maximumResponseBytes
            self.cookieStorage = cookieStorage
            self.proxyMode = proxyMode
            self.redirectHandler = redirectHandler
        }

        /// Takes the settings a running interceptor follows from `edited`: scope, connection race, insecure
        /// redirects, proxy mode, and the environment's proxies read again.
        mutating func follow(_ edited: Configuration) {
            connection.follow(edited.connection)
            proxyMode = edited.proxyMode
            proxies = ProxyEnvironment()
        }
    }
}

/// What the URL protocol does with a request that the environment (`http_proxy`, `https_proxy`, `all_proxy`,
/// `no_proxy`) sends through a proxy.
public enum ProxyMode: String, Sendable, Hashable, CaseIterable {
    /// Leave it to URLSession unchanged, as without the library (the default).
    case bypass
    /// Send it through the proxy with an HTTP CONNECT tunnel to the real host name (the proxy resolves it).
    case tunnel
}

extension HTTPDNSInterceptor.Configuration {
    /// The `interception` section of the settings file: its keys set this configuration (and, through its
    /// ``connection``, `HTTPDNSClient`'s). The fronts own it; read it with `Settings.read(_:)`.
    public static let section = SettingsSection(
        "interception", fields: fields, read: HTTPDNSInterceptor.Configuration.init(configReader:))

    /// The defaults with the keys of the `interception` section (the scope, the connection race and timeout, trust
    /// roots, insecure redirects, the proxy mode), read from `config`, a reader scoped to it; missing keys take
    /// their defaults.
    /// - Throws: `HTTPDNSError.Code.invalidConfiguration` naming the key for a bad value.
    public init(configReader config: ConfigReader) throws(HTTPDNSError) {
        self.init()
        try SettingField.readAll(Self.fields, from: config, scope: "interception", into: &self)
    }

    static let fields: [SettingField<Self>] = [
        patterns(
            "include", \.connection.scope.include, shown: "[] (every host)",
            "hosts the URL protocol rewrites"),
        patterns(
            "exclude", \.connection.scope.exclude, shown: "[]", "hosts the URL protocol never rewrites"),
        .int(
            "connectionAttemptDelayMs", \.connection.connectionAttemptDelayMilliseconds, default: 250,
            "connection race: start the next address when the best has not connected by then; 0 turns racing off",
            range: 0...60_000),
        .milliseconds(
            "connectTimeoutMs", \.connection.connectTimeout, default: 2_000,
            "one connection attempt (TCP and TLS) may take this long before the next address is tried; read at start",
            range: 100...120_000),
        .strings(
            "trustCA", \.connection.additionalTrustRoots,
            "extra trusted CA PEM files for intercepted application traffic (not for HTTP DNS)"
        ).namingFiles(),
        .bool(
            "allowInsecureRedirects", \.connection.allowsInsecureRedirects, default: false,
            "follow redirects from https to http"),
        .choice(
            "proxy", \.proxyMode, default: .bypass,
            "requests the environment sends through a proxy: bypass leaves them to URLSession, tunnel pins them through it"
        ),
    ]

    private static func patterns(
        _ path: String, _ field: any WritableKeyPath<Self, [HostPattern]> & Sendable, shown: String, _ help: String
    ) -> SettingField<Self> {
        .custom(
            path, .stringArray, field, shown: shown, help,
            check: { text in
                (try? HostPattern(text)) == nil ? "'\(HostName.printable(text))' is not a host or *.suffix" : nil
            },
            decode: { reader, key throws(HTTPDNSError) in
                try reader.strings(key, default: []).map { text throws(HTTPDNSError) in try HostPattern(text) }
            },
            describe: { SettingsReader.list($0.map(\.description)) })
    }
}
