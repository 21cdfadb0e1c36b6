public import Configuration
public import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients

/// The `probe.*` keys: whether and how candidate addresses are measured with TCP connects.
public struct ProbeSettings: Sendable, Hashable {
    /// Whether candidate IPs are probed with TCP connects.
    public var enabled: Bool
    /// The ports probes connect to.
    public var ports: [Int]
    /// The least time between two probes of one host, in seconds.
    public var intervalSeconds: Int
    /// The connect timeout of a probe, in milliseconds.
    public var timeoutMilliseconds: Int
    /// Whether non-public addresses are probed (no key: `hostsctl serve` turns it off unless
    /// `serve.probeGuardedAddresses`).
    public var probesGuardedAddresses = true

    /// The defaults: probes on, port 443, at most once a minute per host, 1 s connect timeout.
    public static var `default`: ProbeSettings {
        // Reading from an empty provider gives every default; it cannot fail.
        try! ProbeSettings(configReader: defaultsReader)
    }

    /// Reads the `probe.*` keys; missing keys take their defaults.
    /// - Throws: `DNSError.Code.invalidConfiguration` naming the key for a bad value.
    public init(configReader config: ConfigReader) throws(DNSError) {
        // Placeholders only: every field below overwrites its property.
        enabled = false
        ports = []
        intervalSeconds = 0
        timeoutMilliseconds = 0
        try SettingField.readAll(Self.fields, from: config, into: &self)
    }

    static let fields: [SettingField<ProbeSettings>] = [
        .bool("probe.enabled", \.enabled, default: true, "probe candidate IPs with TCP connects"),
        .ints("probe.ports", \.ports, default: [443], "ports probes connect to", range: 1...65_535),
        .int(
            "probe.intervalSeconds", \.intervalSeconds, default: 60, "least time between probes of one host",
            range: 1...86_400),
        .int(
            "probe.timeoutMs", \.timeoutMilliseconds, default: 1000, "probe connect timeout, milliseconds",
            range: 1...60_000),
    ]
}
