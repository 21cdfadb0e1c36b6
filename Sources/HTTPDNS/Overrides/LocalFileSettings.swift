package import Configuration
package import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients

/// The files the resolver reads itself: the overrides file (`overrides.*`), the system hosts file (`hosts.file`)
/// and how often edits to them are picked up (`reload.intervalMs`).
package struct LocalFileSettings: Sendable, Hashable {
    /// The overrides file (hosts format), if any; relative paths are relative to the settings file.
    package var overridesFile: String?
    /// The TTL given to override answers, in seconds.
    package var overridesTTL: Int
    /// The system hosts file read by the `hosts` layer (default `/etc/hosts`).
    package var hostsFile: String
    /// How often watched files are checked for edits, in milliseconds; 0 turns hot reload off.
    package var reloadIntervalMilliseconds: Int

    /// The defaults: no overrides file, `/etc/hosts`, checked every 2 s.
    package static var `default`: LocalFileSettings {
        // Reading from an empty provider gives every default; it cannot fail.
        try! LocalFileSettings(configReader: defaultsReader)
    }

    /// Reads the `overrides.*`, `hosts.file` and `reload.intervalMs` keys; missing keys take their defaults.
    /// - Throws: `DNSError.Code.invalidConfiguration` naming the key for a bad value.
    package init(configReader config: ConfigReader) throws(DNSError) {
        // Placeholders only: every field below overwrites its property.
        overridesFile = nil
        overridesTTL = 0
        hostsFile = ""
        reloadIntervalMilliseconds = 0
        try SettingField.readAll(Self.fields, from: config, into: &self)
    }

    static let fields: [SettingField<LocalFileSettings>] = [
        .optionalString(
            "overrides.file", \.overridesFile, shown: "none", none: "none",
            "hosts-format overrides file, relative to the settings file"),
        .int("overrides.ttl", \.overridesTTL, default: 60, "TTL of override answers, seconds", range: 0...86_400),
        .string("hosts.file", \.hostsFile, default: "/etc/hosts", "the system hosts file read by the hosts layer"),
        .int(
            "reload.intervalMs", \.reloadIntervalMilliseconds, default: 2000,
            "how often edited files are picked up; 0 turns hot reload off", range: 0...3_600_000),
    ]
}
