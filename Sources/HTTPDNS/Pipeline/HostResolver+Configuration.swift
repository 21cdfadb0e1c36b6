public import Configuration
public import HTTPDNSCore
public import HTTPDNSCAres
package import HTTPDNSClients

extension HostResolver {
    /// Everything the resolver pipeline can be configured with, read through swift-configuration.
    ///
    /// Build one with ``init(configReader:)`` from any providers (a JSON file, environment variables, memory), or
    /// with ``SettingsFile/load(path:environment:)``, which also checks the file with positions. Every key is listed
    /// in `keys` with its type, default and meaning; `hostsctl config show` prints the effective values.
    /// Secrets are never read from settings: a provider names the environment variable that holds its secret.
    ///
    /// The same file configures the modules above the resolver: its `interception` section is the URL protocol's and
    /// `HTTPDNSClient`'s, read by their `Configuration(settings:)`, and its `serve` section is `hostsctl serve`'s. The
    /// settings keep where they came from, so those modules read and check their own keys.
    public struct Configuration: Sendable {
        /// A resolution layer.
        package enum Source: String, Sendable, Hashable, CaseIterable {
            /// Host overrides (hosts file and run-time entries).
            case overrides
            /// The system hosts file (`hosts.file`, default `/etc/hosts`).
            case hosts
            /// The scored IP cache.
            case cache
            /// The HTTP DNS providers, in their configured order.
            case httpdns
            /// c-ares with the configured or system servers.
            case cares
            /// The operating system's resolver (`getaddrinfo`: NSS, mDNS, LDAP, …). Listed here it is asked in its
            /// place; otherwise `HostResolver.Configuration.systemFallback` asks it last, only for names nothing else knows.
            case system
        }

        /// The layers in the order they are asked.
        package var sources: [Source]
        /// Ask HTTP DNS and c-ares in parallel and take the first good answer.
        var race: Bool
        /// The upstream layers whose answers are trusted (default HTTP DNS only, which TLS authenticates). In race
        /// mode a later answer never joins one from a layer of other trust: a more trusted answer replaces it and a
        /// less trusted one is dropped, so an address spoofed on the local network never joins an HTTP DNS answer.
        var trustedSources: Set<Source>
        /// Ask the system resolver when every other upstream says a name does not exist (default `true`); ignored
        /// when `system` is in ``sources``.
        package var systemFallback: Bool
        /// The overrides file, the system hosts file and their reload interval.
        package var files: HostOverrides.Configuration
        /// The system resolver's TTL and threads.
        var system: SystemResolver.Configuration
        /// c-ares: servers, timeouts, search domains and ndots.
        public var cares: CAresResolver.Configuration
        /// The HTTP DNS providers and their time limits and trust roots.
        package var httpDNS: HTTPDNSProviders
        /// Whether HTTP DNS providers that do not say accept private, loopback and link-local answers
        /// (`guard.allowPrivateAnswers`, default `false`).
        package var allowsPrivateAnswers: Bool
        /// Apply the private-address guard to every upstream (c-ares, the system resolver, and HTTP DNS providers
        /// whatever their `allowPrivateAnswers`), not only HTTP DNS (`guard.everyUpstream`, default `false`;
        /// `hostsctl serve` sets it unless `serve.probeGuardedAddresses`).
        package var guardsEveryUpstream: Bool
        /// Whether the pipeline keeps the scored IP cache (`cache.enabled`, default `true`; `cache` must also be in
        /// ``sources``).
        package var cacheEnabled: Bool
        /// The persisted cache file (`cache.path`); `nil` means `HostCache.defaultPath()`.
        package var cachePath: String?
        /// Hosts resolved in the background at start (`cache.preResolve`).
        package var preResolve: [String]
        /// The IP cache's TTL bounds, size, refresh budget and dual-stack policy.
        public var cache: HostCache.Configuration
        /// Whether candidate addresses are probed with TCP connects (`probe.enabled`, default `true`).
        package var probeEnabled: Bool
        /// How candidate addresses are probed, when `probe.enabled` is on.
        public var probe: HostResolver.Probing
        /// Following the host's network: changes, and NAT64 on hosts without an IPv4 route.
        var network: HostNetwork.Configuration
        /// Where these settings were read from; the modules above the resolver read their sections (`interception`,
        /// `serve`) from it with ``read(_:)``.
        var origin: SettingsOrigin
        /// Whether answers are adapted to this host's network (``nat64``); `hostsctl serve`, which answers clients on
        /// other networks, turns it off. Not a key.
        package var adaptsToHostNetwork = true

        /// The defaults: overrides, the system hosts file, the cache and c-ares with the system's servers, the system
        /// resolver as the fallback; it works on any machine without a network service.
        package static var `default`: HostResolver.Configuration {
            // Reading from an empty provider gives every default; it cannot fail.
            try! HostResolver.Configuration(configReader: defaultsReader)
        }

        /// Reads the settings; missing keys take their defaults (see `keys`). Each section reads its own keys.
        /// - Throws: `HTTPDNSError.Code.invalidConfiguration` naming the key for a value of the wrong type or out of
        ///   range, for example one set through an environment variable.
        public init(configReader config: ConfigReader) throws(HTTPDNSError) {
            files = try HostOverrides.Configuration(configReader: config)
            system = try SystemResolver.Configuration(
                configReader: config.scoped(to: ConfigKey(SystemResolver.Configuration.scope)))
            cares = try CAresResolver.Configuration(
                configReader: config.scoped(to: ConfigKey(CAresResolver.Configuration.scope)))
            httpDNS = try HTTPDNSProviders(configReader: config.scoped(to: ConfigKey(HTTPDNSProviders.scope)))
            cache = try HostCache.Configuration(configReader: config)
            probe = try HostResolver.Probing(configReader: config.scoped(to: ConfigKey(HostResolver.Probing.scope)))
            network = try HostNetwork.Configuration(configReader: config)
            origin = .reader(config)
            // Placeholders only: the fields below overwrite them.
            sources = []
            race = false
            trustedSources = []
            systemFallback = false
            cacheEnabled = false
            probeEnabled = false
            cachePath = nil
            preResolve = []
            allowsPrivateAnswers = false
            guardsEveryUpstream = false
            try SettingField.readAll(
                Self.fields + Self.guardFields + Self.cacheUseFields + Self.probeUseFields, from: config, into: &self)
            if sources.contains(.httpdns), httpDNS.providers.isEmpty {
                throw SettingsReader(config: config).invalid(
                    "sources.order", "lists httpdns but httpdns.providers is empty")
            }
        }

        /// The keys of ``HostResolver.Configuration`` itself; each section lists its own.
        static let fields: [SettingField<HostResolver.Configuration>] = [
            .custom(
                "sources.order", .stringArray, \.sources, shown: "[\"overrides\", \"hosts\", \"cache\", \"cares\"]",
                "the layers in the order they are asked", allowed: Source.allCases.map(\.rawValue),
                decode: { reader, key throws(HTTPDNSError) in
                    let sources = try reader.strings(key, default: ["overrides", "hosts", "cache", "cares"]).compactMap(
                        Source.init(rawValue:))
                    if let problem = orderProblem(sources) { throw reader.invalid(key.path, problem) }
                    return sources
                },
                describe: { SettingsReader.list($0.map(\.rawValue)) }),
            .bool(
                "sources.race", \.race, default: false,
                "ask HTTP DNS and c-ares in parallel; the first good answer wins"),
            .custom(
                "sources.trusted", .stringArray, \.trustedSources, shown: "[\"httpdns\"]",
                "the upstream layers whose answers are trusted: in race mode a later answer never joins one of other trust",
                allowed: [Source.httpdns, .cares, .system].map(\.rawValue),
                decode: { reader, key throws(HTTPDNSError) in
                    var trusted = Set<Source>()
                    for name in try reader.strings(key, default: ["httpdns"]) {
                        guard let source = Source(rawValue: name), [.httpdns, .cares, .system].contains(source) else {
                            throw reader.invalid(key.path, "names \(name), which is not httpdns, cares or system")
                        }
                        trusted.insert(source)
                    }
                    return trusted
                },
                describe: { SettingsReader.list($0.map(\.rawValue).sorted()) }),
            .bool(
                "sources.systemFallback", \.systemFallback, default: true,
                "ask the system resolver (getaddrinfo) when every upstream says a name does not exist"),
        ]

        /// The private-address guard's keys (private, loopback and link-local answers are refused from HTTP DNS unless
        /// a provider allows them; optionally from every upstream).
        static let guardFields: [SettingField<HostResolver.Configuration>] = [
            .bool(
                "guard.allowPrivateAnswers", \.allowsPrivateAnswers, default: false,
                "the private-address guard's default for providers"),
            .bool(
                "guard.everyUpstream", \.guardsEveryUpstream, default: false,
                "apply the private-address guard to c-ares and the system resolver too, not only HTTP DNS"),
        ]

        /// The keys of how the pipeline uses its cache; the cache's own keys are ``HostCache/Configuration/fields``.
        static let cacheUseFields: [SettingField<HostResolver.Configuration>] = [
            .bool("cache.enabled", \.cacheEnabled, default: true, "use the IP cache"),
            .optionalString(
                "cache.path", \.cachePath, shown: "$XDG_CACHE_HOME/hostsctl/cache.json", none: "default",
                "the persisted cache file"),
            .strings(
                "cache.preResolve", \.preResolve, "hosts resolved in the background at start",
                check: { text in (try? HostName(text)) == nil ? "'\(HostName.printable(text))' is not a host name" : nil
                }),
        ]

        /// Whether the pipeline probes; the probes' own keys are ``HostResolver/Probing/fields``.
        static let probeUseFields: [SettingField<HostResolver.Configuration>] = [
            .bool("probe.enabled", \.probeEnabled, default: true, "probe candidate IPs with TCP connects")
        ]

        /// Every section's fields, in the order `hostsctl config keys` and `config show` list them.
        private static let sections: [Section] = [
            Section(fields, \.self), Section(HostOverrides.Configuration.fields, \.files),
            Section(SystemResolver.Configuration.fields, under: SystemResolver.Configuration.scope, \.system),
            Section(CAresResolver.Configuration.fields, under: CAresResolver.Configuration.scope, \.cares),
            Section(HTTPDNSProviders.fields, under: HTTPDNSProviders.scope, \.httpDNS), Section(guardFields, \.self),
            Section(cacheUseFields, \.self), Section(HostCache.Configuration.fields, \.cache),
            Section(probeUseFields, \.self),
            Section(HostResolver.Probing.fields, under: HostResolver.Probing.scope, \.probe),
            Section(HostNetwork.Configuration.fields, \.network),
        ]

        /// One section's keys and how its effective values are read from the whole.
        private struct Section: Sendable {
            let keys: [SettingKey]
            let values: @Sendable (HostResolver.Configuration) -> [SettingValue]

            init<Part>(
                _ fields: [SettingField<Part>], under scope: String? = nil,
                _ part: any KeyPath<HostResolver.Configuration, Part> & Sendable
            ) {
                keys = SettingField.keys(fields, under: scope)
                values = { SettingField.values(fields, of: $0[keyPath: part], under: scope) }
            }
        }

        /// Every key of the resolver, documented: the sections' fields are the one place keys, defaults and limits are
        /// written. The sections other modules own list theirs (``SettingsSection``).
        package static let keys: [SettingKey] = sections.flatMap(\.keys)

        /// The effective value of every key (provider keys once per provider, with its name), in the order of
        /// ``keys``; secrets are never among them.
        package var effectiveValues: [SettingValue] { Self.sections.flatMap { $0.values(self) } }

        /// Why an order of layers cannot work: overrides answer before anything else, the hosts file next, and the
        /// cache sits in front of the upstreams it caches, so each may appear once and only in that place.
        static func orderProblem(_ sources: [Source]) -> String? {
            guard Set(sources).count == sources.count else { return "lists a layer twice" }
            guard !sources.isEmpty else { return "lists no layer" }
            if let index = sources.firstIndex(of: .overrides), index != 0 { return "overrides must come first" }
            let upstreams: Set<Source> = [.httpdns, .cares, .system]
            if let hosts = sources.firstIndex(of: .hosts),
                sources[..<hosts].contains(where: { $0 != .overrides })
            {
                return "hosts must come right after overrides, before the cache and the upstreams"
            }
            if let cache = sources.firstIndex(of: .cache), sources[..<cache].contains(where: upstreams.contains) {
                return "cache must come before httpdns, cares and system"
            }
            return nil
        }

        /// The upstream layers in order (httpdns, cares, system), without the local ones.
        var upstreamSources: [Source] { sources.filter { $0 == .httpdns || $0 == .cares || $0 == .system } }
    }
}
