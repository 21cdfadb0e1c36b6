public import Configuration
public import HTTPDNSCore
public import HTTPDNSCAres
public import HTTPDNSClients

extension HostResolver {
    /// Everything the resolver pipeline is built from: its layers in order and each component's own configuration.
    ///
    /// Build one in code (``init()`` gives the defaults; set the fields you need), or read one with
    /// ``init(configReader:)`` from any swift-configuration providers (a JSON file, environment variables, memory),
    /// or from a settings file with `SettingsFile.load(path:environment:)` (module HTTPDNSSettings), which checks it with positions. Each
    /// component reads its own keys (`CAresResolver.Configuration(configReader:)`,
    /// `HTTPDNSResolver.Configuration(configReader:name:allowsPrivateAnswers:)` and so on); `hostsctl config
    /// keys` lists every key with its type, default and meaning, and `config show` the effective values. Secrets are
    /// never read from settings: a provider names the environment variable that holds its secret.
    public struct Configuration: Sendable {
        /// A resolution layer.
        public enum Source: String, Sendable, Hashable, CaseIterable {
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
            /// place; otherwise ``systemFallback`` asks it last, only for names nothing else knows.
            case system
        }

        /// The layers in the order they are asked (default overrides, hosts, cache, cares). Overrides come first,
        /// the hosts file next, the cache in front of the upstreams it caches.
        public var sources: [Source]
        /// Ask HTTP DNS and c-ares in parallel and take the first good answer (default `false`).
        public var race: Bool
        /// The upstream layers whose answers are trusted (default HTTP DNS only, which TLS authenticates). In race
        /// mode a later answer never joins one from a layer of other trust: a more trusted answer replaces it and a
        /// less trusted one is dropped, so an address spoofed on the local network never joins an HTTP DNS answer.
        public var trustedSources: Set<Source>
        /// Ask the system resolver when every other upstream says a name does not exist (default `true`); ignored
        /// when `system` is in ``sources``.
        public var systemFallback: Bool
        /// The overrides file, the system hosts file and their reload interval.
        public var files: HostOverrides.Configuration
        /// The system resolver's TTL and threads.
        var system: SystemResolver.Configuration
        /// c-ares: servers, timeouts, search domains and ndots.
        public var cares: CAresResolver.Configuration
        /// The HTTP DNS providers, asked in this order when ``sources`` lists `httpdns` (default none).
        public var httpDNSProviders: [HTTPDNSResolver.Configuration]
        /// The connections the HTTP DNS providers share: time limits and trust roots.
        public var httpDNSTransport: HTTPDNSTransport.Configuration
        /// The time one lookup may take across a provider's endpoints and bootstrap addresses, for the providers
        /// that set no `HTTPDNSResolver.Configuration.budget` (default 5 s, `httpdns.budgetMs`).
        public var httpDNSBudget: Duration
        /// Whether HTTP DNS providers read from settings that do not say accept private, loopback and link-local
        /// answers (`guard.allowPrivateAnswers`, default `false`).
        public var allowsPrivateAnswers: Bool
        /// Apply the private-address guard to every upstream (c-ares, the system resolver, and HTTP DNS providers
        /// whatever their `allowPrivateAnswers`), not only HTTP DNS (`guard.everyUpstream`, default `false`;
        /// `hostsctl serve` sets it unless `serve.probeGuardedAddresses`).
        public var guardsEveryUpstream: Bool
        /// Whether the pipeline keeps the scored IP cache (`cache.enabled`, default `true`; `cache` must also be in
        /// ``sources``).
        public var cacheEnabled: Bool
        /// The persisted cache file (`cache.path`). `nil` means `HostCache.defaultPath()` for a resolver made
        /// from a configuration, and no file for one made from its parts (whose cache is the caller's).
        public var cachePath: String?
        /// How often the persisted cache is saved while the resolver runs (`cache.saveIntervalSeconds`, default 300
        /// s); zero saves it only at ``HostResolver/shutdown()``.
        public var cacheSaveInterval: Duration
        /// Hosts resolved in the background at start (`cache.preResolve`).
        public var preResolve: [String]
        /// The IP cache's TTL bounds, size, refresh budget and dual-stack policy.
        public var cache: HostCache.Configuration
        /// Whether candidate addresses are probed with TCP connects (`probe.enabled`, default `true`).
        public var probeEnabled: Bool
        /// How candidate addresses are probed, when ``probeEnabled`` is on.
        public var probe: HostResolver.Probing
        /// Following the host's network: changes, and NAT64 on hosts without an IPv4 route.
        public var network: HostNetwork.Configuration
        /// Whether answers are adapted to this host's network (``nat64``); `hostsctl serve`, which answers clients on
        /// other networks, turns it off. Not a key.
        package var adaptsToHostNetwork = true

        /// The defaults: overrides, the system hosts file, the cache and c-ares with the system's servers, the system
        /// resolver as the fallback; it works on any machine without a network service. Each default is written
        /// once, in its key's row.
        public init() {
            // Reading from an empty provider gives every default; it cannot fail.
            try! self.init(configReader: defaultsReader)
        }

        /// The defaults (``init()``).
        package static var `default`: HostResolver.Configuration { HostResolver.Configuration() }

        /// Reads the settings; missing keys take their defaults (see `keys`). Each component reads its own keys.
        /// - Throws: `HTTPDNSError.Code.invalidConfiguration` naming the key for a value of the wrong type or out of
        ///   range, for example one set through an environment variable.
        public init(configReader config: ConfigReader) throws(HTTPDNSError) {
            files = try HostOverrides.Configuration(configReader: config)
            system = try SystemResolver.Configuration(
                configReader: config.scoped(to: ConfigKey(SystemResolver.Configuration.scope)))
            cares = try CAresResolver.Configuration(
                configReader: config.scoped(to: ConfigKey(CAresResolver.Configuration.scope)))
            httpDNSTransport = try HTTPDNSTransport.Configuration(configReader: config.scoped(to: ConfigKey("httpdns")))
            cache = try HostCache.Configuration(configReader: config)
            probe = try HostResolver.Probing(configReader: config.scoped(to: ConfigKey(HostResolver.Probing.scope)))
            network = try HostNetwork.Configuration(configReader: config)
            // Placeholders only: the fields below overwrite them.
            sources = []
            race = false
            trustedSources = []
            systemFallback = false
            httpDNSProviders = []
            httpDNSBudget = .zero
            cacheEnabled = false
            probeEnabled = false
            cachePath = nil
            cacheSaveInterval = .zero
            preResolve = []
            allowsPrivateAnswers = false
            guardsEveryUpstream = false
            // The guard first: providers that do not say take its default.
            try SettingField.readAll(
                Self.guardFields + Self.fields + Self.httpDNSFields + Self.cacheUseFields + Self.probeUseFields,
                from: config, into: &self)
            if sources.contains(.httpdns), httpDNSProviders.isEmpty {
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

        /// The HTTP DNS layer's own keys: the providers in order (each read by its
        /// `HTTPDNSResolver.Configuration(configReader:name:allowsPrivateAnswers:)`) and the budget of those
        /// that set none. The shared transport's keys are `HTTPDNSTransport.Configuration.fields`.
        static let httpDNSFields: [SettingField<HostResolver.Configuration>] =
            [
                .custom(
                    "httpdns.providers", .stringArray, \.httpDNSProviders, shown: "[]",
                    "HTTP DNS providers in the order they are tried",
                    check: { text in
                        text.isEmpty
                            || !text.utf8.allSatisfy {
                                $0.isASCIIAlphanumeric || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_")
                            }
                            ? "provider names are letters, digits, - and _" : nil
                    },
                    decode: { reader, key throws(HTTPDNSError) in
                        // The guard's key was read (and checked) before this one; a field's decode sees only the reader.
                        let guardDefault = reader.config.bool(forKey: "guard.allowPrivateAnswers") ?? false
                        return try reader.strings(key, default: []).map { name throws(HTTPDNSError) in
                            try HTTPDNSResolver.Configuration(
                                configReader: reader.config.scoped(to: ConfigKey("httpdns.provider.\(name)")),
                                name: name,
                                allowsPrivateAnswers: guardDefault)
                        }
                    },
                    describe: { SettingsReader.list($0.map(\.name)) }
                ).showing { settings in
                    settings.httpDNSProviders.flatMap { provider in
                        provider.rows.map { ("httpdns.provider.\(provider.name).\($0.0)", $0.1) }
                    }
                },
                .milliseconds(
                    "httpdns.budgetMs", \.httpDNSBudget, default: 5000,
                    "the time one lookup may take across a provider's endpoints and bootstrap addresses, milliseconds",
                    range: 1...600_000),
            ]
            + HTTPDNSResolver.Configuration.keyList.map { key in
                var key = key
                key.path = "httpdns.provider.*." + key.path
                return .documented(key)
            }

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
            .seconds(
                "cache.saveIntervalSeconds", \.cacheSaveInterval, default: 300,
                "how often the persisted cache is saved while running; 0: only at shutdown", range: 0...86_400),
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
            Section(Array(httpDNSFields.prefix(1)), \.self),
            Section(HTTPDNSTransport.Configuration.fields, under: "httpdns", \.httpDNSTransport),
            Section(Array(httpDNSFields.dropFirst()), \.self), Section(guardFields, \.self),
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
        /// written. The sections other modules own list theirs (`SettingsSection`, module HTTPDNSSettings).
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

        /// The checks a configuration read from keys gets, for one built in code: the layers' order, and, when the
        /// resolver `buildsUpstreams` from it, HTTP DNS listed with providers to ask.
        /// - Throws: `HTTPDNSError.Code.invalidConfiguration` saying what is wrong.
        func check(buildsUpstreams: Bool) throws(HTTPDNSError) {
            if let problem = Self.orderProblem(sources) {
                throw HTTPDNSError(code: .invalidConfiguration, message: "sources: \(problem)")
            }
            if buildsUpstreams, sources.contains(.httpdns), httpDNSProviders.isEmpty {
                throw HTTPDNSError(
                    code: .invalidConfiguration, message: "sources lists httpdns but no HTTP DNS provider is configured"
                )
            }
        }

        /// The upstream layers in order (httpdns, cares, system), without the local ones.
        var upstreamSources: [Source] { sources.filter { $0 == .httpdns || $0 == .cares || $0 == .system } }
    }
}
