public import Configuration
public import HTTPDNSCore

extension HostCache.Configuration {
    /// Reads the cache's keys (`cache.minTtlSeconds`, `cache.maxTtlSeconds`, `cache.negativeTtlSeconds`,
    /// `cache.maxStaleSeconds`, `cache.maxHosts`, `cache.maxRefreshesPerSecond`, `dualStack.policy`); missing keys
    /// take their defaults.
    /// - Throws: `HTTPDNSError.Code.invalidConfiguration` naming the key for a bad value, or when the lower TTL bound is
    ///   above the upper one.
    public init(configReader config: ConfigReader) throws(HTTPDNSError) {
        self.init()
        try SettingField.readAll(Self.fields, from: config, into: &self)
        guard minimumTTL <= maximumTTL else {
            throw SettingsReader(config: config).invalid("cache.minTtlSeconds", "is larger than cache.maxTtlSeconds")
        }
    }

    /// A TTL key in whole seconds.
    private static func ttl(
        _ path: String, _ field: any WritableKeyPath<Self, UInt32> & Sendable, default value: Int, _ help: String,
        range: ClosedRange<Int>
    ) -> SettingField<Self> {
        .custom(
            path, .int, field, shown: "\(value)", help, range: range,
            decode: { reader, key throws(HTTPDNSError) in UInt32(try reader.int(key, default: value)) },
            describe: { "\($0)" })
    }

    /// The cache's keys, bound to the properties they set: `init(configReader:)` reads through them and
    /// `hostsctl config keys` and `config show` list them.
    static let fields: [SettingField<Self>] = [
        ttl("cache.minTtlSeconds", \.minimumTTL, default: 30, "lower TTL bound", range: 0...604_800),
        ttl("cache.maxTtlSeconds", \.maximumTTL, default: 86_400, "upper TTL bound", range: 1...604_800),
        ttl(
            "cache.negativeTtlSeconds", \.negativeTTL, default: 30, "how long NXDOMAIN / no data is cached",
            range: 0...86_400),
        .seconds(
            "cache.maxStaleSeconds", \.maximumStaleness, default: 86_400,
            "how long past expiry an entry may be served", range: 0...2_592_000),
        .int("cache.maxHosts", \.maximumHosts, default: 10_000, "most hosts kept (LRU)", range: 1...10_000_000),
        .int(
            "cache.maxRefreshesPerSecond", \.maximumRefreshesPerSecond, default: 100,
            "most background refreshes (hot answers before expiry, stale answers served) started per second; past it they are put off",
            range: 1...1_000_000),
        .choice("dualStack.policy", \.dualStack, default: .fastest, "address family order"),
    ]
}
