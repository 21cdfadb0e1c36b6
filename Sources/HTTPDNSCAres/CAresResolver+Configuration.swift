public import Configuration
public import HTTPDNSCore

extension CAresResolver.Configuration {
    /// Reads the `cares` section (`servers`, `timeoutMs`, `tries`, `tcp`, `search`, `ndots`) from `config`, a
    /// reader scoped to it (`config.scoped(to: "cares")` for the settings file's layout); missing keys take their
    /// defaults.
    /// - Throws: `HTTPDNSError.Code.invalidConfiguration` naming the key for a bad value.
    public init(configReader config: ConfigReader) throws(HTTPDNSError) {
        self.init()
        try SettingField.readAll(Self.fields, from: config, scope: Self.scope, into: &self)
    }

    /// The section of the settings file these keys live in, which errors name.
    package static let scope = "cares"

    /// The `cares` keys, bound to the properties they set: `init(configReader:)` reads through them and
    /// `hostsctl config keys` and `config show` list them.
    package static let fields: [SettingField<CAresResolver.Configuration>] = [
        .custom(
            "servers", .stringArray, \.servers, shown: "[] (the system's)",
            "DNS servers as IP[:PORT] or [IPv6]:PORT",
            check: { text in
                (try? ServerAddress(parsing: text)) == nil ? "'\(HostName.printable(text))' is not IP[:PORT]" : nil
            },
            decode: { reader, key throws(HTTPDNSError) in
                try reader.strings(key, default: []).map { text throws(HTTPDNSError) in try ServerAddress(parsing: text)
                }
            },
            describe: { $0.isEmpty ? "[] (system)" : SettingsReader.list($0.map(\.description)) }),
        .milliseconds(
            "timeoutMs", \.timeout, default: 2000, "per-try timeout, milliseconds", range: 1...3_600_000),
        .int("tries", \.tries, default: 2, "tries per query", range: 1...16),
        .bool("tcp", \.useTCP, default: false, "query over TCP"),
        .custom(
            "search", .stringArray, \.searchDomains, shown: "the system's (resolv.conf, LOCALDOMAIN)",
            "search domains tried for short names, in order; [] turns search off",
            check: { text in (try? HostName(text)) == nil ? "'\(HostName.printable(text))' is not a domain name" : nil
            },
            decode: { reader, key throws(HTTPDNSError) in
                reader.config.stringArray(forKey: ConfigKey(key.path)) == nil
                    ? nil : try reader.strings(key, default: [])
            },
            describe: { $0.map(SettingsReader.list) ?? "(system)" }),
        .custom(
            "ndots", .int, \.ndots, shown: "the system's (resolv.conf, RES_OPTIONS; else 1)",
            "names with fewer dots try the search domains first", range: 0...15,
            decode: { reader, key throws(HTTPDNSError) in
                reader.isSet(key.path) ? try reader.int(key, default: 1) : nil
            },
            describe: { $0.map(String.init) ?? "(system)" }),
    ]
}
