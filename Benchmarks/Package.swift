// swift-tools-version:6.1
import Foundation
import PackageDescription

// SwiftPM names a path dependency after its folder, which differs between checkouts (CI clones elsewhere).
let rootPackage = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .lastPathComponent.lowercased()

// The benchmarks live in their own package so the main build stays lean.
// Run them with Benchmarks/run.sh, which starts the DNS servers they measure against.
let package = Package(
    name: "HTTPDNSBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: "../"),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.3"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.46.0"),
        .package(url: "https://github.com/grpc/grpc-swift-2", from: "2.4.3"),
        .package(url: "https://github.com/grpc/grpc-swift-nio-transport", from: "2.9.2"),
    ],
    targets: [
        // The ceiling of hostsctl serve's HTTP/2 stack: a fixed answer behind swift-nio-http2 and NIOSSL (serve.sh).
        .executableTarget(
            name: "H2Ceiling",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ],
            path: "Sources/H2Ceiling",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // CPU time per request beside the rates (getrusage).
        .target(name: "BenchSupport", path: "Sources/BenchSupport", swiftSettings: [.swiftLanguageMode(.v6)]),
        // What the gRPC benchmark and the gRPC lab share (raw-bytes messages), apart so other benchmarks link no gRPC.
        .target(
            name: "GRPCBenchSupport",
            dependencies: [.product(name: "GRPCCore", package: "grpc-swift-2")],
            path: "Sources/GRPCBenchSupport",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // The C baseline: c-ares driven directly from epoll, the same way the Swift resolver drives it.
        .target(
            name: "CAresDriver",
            path: "Sources/CAresDriver",
            cSettings: [.unsafeFlags(["-O2"])],
            linkerSettings: [.linkedLibrary("cares")]
        ),
        .executableTarget(
            name: "ResolverBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "HTTPDNS", package: rootPackage),
                .product(name: "HostsCTLCommands", package: rootPackage),
                "CAresDriver",
            ],
            path: "Benchmarks/ResolverBenchmarks",
            swiftSettings: [.swiftLanguageMode(.v6)],
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "OverrideBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "HTTPDNS", package: rootPackage),
            ],
            path: "Benchmarks/OverrideBenchmarks",
            swiftSettings: [.swiftLanguageMode(.v6)],
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "CacheBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "HTTPDNS", package: rootPackage),
            ],
            path: "Benchmarks/CacheBenchmarks",
            swiftSettings: [.swiftLanguageMode(.v6)],
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "DoHBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "HTTPDNS", package: rootPackage),
                "BenchSupport",
            ],
            path: "Benchmarks/DoHBenchmarks",
            swiftSettings: [.swiftLanguageMode(.v6)],
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "URLProtocolBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "HTTPDNS", package: rootPackage),
                .product(name: "HTTPDNSSettings", package: rootPackage),
                .product(name: "HTTPDNSURLProtocol", package: rootPackage),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                "BenchSupport",
            ],
            path: "Benchmarks/URLProtocolBenchmarks",
            swiftSettings: [.swiftLanguageMode(.v6)],
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // The gRPC side of the latency lab (latency-lab.sh --grpc): servers inside the lab, calls through HTTPDNS.
        .executableTarget(
            name: "GRPCLab",
            dependencies: [
                "GRPCBenchSupport",
                .product(name: "HTTPDNS", package: rootPackage),
                .product(name: "HTTPDNSGRPC", package: rootPackage),
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2Posix", package: "grpc-swift-nio-transport"),
            ],
            path: "Sources/GRPCLab",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // Unary gRPC calls through the HTTPDNS name resolver beside gRPC's own dns: resolver (one in-process server).
        .executableTarget(
            name: "GRPCBenchmarks",
            dependencies: [
                "GRPCBenchSupport",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "HTTPDNS", package: rootPackage),
                .product(name: "HTTPDNSGRPC", package: rootPackage),
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2Posix", package: "grpc-swift-nio-transport"),
            ],
            path: "Benchmarks/GRPCBenchmarks",
            swiftSettings: [.swiftLanguageMode(.v6)],
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ]
)
