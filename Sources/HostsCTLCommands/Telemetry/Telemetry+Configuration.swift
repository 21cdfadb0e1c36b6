import Configuration
import HTTPDNS
import HTTPDNSSettings
import HTTPDNSCore

extension Telemetry {
    /// The `otel` section of the settings file: OpenTelemetry export (OTLP over HTTP) for `hostsctl serve` and
    /// `hostsctl fetch`, off until `otel.endpoint` names a receiver. Credentials for the receiver never come from the
    /// settings: swift-otel reads the standard `OTEL_EXPORTER_OTLP_HEADERS` (and the other `OTEL_*` variables) from
    /// the environment, over these keys.
    struct Configuration: Sendable, Hashable {
        /// The encoding of the exported data.
        enum ExportProtocol: String, Sendable, Hashable, CaseIterable {
            /// Protocol buffers over HTTP (OTLP's default).
            case httpProtobuf = "http/protobuf"
            /// JSON over HTTP.
            case httpJSON = "http/json"
        }

        /// The receiver's base URL (`http://127.0.0.1:4318`); traces go to `/v1/traces`, metrics to `/v1/metrics`.
        /// `nil`: nothing is exported.
        var endpoint: String?
        /// How the data is encoded.
        var exportProtocol: ExportProtocol
        /// One trace in this many is kept (1: every one).
        var sampleOneIn: Int
        /// Whether spans are exported.
        var traces: Bool
        /// Whether metrics are exported (beside `/metrics`, which stays).
        var metrics: Bool
        /// How often metrics are exported.
        var metricsInterval: Duration
        /// How long one export may take.
        var timeout: Duration
        /// The `service.name` resource attribute.
        var serviceName: String

        /// Export off.
        static var `default`: Configuration {
            // Reading from an empty provider gives every default; it cannot fail.
            try! Configuration(configReader: defaultsReader)
        }

        /// Reads the `otel` section from `config`, a reader scoped to it; missing keys take their defaults.
        /// - Throws: `HTTPDNSError.Code.invalidConfiguration` naming the key for a bad value.
        init(configReader config: ConfigReader) throws(HTTPDNSError) {
            endpoint = nil
            exportProtocol = .httpProtobuf
            sampleOneIn = 1
            traces = true
            metrics = true
            metricsInterval = .seconds(60)
            timeout = .seconds(10)
            serviceName = "hostsctl"
            try SettingField.readAll(Self.fields, from: config, scope: Self.scope, into: &self)
        }

        /// The section's name.
        static let scope = "otel"

        /// The `otel` section of the settings file.
        static let section = SettingsSection(scope, fields: fields, read: Configuration.init(configReader:))

        static let fields: [SettingField<Configuration>] = [
            .custom(
                "endpoint", .string, \.endpoint, shown: "none",
                "the OTLP/HTTP receiver's base URL (traces to /v1/traces, metrics to /v1/metrics); none: no export",
                check: { text in
                    text.isEmpty || text == "none" || Telemetry.isReceiverURL(text)
                        ? nil : "'\(HostName.printable(text))' is not an http or https URL with a host"
                },
                decode: { reader, key throws(HTTPDNSError) in
                    let text = try reader.string(key, default: "none")
                    return text.isEmpty || text == "none" ? nil : text
                },
                describe: { $0 ?? "none" }),
            .choice("protocol", \.exportProtocol, default: .httpProtobuf, "how the exported data is encoded"),
            .int(
                "sampleOneIn", \.sampleOneIn, default: 1,
                "one trace in this many is exported (1: every request's span)", range: 1...1_000_000),
            .bool("traces", \.traces, default: true, "export spans: the library's, and one per request served"),
            .bool("metrics", \.metrics, default: true, "export the metrics /metrics shows"),
            .milliseconds(
                "metricsIntervalMs", \.metricsInterval, default: 60_000, "how often metrics are exported",
                range: 100...3_600_000),
            .milliseconds(
                "timeoutMs", \.timeout, default: 10_000, "how long one export may take", range: 100...600_000),
            .string("serviceName", \.serviceName, default: "hostsctl", "the service.name the exported data carries"),
        ]
    }
}
