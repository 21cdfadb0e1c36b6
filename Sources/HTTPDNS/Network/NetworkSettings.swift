package import Configuration
package import HTTPDNSCore

/// How the resolver follows the host's network: watching it for changes (`network.watch`) and adapting answers on a
/// host without an IPv4 route (`nat64.*`).
package struct NetworkSettings: Sendable, Hashable {
    /// Whether IPv4-only answers are synthesized into NAT64 addresses.
    package enum Mode: String, Sendable, Hashable, CaseIterable {
        /// On a host without an IPv4 route, synthesize with the discovered (RFC 7050) or configured prefix.
        case auto
        /// Never synthesize: an IPv4-only answer on a host without an IPv4 route fails with
        /// `DNSError.Code.noRoute`.
        case off
    }

    /// Watch the kernel's address and route changes and follow them (default `true`): scores kept per network,
    /// resolv.conf read again, NAT64 discovered again, pooled connections closed.
    package var watch: Bool
    /// Whether answers are synthesized.
    package var mode: Mode
    /// NAT64 prefixes set by hand (`64:ff9b::/96`, RFC 6052 lengths), used instead of discovery; empty discovers.
    package var prefixes: [String]

    /// The defaults: the network watched, synthesis on, the prefix discovered.
    package static var `default`: NetworkSettings {
        // Reading from an empty provider gives every default; it cannot fail.
        try! NetworkSettings(configReader: defaultsReader)
    }

    /// Reads the `network.*` and `nat64.*` keys; missing keys take their defaults.
    /// - Throws: `DNSError.Code.invalidConfiguration` naming the key for a bad value, such as a prefix of a length
    ///   RFC 6052 does not allow.
    package init(configReader config: ConfigReader) throws(DNSError) {
        // Placeholders only: every field below overwrites its property.
        watch = true
        mode = .auto
        prefixes = []
        try SettingField.readAll(Self.fields, from: config, into: &self)
    }

    package static let fields: [SettingField<NetworkSettings>] = [
        .bool(
            "network.watch", \.watch, default: true,
            "follow address and route changes: scores per network, resolv.conf and NAT64 again, pooled connections closed"
        ),
        .choice(
            "nat64.mode", \.mode, default: .auto,
            "on a host without an IPv4 route, turn IPv4-only answers into NAT64 addresses (auto) or fail (off)"),
        .strings(
            "nat64.prefixes", \.prefixes,
            "NAT64 prefixes set by hand (64:ff9b::/96; lengths 32, 40, 48, 56, 64, 96); empty: discovered (RFC 7050)",
            check: { NAT64Prefix($0) == nil ? "is not a NAT64 prefix (IPv6, length 32, 40, 48, 56, 64 or 96)" : nil }),
    ]

    /// The NAT64 policy ``HostNetwork`` applies.
    package var nat64: HostNetwork.Configuration {
        HostNetwork.Configuration(mode: mode, prefixes: prefixes.compactMap(NAT64Prefix.init))
    }
}
