// swift-tools-version: 6.1
// The README's Swift samples as a package that depends on swift-httpdns the way an adopter's does (by path here).
// CI builds it (`swift build --package-path Examples`), and ReadmeSampleTests checks that every Swift sample in the
// README is the text of a file here, so a sample that does not compile fails CI.
import PackageDescription

/// One executable per sample: each is a complete program, as an adopter would paste it.
let samples: [(name: String, products: [String], other: [Target.Dependency])] = [
    ("QuickStart", ["HTTPDNSURLProtocol"], []),
    ("RuntimeInBrief", ["HTTPDNSURLProtocol"], []),
    ("ResolverInBrief", ["HTTPDNS", "HTTPDNSSettings"], []),
    ("Resolver", ["HTTPDNS"], []),
    ("HTTPDNSProviders", ["HTTPDNS"], []),
    ("Overrides", ["HTTPDNS"], []),
    ("PipelineFromSettings", ["HTTPDNS", "HTTPDNSSettings"], []),
    ("PipelineFromParts", ["HTTPDNS"], []),
    ("URLProtocolByHand", ["HTTPDNS", "HTTPDNSSettings", "HTTPDNSURLProtocol"], []),
    ("SettingsFile", ["HTTPDNS", "HTTPDNSSettings"], []),
    // Run by CI as well, against local servers (scripts/build-samples.sh).
    ("ResolverInCode", ["HTTPDNS"], []),
    ("EmbeddedServer", ["HTTPDNS", "HTTPDNSServer"], []),
    ("AsyncHTTPClientFront", ["HTTPDNS", "HTTPDNSSettings", "HTTPDNSURLProtocol"], [.product(name: "AsyncHTTPClient", package: "async-http-client")]),
    ("GRPCFront", ["HTTPDNS", "HTTPDNSSettings", "HTTPDNSGRPC"], [
        .product(name: "GRPCCore", package: "grpc-swift-2"),
        .product(name: "GRPCNIOTransportHTTP2", package: "grpc-swift-nio-transport"),
    ]),
]

let package = Package(
    name: "swift-httpdns-examples",
    dependencies: [
        .package(name: "swift-httpdns", path: ".."),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/grpc/grpc-swift-2", from: "2.4.3"),
        .package(url: "https://github.com/grpc/grpc-swift-nio-transport", from: "2.9.2"),
    ],
    targets: samples.map { sample in
        .executableTarget(
            name: sample.name,
            dependencies: sample.products.map { .product(name: $0, package: "swift-httpdns") }
                + [.product(name: "Logging", package: "swift-log")] + sample.other,
            swiftSettings: [.swiftLanguageMode(.v6)]
        )
    }
)
