public import Configuration
public import HTTPDNSCore

extension HostResolver.Probing {
    /// Reads the `probe` section (`ports`, `intervalSeconds`, `timeoutMs`) from `config`, a reader scoped to it;
    /// missing keys take their defaults. Whether probing runs at all is `probe.enabled` (`HostResolver.Configuration.probeEnabled`).
    /// - Throws: `HTTPDNSError.Code.invalidConfiguration` naming the key for a bad value.
    public init(configReader config: ConfigReader) throws(HTTPDNSError) {
        self.init()
        try SettingField.readAll(Self.fields, from: config, scope: Self.scope, into: &self)
        if ports.isEmpty { ports = [443] }
    }

    /// The section of the settings file these keys live in, which errors name.
    static let scope = "probe"

    /// The probe keys, bound to the properties they set: `init(configReader:)` reads through them and
    /// `hostsctl config keys` and `config show` list them.
    static let fields: [SettingField<Self>] = [
        .ints("ports", \.ports, default: [443], "ports probes connect to", range: 1...65_535),
        .seconds(
            "intervalSeconds", \.interval, default: 60, "least time between probes of one host",
            range: 1...86_400),
        .milliseconds(
            "timeoutMs", \.timeout, default: 1000, "probe connect timeout, milliseconds", range: 1...60_000),
    ]
}
