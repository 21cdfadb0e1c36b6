public import GRPCNIOTransportHTTP2Posix

extension ResolvableTargets {
    /// A host whose addresses come from this package's resolver: overrides, the scored cache, HTTP DNS, c-ares and
    /// the system resolver, in the resolver's ranking. The host name stays the call's authority, so TLS checks the
    /// server's certificate for it, never for an address.
    public struct HTTPDNS: ResolvableTarget, Sendable, Hashable {
        /// The host name to resolve, e.g. `api.example.com`.
        public var host: String
        /// The port every address is dialled on.
        public var port: Int

        /// A target for `host:port`.
        public init(host: String, port: Int = 443) {
            self.host = host
            self.port = port
        }
    }
}

extension ResolvableTarget where Self == ResolvableTargets.HTTPDNS {
    /// A target resolved by HTTPDNS (`NameResolvers.HTTPDNS`): `host`'s ranked addresses, dialled on `port`.
    public static func httpdns(host: String, port: Int = 443) -> Self {
        ResolvableTargets.HTTPDNS(host: host, port: port)
    }
}
