public import Configuration
public import HTTPDNSCore

/// The `cares.*` keys: the servers c-ares asks, its timeouts and the search list.
public struct CAresSettings: Sendable, Hashable {
    /// c-ares servers; empty means the system's.
    public var servers: [ServerAddress]
    /// c-ares per-try timeout in milliseconds.
    public var timeoutMilliseconds: Int
    /// c-ares tries per query.
    public var tries: Int
    /// Query over TCP instead of UDP.
    public var tcp: Bool
    /// Search domains; `nil` means the system's (resolv.conf `search`/`domain`, `LOCALDOMAIN`).
    public var searchDomains: [String]?
    /// The dots a name needs to be tried as it is first; `nil` means the system's (resolv.conf, `RES_OPTIONS`).
    public var ndots: Int?

    /// The defaults: the system's servers and search list, 2 s per try, 2 tries, UDP.
    public static var `default`: CAresSettings {
        // Reading from an empty provider gives every default; it cannot fail.
        try! CAresSettings(configReader: defaultsReader)
    }

    /// Reads the `cares.*` keys; missing keys take their defaults.
    /// - Throws: `DNSError.Code.invalidConfiguration` naming the key for a bad value.
    public init(configReader config: ConfigReader) throws(DNSError) {
        // Placeholders only: every field below overwrites its property.
        servers = []
        timeoutMilliseconds = 0
        tries = 0
        tcp = false
        searchDomains = nil
        ndots = nil
        try SettingField.readAll(Self.fields, from: config, into: &self)
    }

    /// The search policy these settings describe: ``searchDomains`` and ``ndots`` where set, the system's
    /// (`SearchPolicy.system(resolvConf:environment:)`) for the rest.
    public var searchPolicy: SearchPolicy {
        let system = (searchDomains == nil || ndots == nil) ? SearchPolicy.system() : nil
        return SearchPolicy(
            domains: searchDomains ?? system?.domains.map(\.name) ?? [], ndots: ndots ?? system?.ndots ?? 1)
    }

    package static let fields: [SettingField<CAresSettings>] = [
        .custom(
            "cares.servers", .stringArray, \.servers, shown: "[] (the system's)",
            "DNS servers as IP[:PORT] or [IPv6]:PORT",
            check: { text in
                (try? ServerAddress(parsing: text)) == nil ? "'\(HostName.printable(text))' is not IP[:PORT]" : nil
            },
            decode: { reader, key throws(DNSError) in
                try reader.strings(key, default: []).map { text throws(DNSError) in try ServerAddress(parsing: text) }
            },
            describe: { $0.isEmpty ? "[] (system)" : SettingsReader.list($0.map(\.description)) }),
        .int(
            "cares.timeoutMs", \.timeoutMilliseconds, default: 2000, "per-try timeout, milliseconds",
            range: 1...3_600_000),
        .int("cares.tries", \.tries, default: 2, "tries per query", range: 1...16),
        .bool("cares.tcp", \.tcp, default: false, "query over TCP"),
        .custom(
            "cares.search", .stringArray, \.searchDomains, shown: "the system's (resolv.conf, LOCALDOMAIN)",
            "search domains tried for short names, in order; [] turns search off",
            check: { text in (try? HostName(text)) == nil ? "'\(HostName.printable(text))' is not a domain name" : nil
            },
            decode: { reader, key throws(DNSError) in
                reader.config.stringArray(forKey: ConfigKey(key.path)) == nil
                    ? nil : try reader.strings(key, default: [])
            },
            describe: { $0.map(SettingsReader.list) ?? "(system)" }),
        .custom(
            "cares.ndots", .int, \.ndots, shown: "the system's (resolv.conf, RES_OPTIONS; else 1)",
            "names with fewer dots try the search domains first", range: 0...15,
            decode: { reader, key throws(DNSError) in
                reader.isSet(key.path) ? try reader.int(key, default: 1) : nil
            },
            describe: { $0.map(String.init) ?? "(system)" }),
    ]
}

extension CAresResolver.Options {
    /// The options `settings` describe: `cares.servers`, `cares.timeoutMs`, `cares.tries` and `cares.tcp`.
    public init(settings: CAresSettings) {
        self.init(
            servers: settings.servers,
            timeout: .milliseconds(settings.timeoutMilliseconds),
            tries: settings.tries,
            useTCP: settings.tcp
        )
    }
}
