// swift-tools-version:6.1
import PackageDescription

// `scripts/sanitize.sh thread --fuzz` sets HTTPDNS_FUZZING=1 for its sanitized build (it must come with a
// sanitizer, which `-sanitize-coverage` needs): the package's own modules then carry libFuzzer's coverage, and
// httpdns-fuzz links libFuzzer's driver, so one instrumented build runs both the suite and the fuzz targets.
let fuzzing = Context.environment["HTTPDNS_FUZZING"] == "1"

let strictSettings: [SwiftSetting] =
    [
        .enableUpcomingFeature("ExistentialAny"),
        .enableUpcomingFeature("MemberImportVisibility"),
        .enableUpcomingFeature("InternalImportsByDefault"),
    ] + (fuzzing ? [.unsafeFlags(["-sanitize-coverage=edge,trace-cmp,inline-8bit-counters,pc-table"])] : [])

let package = Package(
    name: "swift-httpdns",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "HTTPDNS", targets: ["HTTPDNS"]),
        // The settings file (checked with positions, environment overrides, reload) for programs that read one.
        .library(name: "HTTPDNSSettings", targets: ["HTTPDNSSettings"]),
        .library(name: "HTTPDNSURLProtocol", targets: ["HTTPDNSURLProtocol"]),
        .library(name: "HTTPDNSServer", targets: ["HTTPDNSServer"]),
        // The third front: a grpc-swift 2 name resolver; only adopters who name this product build gRPC.
        .library(name: "HTTPDNSGRPC", targets: ["HTTPDNSGRPC"]),
        .executable(name: "hostsctl", targets: ["hostsctl"]),
        // The command tree as a library, for embedding and for the benchmarks that measure `hostsctl bench` itself.
        .library(name: "HostsCTLCommands", targets: ["HostsCTLCommands"]),
    ],
    traits: [
        // hostsctl's OpenTelemetry export (the `otel` section) through swift-otel; on by default. Without it
        // (`--disable-default-traits`) hostsctl builds without swift-otel and swift-protobuf, and refuses an
        // `otel.endpoint`. CI's sanitized build goes without it (scripts/sanitize.sh).
        .trait(name: "OTLPExport", description: "OpenTelemetry export (OTLP/HTTP) in hostsctl serve and fetch"),
        .default(enabledTraits: ["OTLPExport"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.3"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0", traits: []),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/grpc/grpc-swift-2", from: "2.4.3"),
        .package(url: "https://github.com/grpc/grpc-swift-nio-transport", from: "2.9.2"),
        // OTLP export for hostsctl (the `otel` section): OTLP/HTTP only, so gRPC's protobuf code is not built.
        .package(url: "https://github.com/swift-otel/swift-otel", from: "1.6.0", traits: ["OTLPHTTP"]),
    ],
    targets: [
        // The system c-ares library. Only HTTPDNSCAres imports it.
        .systemLibrary(
            name: "CAres",
            pkgConfig: "libcares",
            providers: [.apt(["libc-ares-dev"])]
        ),
        // The system nghttp2 library: HTTP/2 for the server and the DoH client. Only HTTPDNSHTTP2 imports it.
        .systemLibrary(
            name: "CNGHTTP2",
            pkgConfig: "libnghttp2",
            providers: [.apt(["libnghttp2-dev"])]
        ),
        // Names, addresses, errors, answers, every DNS byte (Wire/: messages built, walked and read, ECS, OPT
        // editing, the server's query and answer messages, the forwarding marker, stream framing on NIO's byte
        // buffers), and how settings keys are declared and read. The vocabulary every other module speaks; no
        // network code.
        .target(
            name: "HTTPDNSCore",
            dependencies: [
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        // Classic DNS: CAresResolver, c-ares on an epoll thread (its answers read by HTTPDNSCore's DNS wire code).
        .target(
            name: "HTTPDNSCAres",
            dependencies: [
                "HTTPDNSCore",
                "CAres",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Configuration", package: "swift-configuration"),
            ],
            swiftSettings: strictSettings
        ),
        // HTTP/2 on nghttp2: the client session the DoH connection drives and the server session of
        // `hostsctl serve`, over NIO byte buffers; no C type leaves it.
        .target(
            name: "HTTPDNSHTTP2",
            dependencies: [
                "HTTPDNSCore",
                "CNGHTTP2",
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        // What every AsyncHTTPClient user of the package shares: the pool of clients pinned to an IP (with their
        // verified TLS), the one classification of transport errors, the per-client admission gate and the
        // exchange deadline. The DoH client and both fronts depend on it by name.
        .target(
            name: "HTTPDNSPinnedClients",
            dependencies: [
                "HTTPDNSCore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strictSettings
        ),
        // HTTP DNS clients: DoH (RFC 8484 and JSON) and vendor APIs, and their HTTP/2 connection (on HTTPDNSHTTP2).
        .target(
            name: "HTTPDNSClients",
            dependencies: [
                "HTTPDNSCore",
                "HTTPDNSPinnedClients",
                "HTTPDNSHTTP2",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Configuration", package: "swift-configuration"),
            ],
            swiftSettings: strictSettings
        ),
        // The resolver adopters import: HostResolver (overrides, the system hosts file, the scored IP cache, the
        // upstreams, probing), the settings file, and the lower modules re-exported.
        .target(
            name: "HTTPDNS",
            dependencies: [
                "HTTPDNSCore",
                "HTTPDNSCAres",
                "HTTPDNSClients",
                "HTTPDNSPinnedClients",
                "CNetlink",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: strictSettings
        ),
        // The one module that knows the settings file: its JSON read with positions, the checks against the key
        // table each component declares, the environment variables, and `Settings`, the resolver's configuration
        // with the sections the modules above it own (`interception`, `serve`, `grpc`, `otel`), which they read
        // through it. Nothing below it names a section.
        .target(
            name: "HTTPDNSSettings",
            dependencies: [
                "HTTPDNSCore",
                "HTTPDNS",
                .product(name: "Configuration", package: "swift-configuration"),
            ],
            swiftSettings: strictSettings
        ),
        // The dispatch queue a URLProtocol method runs on, for calling the protocol's client there (corelibs needs it).
        .target(name: "CSessionQueue"),
        // The netlink socket and setns calls of the network-change watcher, which Swift's Glibc does not declare.
        .target(name: "CNetlink"),
        // The rewriting URLProtocol and its IP-pinned transport: the only library target that imports FoundationNetworking
        // (hostsctl top and the test programs use URLSession as clients).
        .target(
            name: "HTTPDNSURLProtocol",
            dependencies: [
                "HTTPDNS",
                "HTTPDNSSettings",
                "HTTPDNSPinnedClients",
                "CSessionQueue",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strictSettings
        ),
        // gRPC clients on HTTPDNS: a push-mode NameResolverFactory over HostResolver, connect outcomes reported back
        // into the scores, and the one-line `.httpdns(...)` transport.
        .target(
            name: "HTTPDNSGRPC",
            dependencies: [
                "HTTPDNS",
                "HTTPDNSSettings",
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2Posix", package: "grpc-swift-nio-transport"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        // HTTP DNS served from the pipeline (DoH, the JSON API, vendor-compatible APIs) over HTTP/1.1 and HTTP/2.
        .target(
            name: "HTTPDNSServer",
            dependencies: [
                "HTTPDNS",
                "HTTPDNSSettings",
                "HTTPDNSHTTP2",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strictSettings
        ),
        // The hostsctl command tree, kept in a library so tests can parse and run commands.
        .target(
            name: "HostsCTLCommands",
            dependencies: [
                "HTTPDNS",
                "HTTPDNSSettings",
                "HTTPDNSURLProtocol",
                "HTTPDNSServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "OTel", package: "swift-otel", condition: .when(traits: ["OTLPExport"])),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "hostsctl",
            dependencies: [
                "HostsCTLCommands",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strictSettings
        ),
        // Launchers for the real servers the tests talk to (dnsmasq, dnsdist, local HTTP servers on loopback).
        .target(
            name: "TestSupport",
            dependencies: [
                "HTTPDNS",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            path: "Tests/TestSupport",
            swiftSettings: strictSettings
        ),
        // Many concurrent requests through one URLSession with the protocol in front; run as a child process by the
        // URL protocol tests, so a crash fails a test rather than the test runner.
        .executableTarget(
            name: "httpdns-adopter",
            dependencies: [
                "HTTPDNSURLProtocol",
                "HTTPDNSSettings",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/Adopter",
            swiftSettings: strictSettings
        ),
        // Every URLSession API form against a local server, one JSON line each; run by the URL protocol tests without
        // and with the library, each in its own process, to compare what the application observes.
        .executableTarget(
            name: "httpdns-url-forms",
            dependencies: [
                "HTTPDNSURLProtocol",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/URLForms",
            swiftSettings: strictSettings
        ),
        // libFuzzer's driver, reached from httpdns-fuzz's own entry point (absent unless built for fuzzing).
        .target(name: "FuzzDriver", path: "Tests/FuzzDriver"),
        .executableTarget(
            name: "httpdns-fuzz",
            dependencies: [
                "HTTPDNS", "HTTPDNSSettings", "HTTPDNSServer", "HTTPDNSHTTP2", "FuzzDriver",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/Fuzz",
            exclude: ["Corpus"],
            swiftSettings: strictSettings + (fuzzing ? [.define("FUZZING")] : []),
            linkerSettings: fuzzing ? [.unsafeFlags(["-sanitize=fuzzer"])] : []
        ),
        .executableTarget(
            name: "httpdns-soak",
            dependencies: ["HTTPDNS", "HTTPDNSURLProtocol", "TestSupport"],
            path: "Tests/Soak",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "httpdns-stress",
            dependencies: ["HTTPDNS", "HTTPDNSURLProtocol"],
            path: "Tests/URLProtocolStress",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "HTTPDNSTests",
            dependencies: [
                "HTTPDNSPinnedClients",
                "HTTPDNS",
                "HTTPDNSSettings",
                "TestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "HTTPDNSURLProtocolTests",
            dependencies: [
                "HTTPDNSSettings",
                "HTTPDNSPinnedClients",
                "HTTPDNSURLProtocol",
                "HTTPDNS",
                "TestSupport",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "HTTPDNSGRPCTests",
            dependencies: [
                "HTTPDNSSettings",
                "HTTPDNSGRPC",
                "HTTPDNS",
                "TestSupport",
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2Posix", package: "grpc-swift-nio-transport"),
                .product(name: "Configuration", package: "swift-configuration"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "HTTPDNSServerTests",
            dependencies: [
                "HTTPDNSSettings",
                "HTTPDNSServer",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                "HTTPDNS",
                "TestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "HostsCTLTests",
            dependencies: [
                "HostsCTLCommands", "HTTPDNS", "HTTPDNSSettings", "HTTPDNSServer", "HTTPDNSURLProtocol", "TestSupport",
            ],
            swiftSettings: strictSettings
        ),
    ]
)
