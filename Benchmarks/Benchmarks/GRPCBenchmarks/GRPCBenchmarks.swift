import Benchmark
import Foundation
import GRPCBenchSupport
import GRPCCore
import GRPCNIOTransportHTTP2Posix
import HTTPDNS
import HTTPDNSGRPC

// Unary gRPC calls through the HTTPDNS name resolver beside the same calls through gRPC's own `dns:` resolver, to one
// grpc-swift server on 127.0.0.1 started in this process (a 16-byte echo). The HTTPDNS side resolves `grpc.bench` from
// an override (the resolver's ranking, push mode, connect reports); the `dns:` side resolves `localhost` through
// getaddrinfo, as gRPC does by default. Same server, same process, alternating rounds.

let callsPerRound = Int(ProcessInfo.processInfo.environment["HTTPDNS_BENCH_GRPC_CALLS"] ?? "") ?? 20_000
let concurrency = 16
let latencySamples = 1000

extension BenchmarkMetric {
    static let httpdnsRate = BenchmarkMetric.custom(
        "HTTPDNS resolver calls/s", polarity: .prefersLarger, useScalingFactor: false)
    static let dnsRate = BenchmarkMetric.custom(
        "dns: resolver calls/s", polarity: .prefersLarger, useScalingFactor: false)
    static let rateRatio = BenchmarkMetric.custom("HTTPDNS/dns: %", polarity: .prefersLarger, useScalingFactor: false)
    static let httpdnsP50 = BenchmarkMetric.custom("HTTPDNS resolver p50 (us)", useScalingFactor: false)
    static let dnsP50 = BenchmarkMetric.custom("dns: resolver p50 (us)", useScalingFactor: false)
}

/// Echoes each request.
struct EchoService: RegistrableRPCService {
    static let method = MethodDescriptor(fullyQualifiedService: "bench.Echo", method: "Get")

    func registerMethods<Transport: ServerTransport>(with router: inout RPCRouter<Transport>) {
        router.registerHandler(forMethod: Self.method, deserializer: RawBytes(), serializer: RawBytes()) {
            request, _ in
            var last: [UInt8] = []
            for try await message in request.messages { last = message }
            return StreamingServerResponse(single: ServerResponse(message: last))
        }
    }
}

let payload = Array(repeating: UInt8(ascii: "x"), count: 16)

/// One unary call; returns the reply's size.
@Sendable func call(_ client: GRPCClient<HTTP2ClientTransport.Posix>) async throws -> Int {
    try await client.unary(
        request: ClientRequest(message: payload), descriptor: EchoService.method, serializer: RawBytes(),
        deserializer: RawBytes(), options: .defaults
    ) { response in try response.message.count }
}

/// `count` calls, `workers` at a time; returns calls per second.
func rate(_ client: GRPCClient<HTTP2ClientTransport.Posix>, count: Int) async throws -> Double {
    let start = ContinuousClock.now
    try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0..<concurrency {
            group.addTask {
                for _ in 0..<(count / concurrency) {
                    let size = try await call(client)
                    precondition(size == payload.count)
                }
            }
        }
        try await group.waitForAll()
    }
    let elapsed = ContinuousClock.now - start
    return Double(count / concurrency * concurrency)
        / (Double(elapsed.components.attoseconds) / 1e18
            + Double(elapsed.components.seconds))
}

let benchmarks: @Sendable () -> Void = {
    Benchmark(
        "gRPC unary calls: the HTTPDNS resolver vs gRPC's dns: resolver, \(concurrency) tasks, 4 alternating rounds",
        configuration: .init(metrics: [.wallClock, .httpdnsRate, .dnsRate, .rateRatio, .httpdnsP50, .dnsP50])
    ) { benchmark in
        let transport = HTTP2ServerTransport.Posix(
            address: .ipv4(host: "127.0.0.1", port: 0), transportSecurity: .plaintext)
        let server = GRPCServer(transport: transport, services: [EchoService()])
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { try await server.serve() }
            let port = try await transport.listeningAddress.ipv4!.port
            let overrides = HostOverrides()
            overrides.set([IPAddress("127.0.0.1")!], for: try HostPattern("grpc.bench"))
            let resolver = HostResolver(upstreams: [], overrides: overrides)
            try await withGRPCClient(
                transport: .httpdns(host: "grpc.bench", port: port, resolver: resolver, transportSecurity: .plaintext)
            ) { viaHTTPDNS in
                try await withGRPCClient(
                    transport: .http2NIOPosix(
                        target: .dns(host: "localhost", port: port), transportSecurity: .plaintext)
                ) { viaDNS in
                    _ = try await rate(viaHTTPDNS, count: concurrency * 50)
                    _ = try await rate(viaDNS, count: concurrency * 50)
                    var seconds = (httpdns: 0.0, dns: 0.0)
                    for round in 0..<4 {
                        for side in round.isMultiple(of: 2) ? [0, 1] : [1, 0] {
                            let perSecond = try await rate(side == 0 ? viaHTTPDNS : viaDNS, count: callsPerRound)
                            if side == 0 {
                                seconds.httpdns += Double(callsPerRound) / perSecond
                            } else {
                                seconds.dns += Double(callsPerRound) / perSecond
                            }
                        }
                    }
                    let (httpdnsRate, dnsRate) = (
                        4 * Double(callsPerRound) / seconds.httpdns, 4 * Double(callsPerRound) / seconds.dns
                    )
                    var samples: ([Double], [Double]) = ([], [])
                    for round in 0..<latencySamples {
                        for side in round.isMultiple(of: 2) ? [0, 1] : [1, 0] {
                            let start = ContinuousClock.now
                            _ = try await call(side == 0 ? viaHTTPDNS : viaDNS)
                            let elapsed = ContinuousClock.now - start
                            let micros =
                                Double(elapsed.components.attoseconds) / 1e12 + Double(elapsed.components.seconds) * 1e6
                            if side == 0 { samples.0.append(micros) } else { samples.1.append(micros) }
                        }
                    }
                    benchmark.measurement(.httpdnsRate, Int(httpdnsRate))
                    benchmark.measurement(.dnsRate, Int(dnsRate))
                    benchmark.measurement(.rateRatio, Int((httpdnsRate / dnsRate * 100).rounded()))
                    benchmark.measurement(.httpdnsP50, Int(samples.0.sorted()[latencySamples / 2].rounded()))
                    benchmark.measurement(.dnsP50, Int(samples.1.sorted()[latencySamples / 2].rounded()))
                }
            }
            await resolver.shutdown()
            server.beginGracefulShutdown()
        }
    }
}
