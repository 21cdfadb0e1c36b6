public import Configuration
public import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients

/// The `cache.*` keys and `dualStack.policy`: whether the scored IP cache is used, its TTL bounds, staleness, size,
/// file and pre-resolved hosts, and how it orders the two address families.
public struct CacheSettings: Sendable, Hashable {
    /// Whether the IP cache is used.
    public var enabled: Bool
    /// TTLs below this are raised to it, in seconds.
    public var minTTL: Int
    /// TTLs above this are lowered to it, in seconds.
    public var maxTTL: Int
    /// How long NXDOMAIN and no-data answers are cached, in seconds.
    public var negativeTTL: Int
    /// How long past expiry an entry may still be served while it is refreshed, in seconds.
    public var maxStale: Int
    /// The persisted cache file; `nil` means the user's cache directory (``HostCache/defaultPath(environment:)``).
    public var path: String?
    /// The most hosts the cache keeps (least recently used go first).
    public var maxHosts: Int
    /// `cache.maxRefreshesPerSecond`: background refreshes started per second at most.
    public var maxRefreshesPerSecond: Int
    /// Hosts resolved in the background when the resolver starts.
    public var preResolve: [String]
    /// How the two address families are ordered.
    public var dualStack: DualStackPolicy

    /// The defaults (as in `Config/hostsctl.json`).
    public static var `default`: CacheSettings {
        // Reading from an empty provider gives every default; it cannot fail.
        try! CacheSettings(configReader: defaultsReader)
    }

    /// Reads the `cache.*` keys and `dualStack.policy`; missing keys take their defaults.
    /// - Throws: `DNSError.Code.invalidConfiguration` naming the key for a bad value, or when
    ///   `cache.minTtlSeconds` is above `cache.maxTtlSeconds`.
    public init(configReader config: ConfigReader) throws(DNSError) {
        // Placeholders only: every field below overwrites its property.
        enabled = false
        minTTL = 0
        maxTTL = 0
        negativeTTL = 0
        maxStale = 0
        path = nil
        maxHosts = 0
        maxRefreshesPerSecond = 0
        preResolve = []
        dualStack = .fastest
        try SettingField.readAll(Self.fields, from: config, into: &self)
        guard minTTL <= maxTTL else {
            throw SettingsReader(config: config).invalid("cache.minTtlSeconds", "is larger than cache.maxTtlSeconds")
        }
    }

    static let fields: [SettingField<CacheSettings>] = [
        .bool("cache.enabled", \.enabled, default: true, "use the IP cache"),
        .int("cache.minTtlSeconds", \.minTTL, default: 30, "lower TTL bound", range: 0...604_800),
        .int("cache.maxTtlSeconds", \.maxTTL, default: 86_400, "upper TTL bound", range: 1...604_800),
        .int(
            "cache.negativeTtlSeconds", \.negativeTTL, default: 30, "how long NXDOMAIN / no data is cached",
            range: 0...86_400),
        .int(
            "cache.maxStaleSeconds", \.maxStale, default: 86_400, "how long past expiry an entry may be served",
            range: 0...2_592_000),
        .optionalString(
            "cache.path", \.path, shown: "$XDG_CACHE_HOME/hostsctl/cache.json", none: "default",
            "the persisted cache file"),
        .int("cache.maxHosts", \.maxHosts, default: 10_000, "most hosts kept (LRU)", range: 1...10_000_000),
        .int(
            "cache.maxRefreshesPerSecond", \.maxRefreshesPerSecond, default: 100,
            "most background refreshes (hot answers before expiry, stale answers served) started per second; past it they are put off",
            range: 1...1_000_000),
        .strings(
            "cache.preResolve", \.preResolve, "hosts resolved in the background at start",
            check: { text in (try? HostName(text)) == nil ? "'\(HostName.printable(text))' is not a host name" : nil }),
        .choice("dualStack.policy", \.dualStack, default: .fastest, "address family order"),
    ]
}

extension HostCache.Configuration {
    /// The cache configuration `settings` describe: TTL bounds, staleness, host limit and dual-stack policy.
    public init(settings: CacheSettings) {
        self.init(
            minimumTTL: UInt32(settings.minTTL),
            maximumTTL: UInt32(settings.maxTTL),
            negativeTTL: UInt32(settings.negativeTTL),
            maximumStaleness: .seconds(settings.maxStale),
            maximumHosts: settings.maxHosts,
            dualStack: settings.dualStack,
            maximumRefreshesPerSecond: settings.maxRefreshesPerSecond
        )
    }
}
