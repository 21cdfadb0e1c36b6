import Benchmark
import CAresDriver
import Foundation
import HTTPDNS
import HostsCTLCommands

// Resolver throughput and latency against local DNS servers, side by side with a C program that drives c-ares
// directly (Sources/CAresDriver), in the same process and the same iteration, so the ratio is measured, not
// remembered. Benchmarks/run.sh starts dnsmasq and unbound and passes their addresses in HTTPDNS_BENCH_SERVERS
// ("dnsmasq=127.0.0.1:PORT,unbound=127.0.0.1:PORT"); the zone has A records for n0.test … n199.test.

/// Queries per batch and per side in one iteration.
let batch = Int(ProcessInfo.processInfo.environment["HTTPDNS_BENCH_QUERIES"] ?? "") ?? 20_000
/// Queries kept in flight.
let inFlight = 100
let names = (0..<200).map { "n\($0).test" }

extension BenchmarkMetric {
    static let swiftQPS = BenchmarkMetric.custom("Swift queries/s", polarity: .prefersLarger, useScalingFactor: false)
    static let cQPS = BenchmarkMetric.custom("C queries/s", polarity: .prefersLarger, useScalingFactor: false)
    static let ratio = BenchmarkMetric.custom("Swift/C throughput %", polarity: .prefersLarger, useScalingFactor: false)
    static let pinnedQPS = BenchmarkMetric.custom(
        "Swift on resolver executor queries/s", polarity: .prefersLarger, useScalingFactor: false)
    static let pinnedRatio = BenchmarkMetric.custom(
        "Swift on resolver executor/C throughput %", polarity: .prefersLarger, useScalingFactor: false)
    static let pinnedP50 = BenchmarkMetric.custom(
        "Swift on resolver executor p50 latency (us)", useScalingFactor: false)
    static let swiftP50 = BenchmarkMetric.custom("Swift p50 latency (us)", useScalingFactor: false)
    static let swiftP99 = BenchmarkMetric.custom("Swift p99 latency (us)", useScalingFactor: false)
    static let cP50 = BenchmarkMetric.custom("C p50 latency (us)", useScalingFactor: false)
    static let toolQPS = BenchmarkMetric.custom(
        "hostsctl bench queries/s", polarity: .prefersLarger, useScalingFactor: false)
    static let toolVsPinned = BenchmarkMetric.custom(
        "hostsctl bench / Swift on resolver executor %", polarity: .prefersLarger, useScalingFactor: false)
    static let toolVsDefault = BenchmarkMetric.custom(
        "hostsctl bench / Swift default executor %", polarity: .prefersLarger, useScalingFactor: false)
    static let toolP50 = BenchmarkMetric.custom("hostsctl bench p50 latency (us)", useScalingFactor: false)
    static let toolVsC = BenchmarkMetric.custom(
        "hostsctl bench/C driver %", polarity: .prefersLarger, useScalingFactor: false)
    static let idleCPU = BenchmarkMetric.custom("CPU with an idle resolver (us per s)", useScalingFactor: false)
    static let baselineCPU = BenchmarkMetric.custom("CPU without a resolver (us per s)", useScalingFactor: false)
}

/// One batch through `CAresResolver`: `batch` A queries, every answer checked, kept `inFlight` at a time by as many
/// long-lived tasks (like a server's connections), each sending its next query when the last one is answered.
/// With `onResolverExecutor` the tasks prefer `resolver.executor`, so each round trip stays on the c-ares thread.
func runSwift(
    _ resolver: CAresResolver,
    hosts: [HostName],
    onResolverExecutor: Bool
) async throws -> (qps: Double, latencies: [Double]) {
    let clock = ContinuousClock()
    let start = clock.now
    let perWorker = batch / inFlight
    let latencies = try await withThrowingTaskGroup(of: [Double].self) { group in
        for worker in 0..<inFlight {
            group.addTask(executorPreference: onResolverExecutor ? resolver.executor : nil) {
                var latencies: [Double] = []
                latencies.reserveCapacity(perWorker)
                for index in 0..<perWorker {
                    let host = hosts[(worker * perWorker + index) % hosts.count]
                    let sent = clock.now
                    let answer = try await resolver.resolve(host, family: .ipv4)
                    precondition(!answer.addresses.isEmpty)
                    latencies.append((clock.now - sent).microseconds)
                }
                return latencies
            }
        }
        var all: [Double] = []
        all.reserveCapacity(batch)
        for try await part in group { all += part }
        return all
    }
    return (Double(latencies.count) / (clock.now - start).seconds, latencies)
}

/// One batch through the C driver.
func runC(server: String) -> (qps: Double, latencies: [Double]) {
    var latencies = [Double](repeating: 0, count: batch)
    let cNames = names.map { strdup($0) }
    defer { cNames.forEach { free($0) } }
    var result = cares_driver_result()
    let status = latencies.withUnsafeMutableBufferPointer { buffer in
        result.latencies_us = buffer.baseAddress
        return cNames.map { UnsafePointer($0) }.withUnsafeBufferPointer { pointers in
            cares_driver_run(server, pointers.baseAddress, Int32(names.count), Int32(batch), Int32(inFlight), &result)
        }
    }
    precondition(status == 0 && result.answered == batch, "C driver failed: status \(status), \(result.failed) failed")
    return (Double(batch) / result.elapsed_seconds, latencies)
}

func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

/// The servers Benchmarks/run.sh started.
func servers() -> [(name: String, address: String)] {
    let spec = ProcessInfo.processInfo.environment["HTTPDNS_BENCH_SERVERS"] ?? ""
    return spec.split(separator: ",").compactMap { entry in
        let parts = entry.split(separator: "=", maxSplits: 1)
        return parts.count == 2 ? (String(parts[0]), String(parts[1])) : nil
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
    var microseconds: Double { seconds * 1e6 }
}

/// CPU time (user + system) of the whole process, in microseconds.
func processCPUMicroseconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    let user = Double(usage.ru_utime.tv_sec) * 1e6 + Double(usage.ru_utime.tv_usec)
    let system = Double(usage.ru_stime.tv_sec) * 1e6 + Double(usage.ru_stime.tv_usec)
    return user + system
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock],
        warmupIterations: 1,
        maxDuration: .seconds(30),
        maxIterations: 8
    )
    let list = servers()
    if list.isEmpty {
        print("HTTPDNS_BENCH_SERVERS is not set: run Benchmarks/run.sh, which starts the DNS servers.")
    }
    for (name, address) in list {
        Benchmark(
            "c-ares: Swift resolver vs C driver, \(inFlight) in flight, \(name)",
            configuration: .init(metrics: [
                .wallClock, .swiftQPS, .cQPS, .ratio, .swiftP50, .swiftP99, .cP50, .pinnedQPS, .pinnedRatio, .pinnedP50,
            ])
        ) { benchmark in
            let server = try ServerAddress(parsing: address)
            let resolver = try CAresResolver(configuration: .init(servers: [server]))
            let hosts = try names.map { try HostName($0) }
            // Alternate the two sides inside one iteration so that both see the same machine state.
            let c = runC(server: server.description)
            let swift = try await runSwift(resolver, hosts: hosts, onResolverExecutor: false)
            let pinned = try await runSwift(resolver, hosts: hosts, onResolverExecutor: true)
            benchmark.measurement(.pinnedQPS, Int(pinned.qps))
            benchmark.measurement(.pinnedRatio, Int((pinned.qps / c.qps * 100).rounded()))
            benchmark.measurement(.pinnedP50, Int(percentile(pinned.latencies, 0.5).rounded()))
            benchmark.measurement(.swiftQPS, Int(swift.qps))
            benchmark.measurement(.cQPS, Int(c.qps))
            benchmark.measurement(.ratio, Int((swift.qps / c.qps * 100).rounded()))
            benchmark.measurement(.swiftP50, Int(percentile(swift.latencies, 0.5).rounded()))
            benchmark.measurement(.swiftP99, Int(percentile(swift.latencies, 0.99).rounded()))
            benchmark.measurement(.cP50, Int(percentile(c.latencies, 0.5).rounded()))
            resolver.shutdown()
        }
    }
    if let (name, address) = list.first {
        // `hostsctl bench --source cares` (the command's own code: argument parsing, settings, its load generator with
        // per-worker tallies and tickets) against the plain resolver loops above, in the same iteration.
        Benchmark(
            "hostsctl bench vs C driver and resolver loops, \(inFlight) in flight, \(name)",
            configuration: .init(metrics: [
                .wallClock, .toolQPS, .toolVsC, .toolVsPinned, .toolVsDefault, .toolP50, .cQPS, .pinnedQPS, .swiftQPS,
            ])
        ) { benchmark in
            let server = try ServerAddress(parsing: address)
            let resolver = try CAresResolver(configuration: .init(servers: [server]))
            let hosts = try names.map { try HostName($0) }
            let c = runC(server: server.description)
            let pinned = try await runSwift(resolver, hosts: hosts, onResolverExecutor: true)
            let swift = try await runSwift(resolver, hosts: hosts, onResolverExecutor: false)
            resolver.shutdown()
            let command = try BenchCommand.parse(
                ["--source", "cares", "--server", address, "--queries", "\(batch)", "--concurrency", "\(inFlight)"]
                    + names)
            let results = try await command.measureSources()
            guard let tool = results.first, tool.ok == batch else {
                fatalError(
                    "hostsctl bench did not answer every query: \(results.map { "\($0.ok)/\($0.queries) \($0.errors)" })"
                )
            }
            benchmark.measurement(.toolQPS, Int(tool.queriesPerSecond))
            benchmark.measurement(.toolVsC, Int((tool.queriesPerSecond / c.qps * 100).rounded()))
            benchmark.measurement(.cQPS, Int(c.qps))
            benchmark.measurement(.toolVsPinned, Int((tool.queriesPerSecond / pinned.qps * 100).rounded()))
            benchmark.measurement(.toolVsDefault, Int((tool.queriesPerSecond / swift.qps * 100).rounded()))
            benchmark.measurement(.toolP50, Int(((tool.percentile(0.5) ?? 0) * 1000).rounded()))
            benchmark.measurement(.pinnedQPS, Int(pinned.qps))
            benchmark.measurement(.swiftQPS, Int(swift.qps))
        }
        Benchmark(
            "c-ares: process CPU over 1 s, idle resolver vs none",
            configuration: .init(metrics: [.idleCPU, .baselineCPU], maxIterations: 3)
        ) { benchmark in
            // The harness itself uses some CPU; the difference between the two figures is the resolver's.
            var before = processCPUMicroseconds()
            try await Task.sleep(for: .seconds(1))
            benchmark.measurement(.baselineCPU, Int(processCPUMicroseconds() - before))
            let resolver = try CAresResolver(configuration: .init(servers: [try ServerAddress(parsing: address)]))
            _ = try await resolver.resolve(try HostName(names[0]), family: .any)
            try await Task.sleep(for: .milliseconds(10))
            before = processCPUMicroseconds()
            try await Task.sleep(for: .seconds(1))
            benchmark.measurement(.idleCPU, Int(processCPUMicroseconds() - before))
            resolver.shutdown()
        }
    }
}
