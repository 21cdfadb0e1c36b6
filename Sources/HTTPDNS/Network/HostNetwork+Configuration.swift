public import Configuration
public import HTTPDNSCore

extension HostNetwork {
    /// How the resolver follows the host's network: watching it for changes and adapting answers on a host without
    /// an IPv4 route (NAT64).
    /// The settings file's `network.watch` and `nat64.*` keys; a ``HostResolver`` builds its host network from
    /// ``HostResolver/Configuration/network``.
    public struct Configuration: Sendable, Hashable {
        /// Watch the kernel's address and route changes and follow them (`network.watch`, default `true`): scores
        /// kept per network, resolv.conf read again, NAT64 discovered again, pooled connections closed. The
        /// pipeline reads it; ``HostNetwork`` itself only adapts answers.
        public var watch: Bool
        /// Whether answers are adapted (`nat64.mode`, default `auto`).
        public var mode: NAT64Mode
        /// Prefixes set by hand (`nat64.prefixes`): used instead of discovery when not empty.
        public var prefixes: [NAT64Prefix]
        /// How long a discovery's result (prefixes found, or none) is kept.
        package var discoveryLifetime: Duration = .seconds(600)
        /// The network namespace (`/var/run/netns/NAME`) watched instead of the process's (tests); `nil`: the
        /// process's own.
        package var namespace: String?

        /// The defaults: the network watched, NAT64 discovered when the host has no IPv4 route.
        public init() {
            // Placeholders only: reading no keys writes each key's default over them.
            watch = false
            mode = .off
            prefixes = []
            // An empty reader gives every default; it cannot fail.
            try! SettingField.readAll(Self.fields, from: defaultsReader, into: &self)
        }

        /// The defaults with the NAT64 policy given.
        package init(mode: NAT64Mode, prefixes: [NAT64Prefix] = []) {
            self.init()
            self.mode = mode
            self.prefixes = prefixes
        }

        /// Reads the `network.watch` and `nat64.*` keys from `config`, a reader of the whole settings (the two
        /// sections are one component's); missing keys take their defaults.
        /// - Throws: `HTTPDNSError.Code.invalidConfiguration` naming the key for a bad value, such as a prefix of a
        ///   length RFC 6052 does not allow.
        public init(configReader config: ConfigReader) throws(HTTPDNSError) {
            self.init()
            try SettingField.readAll(Self.fields, from: config, into: &self)
        }

        /// The network keys, bound to the properties they set: `init(configReader:)` reads through them and
        /// `hostsctl config keys` and `config show` list them.
        static let fields: [SettingField<Configuration>] = [
            .bool(
                "network.watch", \.watch, default: true,
                "follow address and route changes: scores per network, resolv.conf and NAT64 again, pooled connections closed"
            ),
            .choice(
                "nat64.mode", \.mode, default: .auto,
                "on a host without an IPv4 route, turn IPv4-only answers into NAT64 addresses (auto) or fail (off)"),
            .custom(
                "nat64.prefixes", .stringArray, \.prefixes, shown: "[]",
                "NAT64 prefixes set by hand (64:ff9b::/96; lengths 32, 40, 48, 56, 64, 96); empty: discovered (RFC 7050)",
                check: {
                    NAT64Prefix($0) == nil ? "is not a NAT64 prefix (IPv6, length 32, 40, 48, 56, 64 or 96)" : nil
                },
                decode: { reader, key throws(HTTPDNSError) in
                    try reader.strings(key, default: []).compactMap(NAT64Prefix.init)
                },
                describe: { SettingsReader.list($0.map(\.description)) }),
        ]
    }
}
