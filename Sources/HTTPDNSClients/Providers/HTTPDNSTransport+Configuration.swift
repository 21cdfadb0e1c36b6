import HTTPDNSCore

extension HTTPDNSTransport {
    /// Transport settings.
    package struct Configuration: Sendable {
        /// The time one HTTP exchange may take, from sending the request to the last byte of the body
        /// (default 5 s). A server that stalls, even one that drips bytes, fails with `HTTPDNSError.Code.timeout`.
        var requestTimeout: Duration
        /// The time a TCP connect plus TLS handshake may take (default 2 s).
        var connectTimeout: Duration
        /// PEM files with extra trusted CA certificates, added to the system roots (for private CAs).
        var additionalTrustRoots: [String]
        /// Larger response bodies fail with `HTTPDNSError.Code.responseTooLarge` (default 64 KiB).
        var maximumResponseBytes: Int
        /// How long an idle connection is kept open for reuse (default 60 s).
        var idleConnectionTimeout: Duration

        /// Creates a configuration; every parameter has the documented default.
        package init(
            requestTimeout: Duration = .seconds(5),
            connectTimeout: Duration = .seconds(2),
            additionalTrustRoots: [String] = [],
            maximumResponseBytes: Int = 65_536,
            idleConnectionTimeout: Duration = .seconds(60)
        ) {
            self.requestTimeout = requestTimeout
            self.connectTimeout = connectTimeout
            self.additionalTrustRoots = additionalTrustRoots
            self.maximumResponseBytes = maximumResponseBytes
            self.idleConnectionTimeout = idleConnectionTimeout
        }

        /// The defaults.
        static var `default`: Configuration { Configuration() }
    }
}
