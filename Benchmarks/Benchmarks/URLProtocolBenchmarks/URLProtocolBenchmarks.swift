import AsyncHTTPClient
import BenchSupport
import Benchmark
import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import HTTPDNS
import HTTPDNSURLProtocol

// URLSession with the rewriting URL protocol, side by side with the same URLSession without it, against one local
// keep-alive HTTP server (nginx, started by Benchmarks/run.sh, which passes HTTPDNS_BENCH_HTTP=127.0.0.1:PORT)
// serving a 1 KiB body. The protocol's host resolves through the HostResolver's cache (one upstream lookup, then
// cache hits); the plain session goes to 127.0.0.1 directly, so it pays no resolution at all.
//
// Two pairs: a session of its own with the protocol installed (16 in flight), and URLSession.shared with the protocol
// registered at start-up, as an application does it (64 in flight), each beside a plain session in the same run.
// A third pair puts HTTPDNSClient (the AsyncHTTPClient front) beside a plain AsyncHTTPClient HTTPClient.

let requestsPerRun = Int(ProcessInfo.processInfo.environment["HTTPDNS_BENCH_HTTP_REQUESTS"] ?? "") ?? 4000
let concurrency = 16
let sharedConcurrency = 64
let latencySamples = 400

extension BenchmarkMetric {
    static let protocolRate = BenchmarkMetric.custom(
        "with protocol requests/s", polarity: .prefersLarger, useScalingFactor: false)
    static let plainRate = BenchmarkMetric.custom(
        "URLSession alone requests/s", polarity: .prefersLarger, useScalingFactor: false)
    static let rateRatio = BenchmarkMetric.custom("with/alone %", polarity: .prefersLarger, useScalingFactor: false)
    static let protocolP50 = BenchmarkMetric.custom("with protocol p50 (us)", useScalingFactor: false)
    static let plainP50 = BenchmarkMetric.custom("URLSession alone p50 (us)", useScalingFactor: false)
    static let addedP50 = BenchmarkMetric.custom("added p50 (us, negative = faster)", useScalingFactor: false)
    static let resolveP50 = BenchmarkMetric.custom("protocol resolve+rewrite p50 (us)", useScalingFactor: false)
    /// The process's CPU (every thread) per request in the throughput runs: steadier than the rates on shared cores.
    static let protocolCPU = BenchmarkMetric.custom("with protocol CPU/request (us)", useScalingFactor: false)
    static let plainCPU = BenchmarkMetric.custom("alone CPU/request (us)", useScalingFactor: false)
}

/// The benchmark's only upstream: answers `web.bench` with 127.0.0.1 for an hour, so every later lookup is a hit.
struct BenchUpstream: HostNameResolver {
    static let loopback = IPAddress("127.0.0.1")!

    func resolve(_ host: HostName, family: AddressFamily) async throws -> Resolution {
        Resolution(
            host: host.description, addresses: [ResolvedAddress(ip: Self.loopback, ttl: 3600, source: "bench")])
    }
}

/// The resolve-and-rewrite time of each intercepted request, from its trace.
final class ResolveTimes: @unchecked Sendable {
    // Lock discipline: `values` is only touched under `lock`.
    private let lock = NSLock()
    private var values: [Double] = []
    func append(_ value: Double) { lock.withLock { values.append(value) } }
    func median() -> Double { lock.withLock { values.isEmpty ? 0 : values.sorted()[values.count / 2] } }
    func reset() { lock.withLock { values.removeAll() } }
    var count: Int { lock.withLock { values.count } }
}

func microseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1e6 + Double(duration.components.attoseconds) / 1e12
}

/// `count` GETs of `url`, `workers` at a time; every answer must be a 200 with 1 KiB. Returns requests per second.
func throughput(_ session: URLSession, url: URL, count: Int, workers: Int) async throws -> Double {
    let start = ContinuousClock.now
    try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0..<workers {
            group.addTask {
                for _ in 0..<(count / workers) {
                    let (data, response) = try await session.data(for: URLRequest(url: url))
                    precondition((response as? HTTPURLResponse)?.statusCode == 200 && data.count == 1024)
                }
            }
        }
        try await group.waitForAll()
    }
    return Double(count / workers * workers) / (microseconds(ContinuousClock.now - start) / 1e6)
}

/// `count` GETs through `execute`, `workers` at a time, each body read whole; returns requests per second.
func throughput(count: Int, workers: Int, _ execute: @escaping @Sendable () async throws -> Int) async throws -> Double
{
    let start = ContinuousClock.now
    try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0..<workers {
            group.addTask {
                for _ in 0..<(count / workers) {
                    let size = try await execute()
                    precondition(size == 1024)
                }
            }
        }
        try await group.waitForAll()
    }
    return Double(count / workers * workers) / (microseconds(ContinuousClock.now - start) / 1e6)
}

/// The median latencies of `count` sequential GETs through each of `first` and `second`, taken in turn (the order
/// swapped every round), so a machine that speeds up or slows down during the run weighs on both alike.
func interleavedMedianLatencies(
    count: Int, _ first: () async throws -> Int, _ second: () async throws -> Int
) async throws -> (first: Double, second: Double) {
    var samples: ([Double], [Double]) = ([], [])
    for round in 0..<count {
        for side in round.isMultiple(of: 2) ? [0, 1] : [1, 0] {
            let start = ContinuousClock.now
            let size = try await side == 0 ? first() : second()
            let elapsed = microseconds(ContinuousClock.now - start)
            precondition(size == 1024)
            if side == 0 { samples.0.append(elapsed) } else { samples.1.append(elapsed) }
        }
    }
    return (samples.0.sorted()[count / 2], samples.1.sorted()[count / 2])
}

/// One GET through an AsyncHTTPClient-shaped `execute`, its body read whole; returns the body's size.
func get(_ url: String, _ execute: (HTTPClientRequest) async throws -> HTTPClientResponse) async throws -> Int {
    let response = try await execute(HTTPClientRequest(url: url))
    precondition(response.status == .ok)
    return try await response.body.collect(upTo: 1 << 20).readableBytes
}

/// The median latency of `count` sequential GETs.
func medianLatency(_ session: URLSession, url: URL, count: Int) async throws -> Double {
    var samples: [Double] = []
    for _ in 0..<count {
        let start = ContinuousClock.now
        let (data, _) = try await session.data(for: URLRequest(url: url))
        samples.append(microseconds(ContinuousClock.now - start))
        precondition(data.count == 1024)
    }
    return samples.sorted()[count / 2]
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock], warmupIterations: 1, maxDuration: .seconds(120), maxIterations: 5)
    guard let server = ProcessInfo.processInfo.environment["HTTPDNS_BENCH_HTTP"] else {
        print("HTTPDNS_BENCH_HTTP is not set: run Benchmarks/run.sh, which starts nginx.")
        return
    }
    let port = server.split(separator: ":").last.map(String.init) ?? "80"
    let times = ResolveTimes()
    let resolver = HostResolver(
        upstreams: [.init(name: "bench", kind: .other, resolver: BenchUpstream())],
        configuration: .init(probing: nil))
    // One interceptor serves the process (the protocol class holds one), so both pairs share it. It is registered
    // first, before anything creates a URLSession, so URLSession.shared takes the protocol.
    let interceptor = try! HTTPDNSInterceptor(
        resolver: resolver,
        configuration: .init(
            connection: ConnectionPolicy(maximumConnectionsPerHost: sharedConcurrency),
            cookieStorage: nil,
            traceHandler: { trace in times.append(microseconds(trace.hops.first?.resolveTime ?? .zero)) }
        )
    )
    HTTPDNSURLProtocol.register(interceptor)
    let shared = URLSession.shared
    let intercepted = URLSessionConfiguration.ephemeral
    intercepted.httpMaximumConnectionsPerHost = concurrency
    HTTPDNSURLProtocol.install(interceptor, into: intercepted)
    let plain = URLSessionConfiguration.ephemeral
    plain.httpMaximumConnectionsPerHost = concurrency
    let withProtocol = URLSession(configuration: intercepted)
    let alone = URLSession(configuration: plain)
    let plainWide = URLSessionConfiguration.ephemeral
    plainWide.httpMaximumConnectionsPerHost = sharedConcurrency
    let aloneWide = URLSession(configuration: plainWide)
    let protocolURL = URL(string: "http://web.bench:\(port)/1k")!
    let plainURL = URL(string: "http://127.0.0.1:\(port)/1k")!

    /// One pair, side by side in each iteration: warm both sides, then throughput with `workers` in flight and the
    /// median of sequential requests, for the session with the protocol and the plain one.
    func pair(_ name: String, intercepted: URLSession, plain: URLSession, workers: Int) {
        Benchmark(
            name,
            configuration: .init(metrics: [
                .wallClock, .protocolRate, .plainRate, .rateRatio, .protocolP50, .plainP50, .addedP50, .resolveP50,
                .protocolCPU, .plainCPU,
            ])
        ) { benchmark in
            // Warm both: connections open, the host cached.
            _ = try await throughput(intercepted, url: protocolURL, count: workers * 4, workers: workers)
            _ = try await throughput(plain, url: plainURL, count: workers * 4, workers: workers)
            times.reset()
            let (plainRate, plainCPU) = try await CPUTime.measure(.process) {
                try await throughput(plain, url: plainURL, count: requestsPerRun, workers: workers)
            }
            let (protocolRate, protocolCPU) = try await CPUTime.measure(.process) {
                try await throughput(intercepted, url: protocolURL, count: requestsPerRun, workers: workers)
            }
            benchmark.measurement(.plainCPU, Int((plainCPU / Double(requestsPerRun)).rounded()))
            benchmark.measurement(.protocolCPU, Int((protocolCPU / Double(requestsPerRun)).rounded()))
            precondition(
                times.count >= requestsPerRun / workers * workers, "the requests did not go through the protocol")
            let plainP50 = try await medianLatency(plain, url: plainURL, count: latencySamples)
            let protocolP50 = try await medianLatency(intercepted, url: protocolURL, count: latencySamples)
            benchmark.measurement(.protocolRate, Int(protocolRate))
            benchmark.measurement(.plainRate, Int(plainRate))
            benchmark.measurement(.rateRatio, Int((protocolRate / plainRate * 100).rounded()))
            benchmark.measurement(.protocolP50, Int(protocolP50.rounded()))
            benchmark.measurement(.plainP50, Int(plainP50.rounded()))
            benchmark.measurement(.addedP50, Int((protocolP50 - plainP50).rounded()))
            benchmark.measurement(.resolveP50, Int(times.median().rounded()))
        }
    }

    // The AsyncHTTPClient front beside a plain HTTPClient, both with `concurrency` connections to the server.
    let frontClient = try! HTTPDNSClient(
        resolver: resolver,
        configuration: .init(
            connection: ConnectionPolicy(maximumConnectionsPerHost: concurrency),
            traceHandler: { trace in times.append(microseconds(trace.hops.first?.resolveTime ?? .zero)) }))
    var plainConfiguration = HTTPClient.Configuration()
    plainConfiguration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = concurrency
    let plainClient = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: plainConfiguration)
    let frontURL = "http://web.bench:\(port)/1k"
    let plainClientURL = "http://127.0.0.1:\(port)/1k"
    Benchmark(
        "HTTPDNSClient vs AsyncHTTPClient alone: 1 KiB keep-alive, \(concurrency) concurrent",
        configuration: .init(metrics: [
            .wallClock, .protocolRate, .plainRate, .rateRatio, .protocolP50, .plainP50, .addedP50, .resolveP50,
            .protocolCPU, .plainCPU,
        ])
    ) { benchmark in
        let viaFront: @Sendable () async throws -> Int = {
            try await get(frontURL) { try await frontClient.execute($0, timeout: .seconds(30)) }
        }
        let alone: @Sendable () async throws -> Int = {
            try await get(plainClientURL) { try await plainClient.execute($0, timeout: .seconds(30)) }
        }
        _ = try await throughput(count: concurrency * 4, workers: concurrency, viaFront)
        _ = try await throughput(count: concurrency * 4, workers: concurrency, alone)
        times.reset()
        // AsyncHTTPClient answers about five times faster than URLSession here: ten times the requests make each run
        // last about as long as the URLSession pairs', long enough for a steady rate.
        let count = requestsPerRun * 10
        let (plainRate, plainCPU) = try await CPUTime.measure(.process) {
            try await throughput(count: count, workers: concurrency, alone)
        }
        let (frontRate, frontCPU) = try await CPUTime.measure(.process) {
            try await throughput(count: count, workers: concurrency, viaFront)
        }
        benchmark.measurement(.plainCPU, Int((plainCPU / Double(count)).rounded()))
        benchmark.measurement(.protocolCPU, Int((frontCPU / Double(count)).rounded()))
        precondition(times.count >= count / concurrency * concurrency, "the requests did not go through HTTPDNSClient")
        let (plainP50, frontP50) = try await interleavedMedianLatencies(count: latencySamples, alone, viaFront)
        benchmark.measurement(.protocolRate, Int(frontRate))
        benchmark.measurement(.plainRate, Int(plainRate))
        benchmark.measurement(.rateRatio, Int((frontRate / plainRate * 100).rounded()))
        benchmark.measurement(.protocolP50, Int(frontP50.rounded()))
        benchmark.measurement(.plainP50, Int(plainP50.rounded()))
        benchmark.measurement(.addedP50, Int((frontP50 - plainP50).rounded()))
        benchmark.measurement(.resolveP50, Int(times.median().rounded()))
    }

    pair(
        "URLSession + HTTPDNSURLProtocol vs URLSession alone: 1 KiB keep-alive, \(concurrency) concurrent",
        intercepted: withProtocol, plain: alone, workers: concurrency)
    pair(
        "URLSession.shared + registered HTTPDNSURLProtocol vs URLSession alone: 1 KiB keep-alive, \(sharedConcurrency) concurrent",
        intercepted: shared, plain: aloneWide, workers: sharedConcurrency)
}
