public import Configuration
public import HTTPDNSCore

extension HostOverrides {
    /// The files the resolver reads itself: the overrides file (`overrides.*`), the system hosts file (`hosts.file`)
    /// and how often edits to them are picked up (`reload.intervalMs`).
    /// A ``HostResolver`` builds its two override layers from ``HostResolver/Configuration/files``; run-time
    /// entries go to ``HostResolver/overrides`` (``HostOverrides/set(_:for:)``).
    public struct Configuration: Sendable, Hashable {
        /// The overrides file (hosts format), if any; relative paths are relative to the settings file.
        public var overridesFile: String?
        /// The TTL given to override answers, in seconds.
        public var overridesTTL: Int
        /// The system hosts file read by the `hosts` layer (default `/etc/hosts`).
        public var hostsFile: String
        /// How often watched files are checked for edits, in milliseconds; 0 turns hot reload off.
        public var reloadIntervalMilliseconds: Int

        /// The defaults: no overrides file, a 60 s TTL, `/etc/hosts`, checked every 2 s.
        public init() {
            // Reading from an empty provider gives every default; it cannot fail.
            try! self.init(configReader: defaultsReader)
        }

        /// Reads the `overrides.*`, `hosts.file` and `reload.intervalMs` keys from `config`, a reader of the whole
        /// settings (the three sections are one component's); missing keys take their defaults.
        /// - Throws: `HTTPDNSError.Code.invalidConfiguration` naming the key for a bad value.
        public init(configReader config: ConfigReader) throws(HTTPDNSError) {
            // Placeholders only: every field below overwrites its property.
            overridesFile = nil
            overridesTTL = 0
            hostsFile = ""
            reloadIntervalMilliseconds = 0
            try SettingField.readAll(Self.fields, from: config, into: &self)
        }

        /// The keys, bound to the properties they set: `init(configReader:)` reads through them and `hostsctl config
        /// keys` and `config show` list them.
        static let fields: [SettingField<Configuration>] = [
            .optionalString(
                "overrides.file", \.overridesFile, shown: "none", none: "none",
                "hosts-format overrides file, relative to the settings file"
            ).namingFiles(),
            .int("overrides.ttl", \.overridesTTL, default: 60, "TTL of override answers, seconds", range: 0...86_400),
            .string("hosts.file", \.hostsFile, default: "/etc/hosts", "the system hosts file read by the hosts layer"),
            .int(
                "reload.intervalMs", \.reloadIntervalMilliseconds, default: 2000,
                "how often edited files are picked up; 0 turns hot reload off", range: 0...3_600_000),
        ]
    }
}
