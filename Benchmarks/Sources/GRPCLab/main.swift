import Foundation
import GRPCBenchSupport
import GRPCCore
import GRPCNIOTransportHTTP2Posix
import HTTPDNS
import HTTPDNSGRPC

// The gRPC side of the latency lab (Benchmarks/latency-lab.sh --grpc):
//   GRPCLab serve PORT IP...     a grpc-swift server on each IP:PORT answering the address it was reached on
//   GRPCLab call PORT REQUESTS WARMUP IP...
//                                REQUESTS unary calls, one at a time, to lab.test:PORT through the HTTPDNS name
//                                resolver (pick-first, background probes on), lab.test answering IP... in that order
//                                from an override; prints one JSON line: calls, failures, the first call's time,
//                                the share of calls after WARMUP on each address, and their median time.

let method = MethodDescriptor(fullyQualifiedService: "lab.Who", method: "Address")

/// Answers the address the server listens on.
struct WhoService: RegistrableRPCService {
    let address: String

    func registerMethods<Transport: ServerTransport>(with router: inout RPCRouter<Transport>) {
        let reply = Array(address.utf8)
        router.registerHandler(forMethod: method, deserializer: RawBytes(), serializer: RawBytes()) { request, _ in
            for try await _ in request.messages {}
            return StreamingServerResponse(single: ServerResponse(message: reply))
        }
    }
}

func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
}

func serve(port: Int, addresses: [String]) async throws {
    try await withThrowingDiscardingTaskGroup { group in
        for address in addresses {
            let server = GRPCServer(
                transport: .http2NIOPosix(address: .ipv4(host: address, port: port), transportSecurity: .plaintext),
                services: [WhoService(address: address)])
            group.addTask { try await server.serve() }
        }
    }
}

func call(port: Int, requests: Int, warmup: Int, addresses: [String]) async throws {
    let overrides = HostOverrides()
    overrides.set(addresses.compactMap { IPAddress($0) }, for: try HostPattern("lab.test"))
    let resolver = HostResolver(upstreams: [], overrides: overrides)
    var failures = 0
    var reached: [String: Int] = [:]
    var times: [Double] = []
    var first: Double?
    try await withGRPCClient(
        transport: .httpdns(host: "lab.test", port: port, resolver: resolver, transportSecurity: .plaintext)
    ) { client in
        var options = CallOptions.defaults
        options.timeout = .seconds(30)
        options.waitForReady = true
        for index in 0..<requests {
            let start = ContinuousClock.now
            do {
                let address = try await client.unary(
                    request: ClientRequest(message: []), descriptor: method, serializer: RawBytes(),
                    deserializer: RawBytes(), options: options
                ) { response in String(decoding: try response.message, as: UTF8.self) }
                let elapsed = milliseconds(ContinuousClock.now - start)
                if index == 0 { first = elapsed }
                if index >= warmup {
                    reached[address, default: 0] += 1
                    times.append(elapsed)
                }
            } catch {
                failures += 1
            }
        }
    }
    await resolver.shutdown()
    let counted = max(reached.values.reduce(0, +), 1)
    let shares = reached.mapValues { Double($0) / Double(counted) }
    let median = times.isEmpty ? 0 : times.sorted()[times.count / 2]
    let report: [String: Any] = [
        "calls": requests, "failed": failures, "firstMs": first ?? -1, "medianMs": median, "shares": shares,
    ]
    let data = try JSONSerialization.data(withJSONObject: report, options: [.sortedKeys])
    print(String(decoding: data, as: UTF8.self))
}

let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "serve" where arguments.count >= 3:
    try await serve(port: Int(arguments[1])!, addresses: Array(arguments.dropFirst(2)))
case "call" where arguments.count >= 5:
    try await call(
        port: Int(arguments[1])!, requests: Int(arguments[2])!, warmup: Int(arguments[3])!,
        addresses: Array(arguments.dropFirst(4)))
default:
    FileHandle.standardError.write(Data("usage: GRPCLab serve PORT IP... | call PORT REQUESTS WARMUP IP...\n".utf8))
    exit(64)
}
