import ArgumentParser
import CoreMetrics
import Foundation
import Logging
import ServiceLifecycle
import Tracing

#if OTLPExport
    import OTel
#endif

/// OpenTelemetry export for a command (the `otel` section): a tracer and a metrics factory that send what they
/// record over OTLP/HTTP, and the services that do the sending, which run in the command's service group. Off (no
/// tracer, no factory, no service) unless `otel.endpoint` is set. The library itself never bootstraps anything:
/// the command hands the tracer and the factory to what it builds.
struct Telemetry: Sendable {
    /// Where spans go; `nil` when traces are not exported.
    var tracer: (any Tracer)?
    /// Where metrics go besides the command's own; `nil` when metrics are not exported.
    var metricsFactory: (any MetricsFactory)?
    /// The exporters, to run until the command ends; a graceful shutdown exports what is left.
    var services: [any Service]

    /// Nothing exported.
    static let off = Telemetry(tracer: nil, metricsFactory: nil, services: [])

    /// The backends `configuration` asks for; `durationBuckets` are the histogram buckets of named timers.
    /// - Throws: `ValidationError` when swift-otel refuses the configuration, or when export is asked of a hostsctl
    ///   built without the `OTLPExport` trait.
    static func start(
        _ configuration: Configuration, durationBuckets: [String: [Duration]] = [:], logger: Logger
    ) throws -> Telemetry {
        guard let endpoint = configuration.endpoint, configuration.traces || configuration.metrics else { return .off }
        #if OTLPExport
            return try exporting(to: endpoint, configuration, durationBuckets: durationBuckets, logger: logger)
        #else
            throw ValidationError(
                "otel.endpoint is \(redacted(endpoint)), but this hostsctl was built without OpenTelemetry export (the OTLPExport trait)"
            )
        #endif
    }

    #if OTLPExport
        /// The backends `configuration` asks for, sending to `endpoint`.
        static func exporting(
            to endpoint: String, _ configuration: Configuration, durationBuckets: [String: [Duration]], logger: Logger
        ) throws -> Telemetry {
            let otel = otelConfiguration(
                configuration, endpoint: endpoint, durationBuckets: durationBuckets, logger: logger)
            var telemetry = Telemetry.off
            do {
                if configuration.traces {
                    let (tracer, service) = try OTel.makeTracingBackend(configuration: otel)
                    telemetry.tracer = tracer
                    telemetry.services.append(service)
                }
                if configuration.metrics {
                    let (factory, service) = try OTel.makeMetricsBackend(configuration: otel)
                    telemetry.metricsFactory = factory
                    telemetry.services.append(service)
                }
            } catch {
                throw ValidationError("otel: \(error)")
            }
            logger.notice(
                "exporting telemetry",
                metadata: [
                    "endpoint": "\(redacted(endpoint))", "traces": "\(configuration.traces)",
                    "metrics": "\(configuration.metrics)",
                ])
            return telemetry
        }

        /// swift-otel's configuration for `configuration`: logs not exported (the command logs to standard error),
        /// W3C trace context, the receiver's two paths.
        static func otelConfiguration(
            _ configuration: Configuration, endpoint: String, durationBuckets: [String: [Duration]], logger: Logger
        ) -> OTel.Configuration {
            var otel = OTel.Configuration.default
            otel.serviceName = configuration.serviceName
            otel.diagnosticLogger = .custom(logger)
            otel.propagators = [.traceContext]
            otel.logs.enabled = false
            let base = endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint
            let encoding: OTel.Configuration.OTLPExporterConfiguration.`Protocol` =
                configuration.exportProtocol == .httpJSON ? .httpJSON : .httpProtobuf
            otel.traces.enabled = configuration.traces
            otel.traces.sampler =
                configuration.sampleOneIn <= 1
                ? .alwaysOn : .traceIDRatio(ratio: 1 / Double(configuration.sampleOneIn)) ?? .alwaysOn
            otel.traces.otlpExporter.endpoint = base + "/v1/traces"
            otel.traces.otlpExporter.protocol = encoding
            otel.traces.otlpExporter.timeout = configuration.timeout
            otel.metrics.enabled = configuration.metrics
            otel.metrics.exportInterval = configuration.metricsInterval
            otel.metrics.exportTimeout = min(configuration.timeout, configuration.metricsInterval)
            otel.metrics.durationHistogramBuckets = durationBuckets
            otel.metrics.otlpExporter.endpoint = base + "/v1/metrics"
            otel.metrics.otlpExporter.protocol = encoding
            otel.metrics.otlpExporter.timeout = configuration.timeout
            return otel
        }
    #endif

    /// Whether `text` is an `http` or `https` URL with a host: a receiver's address.
    static func isReceiverURL(_ text: String) -> Bool {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), let host = url.host else {
            return false
        }
        return (scheme == "http" || scheme == "https") && !host.isEmpty
    }

    /// `endpoint` as logs may show it: without a user or password.
    static func redacted(_ endpoint: String) -> String {
        guard var components = URLComponents(string: endpoint), components.user != nil || components.password != nil
        else { return endpoint }
        components.user = nil
        components.password = nil
        return components.string ?? "-"
    }

    /// Runs `body` with the exporters running beside it, then shuts them down gracefully, so what `body` recorded is
    /// exported before this returns (each export bounded by `otel.timeoutMs`).
    func whileExporting<Result: Sendable>(
        logger: Logger, _ body: () async throws -> Result
    ) async rethrows -> Result {
        guard !services.isEmpty else { return try await body() }
        let group = ServiceGroup(services: services, logger: logger)
        let running = Task { try await group.run() }
        let result: Result
        do {
            result = try await body()
        } catch {
            await group.triggerGracefulShutdown()
            _ = await running.result
            throw error
        }
        await group.triggerGracefulShutdown()
        if case .failure(let error) = await running.result {
            logger.warning("telemetry export stopped with an error", metadata: ["error": "\(error)"])
        }
        return result
    }
}
