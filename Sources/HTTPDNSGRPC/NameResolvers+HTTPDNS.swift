public import GRPCCore
public import GRPCNIOTransportHTTP2Posix
public import HTTPDNS
public import Logging

extension NameResolvers {
    /// A gRPC name resolver factory for `ResolvableTargets.HTTPDNS` targets: the endpoint
    /// list comes from a `HostResolver` (overrides, the scored cache, HTTP DNS, c-ares, the system resolver, NAT64
    /// synthesis), in its ranking, and is pushed again when it changes.
    ///
    /// A list is pushed when the answer's addresses change (a refresh, an override set at run time), when the
    /// scores move another address first by more than `Configuration.reorderThreshold` (pick-first only; round
    /// robin uses every address anyway), and after a change of the host's network; never more often than
    /// `Configuration.updateInterval`, but in the first interval: a first list whose first address was not measured
    /// yet (the answer's order) is provisional, and as the probes land a measured address replaces its first one at
    /// once, and a clearly better one in turn. The authority stays the host name, so TLS sends it as SNI and checks
    /// the certificate for it, never for an address.
    ///
    /// Register it in the transport's `NameResolverRegistry`, or build the transport with
    /// `.httpdns(host:port:resolver:transportSecurity:configuration:config:eventLoopGroup:)`, which also reports
    /// every connect's outcome back into the resolver's scores.
    public struct HTTPDNS: NameResolverFactory, Sendable {
        /// The target type this factory resolves.
        public typealias Target = ResolvableTargets.HTTPDNS

        /// The resolver the addresses come from.
        public let resolver: HostResolver
        /// How lists are shaped and how often they are pushed.
        public var configuration: Configuration
        let logger: Logger

        /// A factory resolving through `resolver`; `logger` hears about lookups that failed after a list was
        /// pushed (the last list stays in use) and about each list pushed, at debug level.
        public init(
            resolver: HostResolver, configuration: Configuration = Configuration(),
            logger: Logger = Logger(label: "httpdns.grpc", factory: { _ in SwiftLogNoOpLogHandler() })
        ) {
            self.resolver = resolver
            self.configuration = configuration
            self.logger = logger
        }

        /// A push-mode resolver for `target`, with the host (and port) as the authority.
        public func resolver(for target: Target) -> NameResolver {
            let updates = EndpointUpdates(
                resolver: resolver, target: target, configuration: configuration, logger: logger)
            return NameResolver(
                names: RPCAsyncSequence(wrapping: updates), updateMode: .push,
                authority: "\(target.host):\(target.port)")
        }
    }
}

extension NameResolvers.HTTPDNS {
    /// How endpoint lists are shaped and pushed.
    public struct Configuration: Sendable {
        /// The service config pushed with every list; it takes the place of the transport's own. Its first
        /// load-balancing policy shapes the list: pick-first (the default) gets one endpoint holding every address
        /// in rank order, so a connect falls through to the next address; round robin gets an endpoint per address.
        public var serviceConfig: ServiceConfig
        /// How often the ranking is looked at again, and the least time between two pushed lists (default 1 s).
        public var updateInterval: Duration
        /// How much better (as a fraction of its score) another address must be before pick-first is moved to it
        /// (default 0.2): each move makes a new connection, so scores that only jitter move nothing. An address
        /// that failed and backs off is left at once.
        public var reorderThreshold: Double
        /// The address families asked for (default both, ordered by the resolver's dual-stack policy).
        public var family: AddressFamily

        /// A configuration; `serviceConfig` defaults to pick-first without shuffling.
        public init(
            serviceConfig: ServiceConfig = ServiceConfig(loadBalancingConfig: [.pickFirst(shuffleAddressList: false)]),
            updateInterval: Duration = .seconds(1), reorderThreshold: Double = 0.2, family: AddressFamily = .any
        ) {
            self.serviceConfig = serviceConfig
            self.updateInterval = max(updateInterval, .milliseconds(10))
            self.reorderThreshold = min(max(reorderThreshold, 0), 1)
            self.family = family
        }

        /// Whether the service config's policy is round robin (its first policy gRPC supports).
        var isRoundRobin: Bool {
            for policy in serviceConfig.loadBalancingConfig {
                if policy.roundRobin != nil { return true }
                if policy.pickFirst != nil { return false }
            }
            return false
        }
    }
}
