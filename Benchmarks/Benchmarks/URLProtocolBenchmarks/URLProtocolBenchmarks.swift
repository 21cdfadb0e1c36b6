import AsyncHTTPClient
import BenchSupport
import Benchmark
import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import HTTPDNS
import HTTPDNSSettings
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
    /// The benchmark package records no negative value: an iteration where the protocol is faster leaves no sample
    /// here (see ``latencyRatio``).
    static let addedP50 = BenchmarkMetric.custom("added p50 (us, when slower)", useScalingFactor: false)
    static let latencyRatio = BenchmarkMetric.custom(
        "with protocol / alone p50 %", polarity: .prefersSmaller, useScalingFactor: false)
    static let resolveP50 = BenchmarkMetric.custom("protocol resolve+rewrite p50 (us)", useScalingFactor: false)
    /// The process's CPU (every thread) per request in the throughput runs: steadier than the rates on shared cores.
    static let protocolCPU = BenchmarkMetric.custom("with protocol CPU/request (us)", useScalingFactor: false)
    static let plainCPU = BenchmarkMetric.custom("alone CPU/request (us)", useScalingFactor: false)
    static let floorP50 = BenchmarkMetric.custom("floor p50 (us, URLProtocol from memory)", useScalingFactor: false)
    static let curlP50 = BenchmarkMetric.custom("curl p50 (us, keep-alive)", useScalingFactor: false)
    static let overFloorP50 = BenchmarkMetric.custom("with protocol over floor p50 (us)", useScalingFactor: false)
    static let exchangeP50 = BenchmarkMetric.custom(
        "engine exchange p50 (us, resolve to last byte)", useScalingFactor: false)
    static let exchangeToCurl = BenchmarkMetric.custom(
        "engine exchange / curl %", polarity: .prefersSmaller, useScalingFactor: false)
}

extension Benchmark {
    /// Records a side's p50 against its baseline's: the difference (``BenchmarkMetric/addedP50``, kept only when the
    /// side is slower) and the ratio (``BenchmarkMetric/latencyRatio``, always).
    func compareLatency(_ side: Double, to baseline: Double) {
        measurement(.addedP50, Int((side - baseline).rounded()))
        measurement(.latencyRatio, Int((side / baseline * 100).rounded()))
    }
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

// MARK: - One request at a time: the library beside URLSession alone, the floor URLSession sets, and curl

/// The floor: a URL protocol that answers every request from memory (200, 1 KiB) through the same URLSession calls
/// the library makes. What URLSession itself costs a request that goes through a protocol, with no network at all.
final class MemoryProtocol: URLProtocol {
    static let body = Data(repeating: UInt8(ascii: "x"), count: 1024)

    override class func canInit(with request: URLRequest) -> Bool { request.url?.host == "floor.bench" }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    override func startLoading() {
        guard let url = request.url,
            let response = HTTPURLResponse(
                url: url, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: ["Content-Length": "1024"])
        else { return }
        client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
        client?.urlProtocol(self, didLoad: Self.body)
        client?.urlProtocolDidFinishLoading(self)
    }

    override func stopLoading() {}
}

/// `count` sequential GETs of `url` by one curl process over one keep-alive connection; the median of curl's own
/// per-transfer times (`time_total`), in microseconds, the first transfer (the connect) left out.
func curlMedianLatency(url: URL, count: Int) throws -> Double {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
    process.arguments =
        ["-s", "-w", "%{time_total}\n"] + (0..<count).flatMap { _ in ["-o", "/dev/null", url.absoluteString] }
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let output = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let samples = String(decoding: output, as: UTF8.self).split(separator: "\n").compactMap { Double($0) }.dropFirst()
    precondition(samples.count == count - 1, "curl did not make every request")
    return samples.map { $0 * 1e6 }.sorted()[samples.count / 2]
}

/// The median latencies of `count` rounds of one sequential GET through each of `sides`, the order rotated every
/// round, so a machine that speeds up or slows down during the run weighs on every side alike.
func interleavedMedians(count: Int, _ sides: [() async throws -> Int]) async throws -> [Double] {
    var samples = Array(repeating: [Double](), count: sides.count)
    for round in 0..<count {
        for step in sides.indices {
            let side = (round + step) % sides.count
            let start = ContinuousClock.now
            let size = try await sides[side]()
            samples[side].append(microseconds(ContinuousClock.now - start))
            precondition(size == 1024)
        }
    }
    return samples.map { $0.sorted()[count / 2] }
}

/// One GET of `url` through `session`; returns the body's size.
func get(_ session: URLSession, _ url: URL) async throws -> Int {
    let (data, response) = try await session.data(for: URLRequest(url: url))
    precondition((response as? HTTPURLResponse)?.statusCode == 200)
    return data.count
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
    let exchangeTimes = ResolveTimes()
    var pipeline = HostResolver.Configuration()
    pipeline.probeEnabled = false
    pipeline.network.watch = false
    let resolver = HostResolver(
        upstreams: [.init(name: "bench", kind: .other, resolver: BenchUpstream())], configuration: pipeline)
    // One interceptor serves the process (the protocol class holds one), so both pairs share it. It is registered
    // first, before anything creates a URLSession, so URLSession.shared takes the protocol.
    let interceptor = try! HTTPDNSInterceptor(
        resolver: resolver,
        configuration: .init(
            connection: ConnectionPolicy(
                maximumConnectionsPerHost: sharedConcurrency,
                traceHandler: { trace in
                    times.append(microseconds(trace.hops.first?.resolveTime ?? .zero))
                    exchangeTimes.append(microseconds(trace.elapsed))
                }),
            cookieStorage: nil
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
                .wallClock, .protocolRate, .plainRate, .rateRatio, .protocolP50, .plainP50, .addedP50, .latencyRatio,
                .resolveP50,
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
            benchmark.compareLatency(protocolP50, to: plainP50)
            benchmark.measurement(.resolveP50, Int(times.median().rounded()))
        }
    }

    // The AsyncHTTPClient front beside a plain HTTPClient, both with `concurrency` connections to the server.
    let frontClient = try! HTTPDNSClient(
        resolver: resolver,
        configuration: ConnectionPolicy(
            maximumConnectionsPerHost: concurrency,
            traceHandler: { trace in times.append(microseconds(trace.hops.first?.resolveTime ?? .zero)) }))
    var plainConfiguration = HTTPClient.Configuration()
    plainConfiguration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = concurrency
    let plainClient = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: plainConfiguration)
    let frontURL = "http://web.bench:\(port)/1k"
    let plainClientURL = "http://127.0.0.1:\(port)/1k"
    Benchmark(
        "HTTPDNSClient vs AsyncHTTPClient alone: 1 KiB keep-alive, \(concurrency) concurrent",
        configuration: .init(metrics: [
            .wallClock, .protocolRate, .plainRate, .rateRatio, .protocolP50, .plainP50, .addedP50, .latencyRatio,
            .resolveP50,
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
        benchmark.compareLatency(frontP50, to: plainP50)
        benchmark.measurement(.resolveP50, Int(times.median().rounded()))
    }

    // One request at a time, as an application that makes one call after another sees it: URLSession.shared with the
    // protocol registered, URLSession alone, the floor (a URL protocol answering from memory through the same
    // URLSession calls) and curl (one keep-alive connection, its own per-transfer times), in the same iteration.
    let floorConfiguration = URLSessionConfiguration.ephemeral
    floorConfiguration.protocolClasses = [MemoryProtocol.self]
    let floorSession = URLSession(configuration: floorConfiguration)
    let floorURL = URL(string: "http://floor.bench/1k")!
    Benchmark(
        "one at a time: URLSession.shared + protocol, URLSession alone, the URLProtocol floor, curl: 1 KiB keep-alive",
        configuration: .init(metrics: [
            .wallClock, .protocolP50, .plainP50, .floorP50, .curlP50, .addedP50, .latencyRatio, .overFloorP50,
            .exchangeP50, .exchangeToCurl, .resolveP50,
        ])
    ) { benchmark in
        let sides: [() async throws -> Int] = [
            { try await get(shared, protocolURL) }, { try await get(aloneWide, plainURL) },
            { try await get(floorSession, floorURL) },
        ]
        _ = try await interleavedMedians(count: 20, sides)
        times.reset()
        exchangeTimes.reset()
        let medians = try await interleavedMedians(count: latencySamples, sides)
        let curl = try curlMedianLatency(url: plainURL, count: latencySamples)
        precondition(exchangeTimes.count >= latencySamples, "the requests did not go through the protocol")
        benchmark.measurement(.protocolP50, Int(medians[0].rounded()))
        benchmark.measurement(.plainP50, Int(medians[1].rounded()))
        benchmark.measurement(.floorP50, Int(medians[2].rounded()))
        benchmark.measurement(.curlP50, Int(curl.rounded()))
        benchmark.compareLatency(medians[0], to: medians[1])
        benchmark.measurement(.overFloorP50, Int((medians[0] - medians[2]).rounded()))
        benchmark.measurement(.exchangeP50, Int(exchangeTimes.median().rounded()))
        benchmark.measurement(.exchangeToCurl, Int((exchangeTimes.median() / curl * 100).rounded()))
        benchmark.measurement(.resolveP50, Int(times.median().rounded()))
    }

    // HTTPDNSClient as an adopter sets it up from the README (settings file, overrides answering, every default)
    // against HTTPClient.shared, 16 tasks, in alternating rounds of the same iteration.
    let adopterDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-bench-\(getpid())")
    try! FileManager.default.createDirectory(at: adopterDirectory, withIntermediateDirectories: true)
    try! "127.0.0.1 web.bench\n".write(
        to: adopterDirectory.appendingPathComponent("hosts"), atomically: true, encoding: .utf8)
    try! #"{ "overrides": { "file": "hosts" } }"#.write(
        to: adopterDirectory.appendingPathComponent("hostsctl.json"), atomically: true, encoding: .utf8)
    let adopterSettings = try! SettingsFile.load(path: adopterDirectory.appendingPathComponent("hostsctl.json").path)
        .get()
    let adopterResolver = try! HostResolver(configuration: adopterSettings.resolver)
    let adopterClient = try! HTTPDNSClient(
        resolver: adopterResolver,
        configuration: adopterSettings.read(HTTPDNSInterceptor.Configuration.section).connection)
    Benchmark(
        "HTTPDNSClient as the README sets it up vs HTTPClient.shared: 1 KiB keep-alive, \(concurrency) tasks, 4 alternating rounds",
        configuration: .init(metrics: [
            .wallClock, .protocolRate, .plainRate, .rateRatio, .protocolP50, .plainP50, .addedP50, .latencyRatio,
        ])
    ) { benchmark in
        let viaFront: @Sendable () async throws -> Int = {
            try await get(frontURL) { try await adopterClient.execute($0, timeout: .seconds(30)) }
        }
        let alone: @Sendable () async throws -> Int = {
            try await get(plainClientURL) { try await HTTPClient.shared.execute($0, timeout: .seconds(30)) }
        }
        _ = try await throughput(count: concurrency * 4, workers: concurrency, viaFront)
        _ = try await throughput(count: concurrency * 4, workers: concurrency, alone)
        var (frontSeconds, aloneSeconds) = (0.0, 0.0)
        let count = requestsPerRun * 5 / 2
        for round in 0..<4 {
            for side in round.isMultiple(of: 2) ? [0, 1] : [1, 0] {
                let rate = try await throughput(count: count, workers: concurrency, side == 0 ? viaFront : alone)
                if side == 0 { frontSeconds += Double(count) / rate } else { aloneSeconds += Double(count) / rate }
            }
        }
        let (frontRate, aloneRate) = (Double(4 * count) / frontSeconds, Double(4 * count) / aloneSeconds)
        let (aloneP50, frontP50) = try await interleavedMedianLatencies(count: latencySamples, alone, viaFront)
        benchmark.measurement(.protocolRate, Int(frontRate))
        benchmark.measurement(.plainRate, Int(aloneRate))
        benchmark.measurement(.rateRatio, Int((frontRate / aloneRate * 100).rounded()))
        benchmark.measurement(.protocolP50, Int(frontP50.rounded()))
        benchmark.measurement(.plainP50, Int(aloneP50.rounded()))
        benchmark.compareLatency(frontP50, to: aloneP50)
    }

    pair(
        "URLSession + HTTPDNSURLProtocol vs URLSession alone: 1 KiB keep-alive, \(concurrency) concurrent",
        intercepted: withProtocol, plain: alone, workers: concurrency)
    pair(
        "URLSession.shared + registered HTTPDNSURLProtocol vs URLSession alone: 1 KiB keep-alive, \(sharedConcurrency) concurrent",
        intercepted: shared, plain: aloneWide, workers: sharedConcurrency)
}
