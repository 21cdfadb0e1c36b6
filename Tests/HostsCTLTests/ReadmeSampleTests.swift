import Foundation
import Testing

/// The README's start-up sample is compiled in CI as `Examples/Sources/QuickStart/main.swift`; this keeps the two
/// the same text, so the README never shows code that does not build.
@Suite("README samples")
struct ReadmeSampleTests {
    @Test("the one-call start-up sample in the README is the Examples file CI builds")
    func quickStartSample() throws {
        let readme = try String(contentsOfFile: "README.md", encoding: .utf8)
        let sample = try String(contentsOfFile: "Examples/Sources/QuickStart/main.swift", encoding: .utf8)
        #expect(sample.contains("HTTPDNSRuntime.start(configurationFile:"))
        #expect(readme.contains("```swift\n" + sample + "```"), "copy Examples/Sources/QuickStart/main.swift into the README")
    }
}
