import Foundation
import Testing

/// Every Swift sample in the README, the guides under `docs/` and the DocC catalogs is compiled in CI as part of a
/// program in `Examples/Sources/NAME/main.swift`; this keeps the documents and those files the same text, so no
/// document shows code that does not build.
@Suite("README samples")
struct ReadmeSampleTests {
    /// The documents whose samples must compile: the README, every guide in `docs/` and every DocC catalog's pages.
    static func documents() throws -> [String] {
        let files = FileManager.default
        let guides = try files.contentsOfDirectory(atPath: "docs").filter { $0.hasSuffix(".md") }
        var catalogs: [String] = []
        for module in try files.contentsOfDirectory(atPath: "Sources").sorted() {
            let catalog = "Sources/\(module)/\(module).docc"
            guard let pages = try? files.contentsOfDirectory(atPath: catalog) else { continue }
            catalogs += pages.filter { $0.hasSuffix(".md") }.sorted().map { "\(catalog)/\($0)" }
        }
        return ["README.md"] + guides.sorted().map { "docs/\($0)" } + catalogs
    }

    /// The documents' ```swift blocks, in order.
    static func readmeSamples() throws -> [String] {
        var found: [String] = []
        for document in try documents() {
            found += try Self.samples(in: String(contentsOfFile: document, encoding: .utf8))
        }
        return found
    }

    /// The ```swift blocks of one Markdown text.
    static func samples(in text: String) -> [String] {
        var samples: [String] = []
        var current: [Substring]?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line == "```swift" {
                current = []
            } else if current != nil, line == "```" {
                samples.append(current!.joined(separator: "\n") + "\n")
                current = nil
            } else {
                current?.append(line)
            }
        }
        return samples
    }

    /// The programs under Examples/Sources, by target name.
    static func examplePrograms() throws -> [String: String] {
        let root = "Examples/Sources"
        var programs: [String: String] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: root) {
            programs[name] = try String(contentsOfFile: "\(root)/\(name)/main.swift", encoding: .utf8)
        }
        return programs
    }

    @Test("the one-call start-up sample in the README is the whole QuickStart program")
    func quickStartSample() throws {
        let readme = try String(contentsOfFile: "README.md", encoding: .utf8)
        let sample = try String(contentsOfFile: "Examples/Sources/QuickStart/main.swift", encoding: .utf8)
        #expect(sample.contains("HTTPDNSRuntime.start(configurationFile:"))
        #expect(
            readme.contains("```swift\n" + sample + "```"),
            "copy Examples/Sources/QuickStart/main.swift into the README")
    }

    @Test(
        "every Swift sample in the README, docs/ and the DocC catalogs is part of a program in Examples/, which CI builds"
    )
    func everySampleCompiles() throws {
        let samples = try Self.readmeSamples()
        let programs = try Self.examplePrograms()
        #expect(samples.count >= 9)
        #expect(try Self.samples(in: String(contentsOfFile: "README.md", encoding: .utf8)).count >= 2)
        #expect(try Self.documents().contains { $0.hasSuffix(".docc/HTTPDNS.md") })
        for sample in samples {
            // Manifest fragments (`.package(...)` lines) are not programs; Examples/Package.swift uses the same calls.
            if sample.hasPrefix("// Package.swift\n") { continue }
            let holders = programs.filter { $0.value.contains(sample) }.keys.sorted()
            #expect(!holders.isEmpty, "sample not found in any Examples/Sources/*/main.swift:\n\(sample)")
        }
    }
}
