public import HTTPDNSCore

extension HostResolver {
    /// One upstream source.
    public struct Upstream: Sendable {
        /// The kind of source; race mode runs HTTP DNS against the rest.
        public enum Kind: String, Sendable, Hashable {
            /// An HTTP DNS provider (DoH or a vendor API).
            case httpDNS
            /// Classic DNS through c-ares.
            case cares
            /// Anything else.
            case other
        }

        /// The name used in metrics and logs.
        var name: String
        /// What exactly is asked, e.g. `cares(127.0.0.1:5353)` or `doh(https://dns.example/dns-query)`: cached
        /// answers record it (`RankedResolution.upstream`), so that they can be told apart by upstream.
        var identity: String
        /// The kind of source.
        var kind: Kind
        /// The resolver asked.
        var resolver: any HostNameResolver
        /// Whether this upstream's NXDOMAIN and no-data answers are trusted (default `true`). Vendor HTTPDNS APIs
        /// answer an empty list both for a name without addresses and when they throttle a client, so theirs are
        /// not: they are never cached, and a cached answer (even stale) is served rather than such an error.
        var negativeAnswersAreAuthoritative: Bool
        /// Whether this upstream's answers are trusted: in race mode an answer never joins one from a source of
        /// other trust (a more trusted one replaces it, a less trusted one is dropped), so that an address spoofed
        /// on the local network cannot join an HTTP DNS answer. Defaults to `true` for HTTP DNS (authenticated by
        /// TLS) and `false` for the others (plain DNS anyone on the path can answer).
        var isTrusted: Bool

        /// Creates an upstream; `identity` defaults to `name`, `trusted` to whether it is HTTP DNS.
        public init(
            name: String, kind: Kind, resolver: any HostNameResolver, identity: String? = nil,
            negativeAnswersAreAuthoritative: Bool = true, trusted: Bool? = nil
        ) {
            self.name = name
            self.identity = identity ?? name
            self.kind = kind
            self.resolver = resolver
            self.negativeAnswersAreAuthoritative = negativeAnswersAreAuthoritative
            self.isTrusted = trusted ?? (kind == .httpDNS)
        }
    }

    /// Background TCP probing of candidate addresses.
    public struct Probing: Sendable, Hashable {
        /// Ports tried in order for each address (the first that connects counts) unless the host's own port is
        /// known from ``HostResolver/resolveRanked(_:family:port:)``.
        public var ports: [Int]
        /// The least time between two probe rounds of one host.
        public var interval: Duration
        /// The connect timeout of one probe.
        public var timeout: Duration
        /// The most hosts probed at once; further rounds are skipped until one ends.
        var maximumConcurrentHosts: Int
        /// The most addresses of one host probed at once (default 2); the others wait their turn. Each connect
        /// starts after a random delay of up to 20 ms, and an address is never probed twice at once, so probing never
        /// floods a small server's listen backlog.
        var maximumConcurrentProbesPerHost: Int
        /// The most addresses of one answer probed in a round (default 16, best ranked first): an answer with
        /// hundreds of addresses does not turn into hundreds of connects.
        var maximumAddressesPerRound: Int
        /// Whether private, loopback, link-local and other non-public addresses are probed (default `true`: an
        /// application probes its own private services on purpose). A server answering the internet turns it off,
        /// so that no answer can make it connect into its own network.
        package var probesGuardedAddresses = true

        /// Creates a probing configuration.
        public init(
            ports: [Int] = [443], interval: Duration = .seconds(60), timeout: Duration = .seconds(1),
            maximumConcurrentHosts: Int = 8, maximumConcurrentProbesPerHost: Int = 2, maximumAddressesPerRound: Int = 16
        ) {
            self.ports = ports.isEmpty ? [443] : ports
            self.interval = interval
            self.timeout = timeout
            self.maximumConcurrentHosts = max(maximumConcurrentHosts, 1)
            self.maximumConcurrentProbesPerHost = max(maximumConcurrentProbesPerHost, 1)
            self.maximumAddressesPerRound = max(maximumAddressesPerRound, 1)
        }
    }

    /// What a running pipeline does with its parts, derived from a ``Configuration`` when the resolver is made:
    /// race mode, probing, pre-resolution, persistence, search, the guard and the host network. Package-only; the
    /// public knobs are the configuration's fields.
    package struct Policy: Sendable {
        /// Ask HTTP DNS and the other upstreams in parallel; the first good answer wins.
        var race: Bool
        /// Background probing; `nil` turns it off.
        var probing: Probing?
        /// Hosts resolved in the background as soon as the resolver is created.
        var preResolve: [String]
        /// Where the cache is persisted; loaded at creation, saved at ``HostResolver/shutdown()`` and every
        /// `saveInterval`.
        package var cachePath: String?
        /// How often the cache is saved while running; `nil` saves only at shutdown.
        package var saveInterval: Duration?
        /// How short names are completed with search domains.
        var search: SearchPolicy
        /// Serve cached answers that another upstream gave (default `true`). `false` serves only answers whose
        /// `RankedResolution.upstream` is one of the current upstreams (or the fallback), and no cached negative
        /// answer: what a caller wants that named the upstream to ask, as `hostsctl resolve --server` does.
        package var servesAnswersFromOtherUpstreams = true
        /// Apply the private-address guard to every upstream, not only to HTTP DNS providers.
        package var guardsEveryUpstream: Bool
        /// How answers are adapted to this host's network; `nil` hands answers out as they are, as a server
        /// answering other networks does. Read when the resolver is created.
        var network: HostNetwork.Configuration?
        /// Watch the kernel's address and route changes and follow them. Read when the resolver is created.
        var watchesNetwork: Bool
        /// The network namespace to watch instead of the process's.
        var networkNamespace: String?

        /// The policy `configuration` describes, the cache persisted at `cachePath` (`nil`: not persisted).
        init(_ configuration: Configuration, cachePath: String?) {
            race = configuration.race
            probing = configuration.probeEnabled ? configuration.probe : nil
            preResolve = configuration.preResolve
            self.cachePath = cachePath
            saveInterval = configuration.cacheSaveInterval > .zero ? configuration.cacheSaveInterval : nil
            search = configuration.cares.searchPolicy
            guardsEveryUpstream = configuration.guardsEveryUpstream
            network = configuration.adaptsToHostNetwork ? configuration.network : nil
            watchesNetwork = configuration.network.watch
            networkNamespace = configuration.network.namespace
        }
    }
}
