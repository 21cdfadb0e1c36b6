public import Configuration

/// Everything the resolver pipeline and `hostsctl` can be configured with, read through swift-configuration.
///
/// Build one with ``init(configReader:)`` from any providers (a JSON file, environment variables, memory), or
/// with ``SettingsFile/load(path:environment:)``, which also checks the file with positions. Every key is listed
/// in ``keys`` with its type, default and meaning; `hostsctl config show` prints the effective values.
/// Secrets are never read from settings: a provider names the environment variable that holds its secret.
public struct ResolverSettings: Sendable, Hashable {
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
        /// place; otherwise ``ResolverSettings/systemFallback`` asks it last, only for names nothing else knows.
        case system
    }

    /// What the URL protocol does with a request that the environment (`http_proxy`, `https_proxy`, `all_proxy`,
    /// `no_proxy`) sends through a proxy.
    public enum ProxyMode: String, Sendable, Hashable, CaseIterable {
        /// Leave it to URLSession unchanged, as without the library (the default).
        case bypass
        /// Send it through the proxy with an HTTP CONNECT tunnel to the real host name (the proxy resolves it).
        case tunnel
    }

    /// How addresses of the two families are ordered.
    public enum DualStackPolicy: String, Sendable, Hashable, CaseIterable {
        /// IPv4 addresses first.
        case preferIPv4
        /// IPv6 addresses first.
        case preferIPv6
        /// Interleaved by measured score.
        case fastest
    }

    /// One HTTP DNS provider.
    public struct Provider: Sendable, Hashable {
        /// The provider's name; answers carry it as their source.
        public var name: String
        /// `doh`, `doh-json`, `alibaba` or `tencent`.
        public var api: String
        /// Endpoint URLs, tried in order.
        public var urls: [String]
        /// Bootstrap IPs for the endpoints' host names.
        public var bootstrap: [IPAddress]
        /// RFC 8484 method for `doh`.
        public var method: HTTPDNSResolver.API.DoHMethod
        /// The vendor account ID.
        public var account: String?
        /// The environment variable that holds the provider's secret.
        public var secretVariable: String
        /// Accept private, loopback and link-local answers.
        public var allowPrivateAnswers: Bool
    }

    /// The layers in the order they are asked.
    public var sources: [Source]
    /// Ask HTTP DNS and c-ares in parallel and take the first good answer.
    public var race: Bool
    /// The overrides file (hosts format), if any; relative paths are relative to the settings file.
    public var overridesFile: String?
    /// The TTL given to override answers, in seconds.
    public var overridesTTL: Int
    /// The system hosts file read by the `hosts` layer (default `/etc/hosts`).
    public var hostsFile: String
    /// Search domains; `nil` means the system's (resolv.conf `search`/`domain`, `LOCALDOMAIN`).
    public var searchDomains: [String]?
    /// The dots a name needs to be tried as it is first; `nil` means the system's (resolv.conf, `RES_OPTIONS`).
    public var ndots: Int?
    /// Ask the system resolver when every other upstream says a name does not exist (default `true`); ignored
    /// when `system` is in ``sources``.
    public var systemFallback: Bool
    /// The TTL given to the system resolver's answers (which carry none), in seconds.
    public var systemTTLSeconds: Int
    /// The most system lookups run at once (each blocks a thread of its own).
    public var systemThreads: Int
    /// How often watched files are checked for edits, in milliseconds; 0 turns hot reload off.
    public var reloadIntervalMilliseconds: Int
    /// c-ares servers; empty means the system's.
    public var caresServers: [ServerAddress]
    /// c-ares per-try timeout in milliseconds.
    public var caresTimeoutMilliseconds: Int
    /// c-ares tries per query.
    public var caresTries: Int
    /// Query over TCP instead of UDP.
    public var caresTCP: Bool
    /// The HTTP DNS providers, in order.
    public var providers: [Provider]
    /// The time one HTTP DNS exchange may take, in milliseconds.
    public var httpTimeoutMilliseconds: Int
    /// The time one HTTP DNS lookup may take across a provider's endpoints and bootstrap addresses, in milliseconds.
    public var httpBudgetMilliseconds: Int
    /// Extra trusted CA files for HTTP DNS endpoints only (see ``interceptTrustCA`` for application traffic).
    public var trustCA: [String]
    /// The default of the private-address guard for providers that do not set it.
    public var allowPrivateAnswers: Bool
    /// Apply the private-address guard to every upstream (c-ares, the system resolver), not only HTTP DNS.
    public var guardEveryUpstream: Bool
    /// Whether the IP cache is used.
    public var cacheEnabled: Bool
    /// TTLs below this are raised to it, in seconds.
    public var cacheMinTTL: Int
    /// TTLs above this are lowered to it, in seconds.
    public var cacheMaxTTL: Int
    /// How long NXDOMAIN and no-data answers are cached, in seconds.
    public var cacheNegativeTTL: Int
    /// How long past expiry an entry may still be served while it is refreshed, in seconds.
    public var cacheMaxStale: Int
    /// The persisted cache file; empty means the user's cache directory.
    public var cachePath: String?
    /// The most hosts the cache keeps (least recently used go first).
    public var cacheMaxHosts: Int
    /// Hosts resolved in the background when the resolver starts.
    public var preResolve: [String]
    /// Whether candidate IPs are probed with TCP connects.
    public var probeEnabled: Bool
    /// The ports probes connect to.
    public var probePorts: [Int]
    /// The least time between two probes of one host, in seconds.
    public var probeIntervalSeconds: Int
    /// The connect timeout of a probe, in milliseconds.
    public var probeTimeoutMilliseconds: Int
    /// How the two address families are ordered.
    public var dualStack: DualStackPolicy
    /// Host patterns the URL protocol rewrites; empty means every host.
    public var interceptInclude: [HostPattern]
    /// Host patterns the URL protocol never rewrites (wins over include).
    public var interceptExclude: [HostPattern]
    /// The URL protocol's connection-race delay, in milliseconds: when the best address has not connected by then,
    /// the next one starts in parallel; 0 turns racing off.
    public var connectionAttemptDelayMilliseconds: Int
    /// What the URL protocol does with requests the environment sends through a proxy.
    public var proxyMode: ProxyMode
    /// Extra trusted CA files for the application's intercepted traffic, kept apart from ``trustCA`` (HTTP DNS):
    /// a private CA for an internal DoH server does not become trusted for every host the application calls.
    public var interceptTrustCA: [String]
    /// Follow redirects from `https` to `http` (default `false`: refused).
    public var allowInsecureRedirects: Bool

    /// The search policy these settings describe: ``searchDomains`` and ``ndots`` where set, the system's
    /// (``SearchPolicy/system(resolvConf:environment:)``) for the rest.
    public var searchPolicy: SearchPolicy {
        let system = (searchDomains == nil || ndots == nil) ? SearchPolicy.system() : nil
        return SearchPolicy(
            domains: searchDomains ?? system?.domains.map(\.name) ?? [], ndots: ndots ?? system?.ndots ?? 1)
    }

    /// The defaults: overrides then the system resolver, which works on any machine without a network service.
    public static var `default`: ResolverSettings {
        // Reading from an empty provider gives every default; it cannot fail.
        try! ResolverSettings(configReader: ConfigReader(provider: InMemoryProvider(values: [:])))
    }

    /// Reads the settings; missing keys take their defaults (see ``keys``).
    /// - Throws: ``DNSError/Code/invalidConfiguration`` naming the key for a value of the wrong type or out of
    ///   range, for example one set through an environment variable.
    public init(configReader config: ConfigReader) throws(DNSError) {
        func invalid(_ key: String, _ reason: String) -> DNSError {
            DNSError(
                code: .invalidConfiguration,
                message: "setting \(key) (\(SettingKey.environmentVariable(for: key))): \(reason)")
        }
        func string(_ key: String, _ fallback: String) throws(DNSError) -> String {
            let value = config.string(forKey: ConfigKey(key)) ?? fallback
            if let spec = Self.keys.first(where: { $0.path == key }), let problem = spec.problem(with: value) {
                throw invalid(key, problem)
            }
            return value
        }
        func int(_ key: String, _ fallback: Int) throws(DNSError) -> Int {
            if let text = config.string(forKey: ConfigKey(key)), Int(text) == nil,
                config.int(forKey: ConfigKey(key)) == nil
            {
                throw invalid(key, "'\(HostName.printable(text))' is not an integer")
            }
            let value = config.int(forKey: ConfigKey(key)) ?? fallback
            if let spec = Self.keys.first(where: { $0.path == key }), let problem = spec.problem(with: value) {
                throw invalid(key, problem)
            }
            return value
        }
        func bool(_ key: String, _ fallback: Bool) throws(DNSError) -> Bool {
            if let text = config.string(forKey: ConfigKey(key)), config.bool(forKey: ConfigKey(key)) == nil {
                throw invalid(key, "'\(HostName.printable(text))' is not true or false")
            }
            return config.bool(forKey: ConfigKey(key)) ?? fallback
        }
        func strings(_ key: String, _ fallback: [String]) throws(DNSError) -> [String] {
            let values = config.stringArray(forKey: ConfigKey(key)) ?? fallback
            let spec = Self.keys.first { $0.matches(key.split(separator: ".").map(String.init)) }
            for value in values {
                if let problem = spec?.problem(with: value) { throw invalid(key, problem) }
            }
            return values
        }
        func ints(_ key: String, _ fallback: [Int]) throws(DNSError) -> [Int] {
            let values = config.intArray(forKey: ConfigKey(key)) ?? fallback
            let spec = Self.keys.first { $0.path == key }
            for value in values {
                if let problem = spec?.problem(with: value) { throw invalid(key, problem) }
            }
            return values
        }

        sources = try strings("sources.order", ["overrides", "hosts", "cache", "cares"]).compactMap(
            Source.init(rawValue:))
        if let problem = Self.orderProblem(sources) { throw invalid("sources.order", problem) }
        race = try bool("sources.race", false)
        let file = try string("overrides.file", "")
        overridesFile = file.isEmpty ? nil : file
        overridesTTL = try int("overrides.ttl", 60)
        hostsFile = try string("hosts.file", "/etc/hosts")
        systemFallback = try bool("sources.systemFallback", true)
        systemTTLSeconds = try int("system.ttlSeconds", 30)
        systemThreads = try int("system.threads", 4)
        reloadIntervalMilliseconds = try int("reload.intervalMs", 2000)
        caresServers = try strings("cares.servers", []).map { text throws(DNSError) in try ServerAddress(parsing: text)
        }
        caresTimeoutMilliseconds = try int("cares.timeoutMs", 2000)
        caresTries = try int("cares.tries", 2)
        caresTCP = try bool("cares.tcp", false)
        searchDomains =
            config.stringArray(forKey: ConfigKey("cares.search")) == nil ? nil : try strings("cares.search", [])
        ndots =
            config.string(forKey: ConfigKey("cares.ndots")) == nil
                && config.int(forKey: ConfigKey("cares.ndots")) == nil
            ? nil : try int("cares.ndots", 1)
        httpTimeoutMilliseconds = try int("httpdns.timeoutMs", 5000)
        httpBudgetMilliseconds = try int("httpdns.budgetMs", 5000)
        trustCA = try strings("httpdns.trustCA", [])
        allowPrivateAnswers = try bool("guard.allowPrivateAnswers", false)
        guardEveryUpstream = try bool("guard.everyUpstream", false)
        var providers: [Provider] = []
        for name in try strings("httpdns.providers", []) {
            let prefix = "httpdns.provider.\(name)."
            guard let api = config.string(forKey: ConfigKey(prefix + "api")) else {
                throw invalid(prefix + "api", "provider \(name) is listed in httpdns.providers but has no api")
            }
            let urls = try strings(prefix + "urls", [])
            guard !urls.isEmpty else { throw invalid(prefix + "urls", "provider \(name) needs at least one URL") }
            let spec = Self.keys.first { $0.matches(["httpdns", "provider", name, "api"]) }
            if let problem = spec?.problem(with: api) { throw invalid(prefix + "api", problem) }
            let methodText = config.string(forKey: ConfigKey(prefix + "method")) ?? "get"
            guard let method = HTTPDNSResolver.API.DoHMethod(rawValue: methodText) else {
                throw invalid(prefix + "method", "'\(HostName.printable(methodText))' is not get or post")
            }
            providers.append(
                Provider(
                    name: name,
                    api: api,
                    urls: urls,
                    bootstrap: try strings(prefix + "bootstrap", []).compactMap(IPAddress.init),
                    method: method,
                    account: config.string(forKey: ConfigKey(prefix + "account")),
                    secretVariable: config.string(forKey: ConfigKey(prefix + "secretEnv")) ?? "HOSTSCTL_HTTPDNS_SECRET",
                    allowPrivateAnswers: config.bool(forKey: ConfigKey(prefix + "allowPrivateAnswers"))
                        ?? allowPrivateAnswers
                )
            )
        }
        self.providers = providers
        cacheEnabled = try bool("cache.enabled", true)
        cacheMinTTL = try int("cache.minTtlSeconds", 30)
        cacheMaxTTL = try int("cache.maxTtlSeconds", 86_400)
        guard cacheMinTTL <= cacheMaxTTL else {
            throw invalid("cache.minTtlSeconds", "is larger than cache.maxTtlSeconds")
        }
        cacheNegativeTTL = try int("cache.negativeTtlSeconds", 30)
        cacheMaxStale = try int("cache.maxStaleSeconds", 86_400)
        let path = try string("cache.path", "")
        cachePath = path.isEmpty ? nil : path
        cacheMaxHosts = try int("cache.maxHosts", 10_000)
        preResolve = try strings("cache.preResolve", [])
        probeEnabled = try bool("probe.enabled", true)
        probePorts = try ints("probe.ports", [443])
        probeIntervalSeconds = try int("probe.intervalSeconds", 60)
        probeTimeoutMilliseconds = try int("probe.timeoutMs", 1000)
        dualStack = DualStackPolicy(rawValue: try string("dualStack.policy", "fastest")) ?? .fastest
        interceptInclude = try strings("interception.include", []).map { text throws(DNSError) in try HostPattern(text)
        }
        interceptExclude = try strings("interception.exclude", []).map { text throws(DNSError) in try HostPattern(text)
        }
        connectionAttemptDelayMilliseconds = try int("interception.connectionAttemptDelayMs", 250)
        proxyMode = ProxyMode(rawValue: try string("interception.proxy", "bypass")) ?? .bypass
        interceptTrustCA = try strings("interception.trustCA", [])
        allowInsecureRedirects = try bool("interception.allowInsecureRedirects", false)
        if sources.contains(.httpdns), providers.isEmpty {
            throw invalid("sources.order", "lists httpdns but httpdns.providers is empty")
        }
    }

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
    public var upstreamSources: [Source] { sources.filter { $0 == .httpdns || $0 == .cares || $0 == .system } }

    /// Every settings key, documented.
    public static let keys: [SettingKey] = [
        SettingKey(
            "sources.order", .stringArray, default: "[\"overrides\", \"hosts\", \"cache\", \"cares\"]",
            "the layers in the order they are asked", allowed: Source.allCases.map(\.rawValue)),
        SettingKey(
            "sources.race", .bool, default: "false", "ask HTTP DNS and c-ares in parallel; the first good answer wins"),
        SettingKey(
            "sources.systemFallback", .bool, default: "true",
            "ask the system resolver (getaddrinfo) when every upstream says a name does not exist"),
        SettingKey(
            "overrides.file", .string, default: "none", "hosts-format overrides file, relative to the settings file"),
        SettingKey("overrides.ttl", .int, default: "60", "TTL of override answers, seconds", range: 0...86_400),
        SettingKey("hosts.file", .string, default: "/etc/hosts", "the system hosts file read by the hosts layer"),
        SettingKey(
            "system.ttlSeconds", .int, default: "30", "TTL given to the system resolver's answers, seconds",
            range: 0...86_400),
        SettingKey("system.threads", .int, default: "4", "most system resolver lookups at once", range: 1...256),
        SettingKey(
            "reload.intervalMs", .int, default: "2000", "how often edited files are picked up; 0 turns hot reload off",
            range: 0...3_600_000),
        SettingKey(
            "cares.servers", .stringArray, default: "[] (the system's)", "DNS servers as IP[:PORT] or [IPv6]:PORT",
            check: { text in
                (try? ServerAddress(parsing: text)) == nil ? "'\(HostName.printable(text))' is not IP[:PORT]" : nil
            }),
        SettingKey("cares.timeoutMs", .int, default: "2000", "per-try timeout, milliseconds", range: 1...3_600_000),
        SettingKey("cares.tries", .int, default: "2", "tries per query", range: 1...16),
        SettingKey("cares.tcp", .bool, default: "false", "query over TCP"),
        SettingKey(
            "cares.search", .stringArray, default: "the system's (resolv.conf, LOCALDOMAIN)",
            "search domains tried for short names, in order; [] turns search off",
            check: { text in (try? HostName(text)) == nil ? "'\(HostName.printable(text))' is not a domain name" : nil }
        ),
        SettingKey(
            "cares.ndots", .int, default: "the system's (resolv.conf, RES_OPTIONS; else 1)",
            "names with fewer dots try the search domains first", range: 0...15),
        SettingKey(
            "httpdns.providers", .stringArray, default: "[]", "HTTP DNS providers in the order they are tried",
            check: { text in
                text.isEmpty
                    || !text.utf8.allSatisfy {
                        $0.isASCIIAlphanumeric || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_")
                    }
                    ? "provider names are letters, digits, - and _" : nil
            }),
        SettingKey(
            "httpdns.timeoutMs", .int, default: "5000", "the time one HTTP exchange may take, milliseconds",
            range: 1...600_000),
        SettingKey(
            "httpdns.budgetMs", .int, default: "5000",
            "the time one lookup may take across a provider's endpoints and bootstrap addresses, milliseconds",
            range: 1...600_000),
        SettingKey(
            "httpdns.trustCA", .stringArray, default: "[]",
            "extra trusted CA PEM files (certificates are always verified)"),
        SettingKey(
            "httpdns.provider.*.api", .string, default: "required", "doh, doh-json, alibaba or tencent",
            allowed: HTTPDNSPreset.apiNames),
        SettingKey(
            "httpdns.provider.*.urls", .stringArray, default: "required", "endpoint URLs, tried in order",
            check: { text in
                do { _ = try HTTPDNSEndpoint(text); return nil } catch let error as DNSError {
                    return error.message
                } catch { return "\(error)" }
            }),
        SettingKey(
            "httpdns.provider.*.bootstrap", .stringArray, default: "[]", "fixed IPs for the endpoints' host names",
            check: { text in IPAddress(text) == nil ? "'\(HostName.printable(text))' is not an IP address" : nil }),
        SettingKey("httpdns.provider.*.method", .string, default: "get", "RFC 8484 method", allowed: ["get", "post"]),
        SettingKey("httpdns.provider.*.account", .string, default: "none", "vendor account ID"),
        SettingKey(
            "httpdns.provider.*.secretEnv", .string, default: "HOSTSCTL_HTTPDNS_SECRET",
            "the environment variable holding the provider's secret (never the secret itself)"),
        SettingKey(
            "httpdns.provider.*.allowPrivateAnswers", .bool, default: "guard.allowPrivateAnswers",
            "accept private, loopback and link-local answers from this provider"),
        SettingKey(
            "guard.allowPrivateAnswers", .bool, default: "false", "the private-address guard's default for providers"),
        SettingKey(
            "guard.everyUpstream", .bool, default: "false",
            "apply the private-address guard to c-ares and the system resolver too, not only HTTP DNS"),
        SettingKey("cache.enabled", .bool, default: "true", "use the IP cache"),
        SettingKey("cache.minTtlSeconds", .int, default: "30", "lower TTL bound", range: 0...604_800),
        SettingKey("cache.maxTtlSeconds", .int, default: "86400", "upper TTL bound", range: 1...604_800),
        SettingKey(
            "cache.negativeTtlSeconds", .int, default: "30", "how long NXDOMAIN / no data is cached", range: 0...86_400),
        SettingKey(
            "cache.maxStaleSeconds", .int, default: "86400", "how long past expiry an entry may be served",
            range: 0...2_592_000),
        SettingKey("cache.path", .string, default: "$XDG_CACHE_HOME/hostsctl/cache.json", "the persisted cache file"),
        SettingKey("cache.maxHosts", .int, default: "10000", "most hosts kept (LRU)", range: 1...10_000_000),
        SettingKey(
            "cache.preResolve", .stringArray, default: "[]", "hosts resolved in the background at start",
            check: { text in (try? HostName(text)) == nil ? "'\(HostName.printable(text))' is not a host name" : nil }),
        SettingKey("probe.enabled", .bool, default: "true", "probe candidate IPs with TCP connects"),
        SettingKey("probe.ports", .intArray, default: "[443]", "ports probes connect to", range: 1...65_535),
        SettingKey(
            "probe.intervalSeconds", .int, default: "60", "least time between probes of one host", range: 1...86_400),
        SettingKey("probe.timeoutMs", .int, default: "1000", "probe connect timeout, milliseconds", range: 1...60_000),
        SettingKey(
            "dualStack.policy", .string, default: "fastest", "address family order",
            allowed: DualStackPolicy.allCases.map(\.rawValue)),
        SettingKey(
            "interception.include", .stringArray, default: "[] (every host)", "hosts the URL protocol rewrites",
            check: { text in
                (try? HostPattern(text)) == nil ? "'\(HostName.printable(text))' is not a host or *.suffix" : nil
            }),
        SettingKey(
            "interception.exclude", .stringArray, default: "[]", "hosts the URL protocol never rewrites",
            check: { text in
                (try? HostPattern(text)) == nil ? "'\(HostName.printable(text))' is not a host or *.suffix" : nil
            }),
        SettingKey(
            "interception.connectionAttemptDelayMs", .int, default: "250",
            "connection race: start the next address when the best has not connected by then; 0 turns racing off",
            range: 0...60_000),
        SettingKey(
            "interception.trustCA", .stringArray, default: "[]",
            "extra trusted CA PEM files for intercepted application traffic (not for HTTP DNS)"),
        SettingKey(
            "interception.allowInsecureRedirects", .bool, default: "false", "follow redirects from https to http"),
        SettingKey(
            "interception.proxy", .string, default: "bypass",
            "requests the environment sends through a proxy: bypass leaves them to URLSession, tunnel pins them through it",
            allowed: ProxyMode.allCases.map(\.rawValue)),
    ]
}

extension ResolverSettings.Provider {
    /// The resolver configuration this provider describes, with its secret read from ``secretVariable``.
    /// - Throws: ``DNSError/Code/invalidConfiguration`` for a bad URL or a vendor API without an account.
    public func resolverConfiguration() throws(DNSError) -> HTTPDNSResolver.Configuration {
        let secret = HTTPDNSSecret(environmentVariable: secretVariable)
        let api: HTTPDNSResolver.API
        switch self.api {
        case "doh": api = .dnsMessage(method: method)
        case "doh-json": api = .dnsJSON
        case "alibaba":
            guard let account else {
                throw DNSError(code: .invalidConfiguration, message: "provider \(name): alibaba needs an account")
            }
            api = .alibaba(account: account, secret: secret)
        default: api = .tencent(account: account, key: secret)
        }
        var endpoints: [HTTPDNSEndpoint] = []
        for url in urls {
            let literal = (try? HTTPDNSEndpoint(url))?.hostIsIPAddress ?? false
            endpoints.append(try HTTPDNSEndpoint(url, bootstrapAddresses: literal ? [] : bootstrap))
        }
        return HTTPDNSResolver.Configuration(
            name: name, api: api, endpoints: endpoints, allowNonPublicAddresses: allowPrivateAnswers)
    }
}
