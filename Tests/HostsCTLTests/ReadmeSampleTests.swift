import Foundation
import Testing

/// Every Swift sample in the README is compiled in CI as part of a program in `Examples/Sources/NAME/main.swift`;
/// this keeps the README and those files the same text, so the README never shows code that does not build.
@Suite("README samples")
struct ReadmeSampleTests {
    /// The README's ```swift blocks, in order.
    static func readmeSamples() throws -> [String] {
        let readme = try String(contentsOfFile: "README.md", encoding: .utf8)
        var samples: [String] = []
        var current: [Substring]?
        for line in readme.split(separator: "\n", omittingEmptySubsequences: false) {
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

    @Test("every Swift sample in the README is part of a program in Examples/, which CI builds")
    func everySampleCompiles() throws {
        let samples = try Self.readmeSamples()
        let programs = try Self.examplePrograms()
        #expect(samples.count >= 9)
        for sample in samples {
            // Manifest fragments (`.package(...)` lines) are not programs; Examples/Package.swift uses the same calls.
            if sample.hasPrefix("// Package.swift\n") { continue }
            let holders = programs.filter { $0.value.contains(sample) }.keys.sorted()
            #expect(!holders.isEmpty, "README sample not found in any Examples/Sources/*/main.swift:\n\(sample)")
        }
    }
}
