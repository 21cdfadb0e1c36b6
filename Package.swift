// swift-tools-version:6.1
import PackageDescription

let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "swift-httpdns",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "HTTPDNS", targets: ["HTTPDNS"]),
        .executable(name: "hostsctl", targets: ["hostsctl"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        // The system c-ares library. Only files in Sources/HTTPDNS/CAres import it.
        .systemLibrary(
            name: "CAres",
            pkgConfig: "libcares",
            providers: [.apt(["libc-ares-dev"])]
        ),
        // The resolver module: core types, the c-ares resolver, and (later) HTTP DNS, cache and overrides.
        .target(
            name: "HTTPDNS",
            dependencies: [
                "CAres",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        // The hostsctl command tree, kept in a library so tests can parse and run commands.
        .target(
            name: "HostsCTL",
            dependencies: [
                "HTTPDNS",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "hostsctl",
            dependencies: [
                "HostsCTL",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strictSettings
        ),
        // Launchers for the real servers the tests talk to (dnsmasq on loopback high ports).
        .target(
            name: "TestSupport",
            dependencies: ["HTTPDNS"],
            path: "Tests/TestSupport",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "HTTPDNSTests",
            dependencies: ["HTTPDNS", "TestSupport"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "HostsCTLTests",
            dependencies: ["HostsCTL", "HTTPDNS", "TestSupport"],
            swiftSettings: strictSettings
        ),
    ]
)
