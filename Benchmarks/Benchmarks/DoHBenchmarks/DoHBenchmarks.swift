import BenchSupport
import Benchmark
import Foundation
import HTTPDNS

// DNS-over-HTTPS throughput through one HTTPDNSResolver (one transport, one TLS connection with HTTP/2) against a
// local dnsdist, side by side with h2load (nghttp2) sending the same RFC 8484 GET requests over one connection to
// the same server in the same iteration. Benchmarks/run.sh starts dnsmasq and dnsdist (DoH over TLS with a
// certificate from a throw-away CA) and passes HTTPDNS_BENCH_DOH="url=…,ca=…,uris=…".

/// Lookups per side and iteration (`HTTPDNS_BENCH_DOH_QUERIES`). 100,000 takes about a second a side: with 10,000
/// (the earlier default) an iteration lasted 60 ms and the ratio swung with whichever side caught the quicker
/// scheduling. The malloc count divided by this is the Swift side's allocations per lookup (h2load runs in its own
/// process).
let dohBatch = Int(ProcessInfo.processInfo.environment["HTTPDNS_BENCH_DOH_QUERIES"] ?? "") ?? 100_000
/// Requests kept in flight: tasks for the Swift side, streams (`-m`) for h2load.
let dohInFlight = 100

extension BenchmarkMetric {
    static let swiftRate = BenchmarkMetric.custom(
        "Swift DoH resolutions/s", polarity: .prefersLarger, useScalingFactor: false)
    static let h2loadRate = BenchmarkMetric.custom(
        "h2load requests/s", polarity: .prefersLarger, useScalingFactor: false)
    static let dohRatio = BenchmarkMetric.custom("Swift/h2load %", polarity: .prefersLarger, useScalingFactor: false)
    /// The same lookups through `resolveAll`: one call for the whole list, \(dohInFlight) streams open at once.
    static let batchRate = BenchmarkMetric.custom(
        "Swift DoH resolveAll resolutions/s", polarity: .prefersLarger, useScalingFactor: false)
    static let batchRatio = BenchmarkMetric.custom(
        "Swift resolveAll/h2load %", polarity: .prefersLarger, useScalingFactor: false)
    static let batchCPU = BenchmarkMetric.custom("Swift resolveAll CPU per lookup (ns)", useScalingFactor: false)
    static let swiftDoHP50 = BenchmarkMetric.custom("Swift DoH p50 latency (us)", useScalingFactor: false)
    /// CPU per request, every thread of the process: less swayed by the scheduling of the shared cores than the rates.
    static let swiftCPU = BenchmarkMetric.custom("Swift CPU per lookup (ns)", useScalingFactor: false)
    static let h2loadCPU = BenchmarkMetric.custom("h2load CPU per request (ns)", useScalingFactor: false)
    /// dnsdist's and dnsmasq's CPU per request while h2load asks, and while the Swift side asks relative to it: what
    /// a client's way of sending costs the servers, and so the share of the 2 cores left to the client.
    static let serverCPU = BenchmarkMetric.custom("servers' CPU per h2load request (us)", useScalingFactor: false)
    static let serverCPURatio = BenchmarkMetric.custom(
        "servers' CPU per request, Swift/h2load %", useScalingFactor: false)
}

struct DoHSetup {
    var url: String
    var ca: String
    var uris: String
    /// The servers' process IDs (dnsdist, dnsmasq).
    var servers: [Int32]

    init?() {
        let spec = ProcessInfo.processInfo.environment["HTTPDNS_BENCH_DOH"] ?? ""
        var fields: [String: String] = [:]
        for entry in spec.split(separator: ",") {
            let parts = entry.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { fields[String(parts[0])] = String(parts[1]) }
        }
        guard let url = fields["url"], let ca = fields["ca"], let uris = fields["uris"] else { return nil }
        self.url = url
        self.ca = ca
        self.uris = uris
        self.servers = (fields["servers"] ?? "").split(separator: ":").compactMap { Int32($0) }
    }
}

/// Runs h2load over one connection and returns its request rate; every request must succeed.
func runH2load(uris: String) throws -> Double {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/h2load")
    process.arguments = ["-n", String(dohBatch), "-c", "1", "-m", String(dohInFlight), "-i", uris]
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = FileHandle.nullDevice
    try process.run()
    let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    guard let succeeded = output.firstMatch(of: /(\d+) succeeded/), Int(succeeded.1) == dohBatch,
        let rate = output.firstMatch(of: /finished in [0-9.]+m?s, ([0-9.]+) req\/s/), let value = Double(rate.1)
    else {
        fatalError("h2load did not complete every request:\n\(output)")
    }
    return value
}

/// `dohBatch` A lookups through one resolver, `dohInFlight` at a time, every answer checked.
func runSwiftDoH(_ resolver: HTTPDNSResolver, hosts: [HostName]) async throws -> (rate: Double, p50: Double) {
    let clock = ContinuousClock()
    let start = clock.now
    let perWorker = dohBatch / dohInFlight
    let latencies = try await withThrowingTaskGroup(of: [Double].self) { group in
        for worker in 0..<dohInFlight {
            group.addTask {
                var latencies: [Double] = []
                for index in 0..<perWorker {
                    let host = hosts[(worker * perWorker + index) % hosts.count]
                    let sent = clock.now
                    let answer = try await resolver.resolve(host, family: .ipv4)
                    precondition(answer.addresses.count == 1)
                    let elapsed = clock.now - sent
                    latencies.append(
                        Double(elapsed.components.seconds) * 1e6 + Double(elapsed.components.attoseconds) / 1e12)
                }
                return latencies
            }
        }
        var all: [Double] = []
        for try await part in group { all += part }
        return all
    }
    let elapsed = clock.now - start
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    return (Double(latencies.count) / seconds, latencies.sorted()[latencies.count / 2])
}

/// The same `dohBatch` A lookups as ``runSwiftDoH(_:hosts:)`` in one `resolveAll` call, `dohInFlight` streams open at
/// once, every answer checked; returns the rate.
func runSwiftDoHBatch(_ resolver: HTTPDNSResolver, hosts: [HostName]) async throws -> Double {
    let names = (0..<dohBatch).map { hosts[$0 % hosts.count] }
    let clock = ContinuousClock()
    let start = clock.now
    let results = try await resolver.resolveAll(names, family: .ipv4, maximumInFlight: dohInFlight)
    let elapsed = clock.now - start
    for result in results {
        let answer = try result.get()
        precondition(answer.addresses.count == 1)
    }
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    return Double(results.count) / seconds
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock], warmupIterations: 1, maxDuration: .seconds(60), maxIterations: 6)
    guard let setup = DoHSetup() else {
        print("HTTPDNS_BENCH_DOH is not set: run Benchmarks/run.sh, which starts dnsdist.")
        return
    }
    Benchmark(
        "DoH over TLS/HTTP2: Swift resolver vs h2load, one connection, \(dohInFlight) in flight",
        configuration: .init(metrics: [
            .wallClock, .swiftRate, .h2loadRate, .dohRatio, .swiftDoHP50, .swiftCPU, .h2loadCPU, .serverCPU,
            .serverCPURatio, .batchRate, .batchRatio, .batchCPU, .mallocCountTotal,
        ])
    ) { benchmark in
        let resolver = try HTTPDNSResolver(
            configuration: .init(
                api: .dnsMessage(method: .get),
                endpoints: [try HTTPDNSEndpoint(setup.url, bootstrapAddresses: [IPAddress("127.0.0.1")!])],
                allowNonPublicAddresses: true  // the benchmark zone uses 10.1.0.0/16
            ),
            transportConfiguration: .init(additionalTrustRoots: [setup.ca])
        )
        let hosts = try (0..<200).map { try HostName("n\($0).test") }
        _ = try await resolver.resolve(hosts[0], family: .ipv4)  // connect and handshake outside the measurement
        let ((h2load, h2loadCPU), serverCPUH2load) = try await CPUTime.measure(.processes(setup.servers)) {
            try await CPUTime.measure(.children) { try runH2load(uris: setup.uris) }
        }
        let ((swift, swiftCPU), serverCPUSwift) = try await CPUTime.measure(.processes(setup.servers)) {
            try await CPUTime.measure(.process) { try await runSwiftDoH(resolver, hosts: hosts) }
        }
        let (batch, batchCPU) = try await CPUTime.measure(.process) {
            try await runSwiftDoHBatch(resolver, hosts: hosts)
        }
        benchmark.measurement(.batchRate, Int(batch))
        benchmark.measurement(.batchRatio, Int((batch / h2load * 100).rounded()))
        benchmark.measurement(.batchCPU, Int((batchCPU * 1000 / Double(dohBatch)).rounded()))
        if serverCPUH2load > 0 {  // 0 when run.sh did not pass the servers' process IDs
            benchmark.measurement(.serverCPU, Int((serverCPUH2load / Double(dohBatch)).rounded()))
            benchmark.measurement(.serverCPURatio, Int((serverCPUSwift / serverCPUH2load * 100).rounded()))
        }
        benchmark.measurement(.swiftCPU, Int((swiftCPU * 1000 / Double(dohBatch)).rounded()))
        benchmark.measurement(.h2loadCPU, Int((h2loadCPU * 1000 / Double(dohBatch)).rounded()))
        benchmark.measurement(.swiftRate, Int(swift.rate))
        benchmark.measurement(.h2loadRate, Int(h2load))
        benchmark.measurement(.dohRatio, Int((swift.rate / h2load * 100).rounded()))
        benchmark.measurement(.swiftDoHP50, Int(swift.p50.rounded()))
        await resolver.shutdown()
    }
}
