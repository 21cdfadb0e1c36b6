import Foundation
import Prometheus

/// The server process's memory beside its limit, exported on `/metrics` for the memory alert
/// (`Config/deploy/prometheus`): `process_resident_memory_bytes` (the name Prometheus's client libraries use) and
/// `httpdns_serve_memory_limit_bytes`, the cgroup's `memory.max` (0 when there is none).
struct ProcessMemory: Sendable {
    private let resident: Gauge
    private let limit: Gauge

    /// Registers the two gauges in `registry`.
    init(registry: PrometheusCollectorRegistry) {
        resident = registry.makeGauge(
            descriptor: MetricNameDescriptor(
                namespace: "process", metricName: "resident_memory", unitName: "bytes",
                helpText: "Resident memory of the hostsctl serve process, bytes."))
        limit = registry.makeGauge(
            descriptor: MetricNameDescriptor(
                namespace: "httpdns", subsystem: "serve", metricName: "memory_limit", unitName: "bytes",
                helpText: "The memory limit of the process's cgroup (memory.max), bytes; 0 when there is none."))
    }

    /// Reads both again; called when `/metrics` is rendered (at most once a second).
    func update() {
        resident.set(Double(Self.residentBytes() ?? 0))
        limit.set(Double(Self.limitBytes() ?? 0))
    }

    /// Resident pages from `/proc/self/statm` times the page size.
    static func residentBytes() -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// The cgroup's limit: `memory.max` (cgroup v2), else `memory.limit_in_bytes` (v1); `nil` for none (`max`, or
    /// v1's "no limit", a number near 2^63).
    static func limitBytes() -> Int? {
        for path in ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"] {
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { continue }
            let value = text.trimmingCharacters(in: .whitespacesAndNewlines)
            guard let bytes = Int(value), bytes < 1 << 60 else { return nil }
            return bytes
        }
        return nil
    }
}
