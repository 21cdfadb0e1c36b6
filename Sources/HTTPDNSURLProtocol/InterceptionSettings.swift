package import Configuration
package import HTTPDNS
package import HTTPDNSCore

/// What the URL protocol does with a request that the environment (`http_proxy`, `https_proxy`, `all_proxy`,
/// `no_proxy`) sends through a proxy.
public enum ProxyMode: String, Sendable, Hashable, CaseIterable {
    /// Leave it to URLSession unchanged, as without the library (the default).
    case bypass
    /// Send it through the proxy with an HTTP CONNECT tunnel to the real host name (the proxy resolves it).
    case tunnel
}

/// The `interception.*` keys: which requests the URL protocol and `HTTPDNSClient` pin to an address, and how.
/// The fronts own them; the shared settings file keeps the section for them (`ResolverSettings.read`).
package struct InterceptionSettings: Sendable, Hashable {
    /// Host patterns that are pinned; empty means every host.
    package var include: [HostPattern]
    /// Host patterns that are never pinned (wins over include).
    package var exclude: [HostPattern]
    /// The connection-race delay, in milliseconds: when the best address has not connected by then, the next one
    /// starts in parallel; 0 turns racing off.
    package var connectionAttemptDelayMilliseconds: Int
    /// How long one connection attempt (TCP and TLS) may take, in milliseconds, before the next address is tried.
    /// Read when the fronts start (a reload does not change it).
    package var connectTimeoutMilliseconds: Int
    /// What the URL protocol does with requests the environment sends through a proxy.
    package var proxyMode: ProxyMode
    /// Extra trusted CA files for the application's intercepted traffic, kept apart from
    /// `HTTPDNSSettings.trustCA`: a private CA for an internal DoH server does not become trusted for every host
    /// the application calls.
    package var trustCA: [String]
    /// Follow redirects from `https` to `http` (default `false`: refused).
    package var allowInsecureRedirects: Bool

    /// The defaults: every host, a 250 ms connection race, 2 s per connection attempt, proxied requests left alone, the system's trust roots,
    /// `https` → `http` redirects refused.
    package static var `default`: InterceptionSettings {
        // Reading from an empty provider gives every default; it cannot fail.
        try! InterceptionSettings(configReader: defaultsReader)
    }

    /// Reads the `interception.*` keys; missing keys take their defaults.
    /// - Throws: `DNSError.Code.invalidConfiguration` naming the key for a bad value.
    package init(configReader config: ConfigReader) throws(DNSError) {
        // Placeholders only: every field below overwrites its property.
        include = []
        exclude = []
        connectionAttemptDelayMilliseconds = 0
        connectTimeoutMilliseconds = 0
        proxyMode = .bypass
        trustCA = []
        allowInsecureRedirects = false
        try SettingField.readAll(Self.fields, from: config, into: &self)
    }

    /// The `interception` section of the settings file.
    package static let section = SettingsSection(
        "interception", fields: fields, read: InterceptionSettings.init(configReader:))

    static let fields: [SettingField<InterceptionSettings>] = [
        patterns("interception.include", \.include, shown: "[] (every host)", "hosts the URL protocol rewrites"),
        patterns("interception.exclude", \.exclude, shown: "[]", "hosts the URL protocol never rewrites"),
        .int(
            "interception.connectionAttemptDelayMs", \.connectionAttemptDelayMilliseconds, default: 250,
            "connection race: start the next address when the best has not connected by then; 0 turns racing off",
            range: 0...60_000),
        .int(
            "interception.connectTimeoutMs", \.connectTimeoutMilliseconds, default: 2_000,
            "one connection attempt (TCP and TLS) may take this long before the next address is tried; read at start",
            range: 100...120_000),
        .strings(
            "interception.trustCA", \.trustCA,
            "extra trusted CA PEM files for intercepted application traffic (not for HTTP DNS)"),
        .bool(
            "interception.allowInsecureRedirects", \.allowInsecureRedirects, default: false,
            "follow redirects from https to http"),
        .choice(
            "interception.proxy", \.proxyMode, default: .bypass,
            "requests the environment sends through a proxy: bypass leaves them to URLSession, tunnel pins them through it"
        ),
    ]

    private static func patterns(
        _ path: String, _ field: any WritableKeyPath<InterceptionSettings, [HostPattern]> & Sendable, shown: String,
        _ help: String
    ) -> SettingField<InterceptionSettings> {
        .custom(
            path, .stringArray, field, shown: shown, help,
            check: { text in
                (try? HostPattern(text)) == nil ? "'\(HostName.printable(text))' is not a host or *.suffix" : nil
            },
            decode: { reader, key throws(DNSError) in
                try reader.strings(key, default: []).map { text throws(DNSError) in try HostPattern(text) }
            },
            describe: { SettingsReader.list($0.map(\.description)) })
    }
}
