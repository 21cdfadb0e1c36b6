// swift-tools-version: 6.1
// The README's Swift samples as a package that depends on swift-httpdns the way an adopter's does (by path here).
// CI builds it (`swift build --package-path Examples`), and a test checks that each sample in the README is the
// text of a file here, so a sample that does not compile fails CI.
import PackageDescription

let package = Package(
    name: "swift-httpdns-examples",
    dependencies: [
        .package(name: "swift-httpdns", path: "..")
    ],
    targets: [
        .executableTarget(
            name: "QuickStart",
            dependencies: [.product(name: "HTTPDNSURLProtocol", package: "swift-httpdns")],
            swiftSettings: [.swiftLanguageMode(.v6)]
        )
    ]
)
