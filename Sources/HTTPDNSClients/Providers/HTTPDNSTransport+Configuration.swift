public import Configuration
public import HTTPDNSCore

extension HTTPDNSTransport {
    /// How HTTP DNS exchanges are made: their time limits, the trust roots of the endpoints' certificates and the
    /// largest answer. Every provider of a `HostResolver` shares one transport (the `httpdns` section's
    /// `timeoutMs`, `connectTimeoutMs` and `trustCA`); a resolver made alone has its own
    /// (``HTTPDNSResolver/init(configuration:transport:logger:)``).
    public struct Configuration: Sendable, Hashable {
        /// The time one HTTP exchange may take, from sending the request to the last byte of the body (default
        /// 5 s, `httpdns.timeoutMs`). A server that stalls, even one that drips bytes, fails with
        /// `HTTPDNSError.Code.timeout`.
        public var requestTimeout: Duration
        /// The time a TCP connect plus TLS handshake may take (default 2 s, `httpdns.connectTimeoutMs`).
        public var connectTimeout: Duration
        /// PEM files with extra trusted CA certificates, added to the system roots (for a private CA; default none,
        /// `httpdns.trustCA`). Certificate verification itself is never turned off.
        public var additionalTrustRoots: [String]
        /// Larger response bodies fail with `HTTPDNSError.Code.responseTooLarge` (default 64 KiB).
        public var maximumResponseBytes: Int
        /// How long an idle connection is kept open for reuse (default 60 s).
        public var idleConnectionTimeout: Duration

        /// The defaults: those of the keys (`fields`) and 64 KiB answers on connections kept for 60 s.
        public init() {
            // Placeholders only: reading no keys writes each key's default over them.
            requestTimeout = .zero
            connectTimeout = .zero
            additionalTrustRoots = []
            maximumResponseBytes = 65_536
            idleConnectionTimeout = .seconds(60)
            // An empty reader gives every default; it cannot fail.
            try! SettingField.readAll(Self.fields, from: defaultsReader, into: &self)
        }

        /// A configuration with the given values; what is not given keeps its default (``init()``).
        public init(
            requestTimeout: Duration? = nil,
            connectTimeout: Duration? = nil,
            additionalTrustRoots: [String]? = nil,
            maximumResponseBytes: Int? = nil,
            idleConnectionTimeout: Duration? = nil
        ) {
            self.init()
            if let requestTimeout { self.requestTimeout = requestTimeout }
            if let connectTimeout { self.connectTimeout = connectTimeout }
            if let additionalTrustRoots { self.additionalTrustRoots = additionalTrustRoots }
            if let maximumResponseBytes { self.maximumResponseBytes = maximumResponseBytes }
            if let idleConnectionTimeout { self.idleConnectionTimeout = idleConnectionTimeout }
        }

        /// Reads the transport's keys from `config`, a reader scoped to the `httpdns` section; missing keys take
        /// their defaults.
        /// - Throws: `HTTPDNSError.Code.invalidConfiguration` naming the key for a value of the wrong type or out of
        ///   range.
        public init(configReader config: ConfigReader) throws(HTTPDNSError) {
            self.init()
            try SettingField.readAll(Self.fields, from: config, scope: "httpdns", into: &self)
        }

        /// The transport's keys in the `httpdns` section, with their defaults, limits and meaning.
        package static let fields: [SettingField<Configuration>] = [
            .milliseconds(
                "timeoutMs", \.requestTimeout, default: 5000, "the time one HTTP exchange may take, milliseconds",
                range: 1...600_000),
            .milliseconds(
                "connectTimeoutMs", \.connectTimeout, default: 2000,
                "the time a TCP connect plus TLS handshake to an endpoint may take, milliseconds", range: 1...120_000),
            .strings(
                "trustCA", \.additionalTrustRoots, "extra trusted CA PEM files (certificates are always verified)"
            ).namingFiles(),
        ]
    }
}
