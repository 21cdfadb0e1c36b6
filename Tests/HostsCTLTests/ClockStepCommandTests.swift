import Foundation
import TestSupport
import Testing

@testable import HTTPDNSCore
@testable import HostsCTLCommands

/// Clock steps seen from the command line, with the wall clock really stepped for the process: libfaketime
/// (`faketime`, Debian) moves `CLOCK_REALTIME` a day either way and leaves the monotonic and boot clocks alone, as
/// NTP or a user stepping the clock would. A cache saved before the step is neither dead nor immortal after it.
///
/// In CI a missing faketime fails the suite rather than skipping it. Not under a sanitizer (`scripts/sanitize.sh`):
/// libfaketime's preloaded clock functions hang a sanitized program as it starts. `ClockStepTests` covers the same
/// logic there with a hand-moved clock.
@Suite(
    "Clock steps, hostsctl",
    .enabled(
        if: (FileManager.default.isExecutableFile(atPath: "/usr/bin/faketime")
            || ProcessInfo.processInfo.environment["CI"] != nil)
            && ProcessInfo.processInfo.environment["HTTPDNS_SANITIZER"] == nil))
struct ClockStepCommandTests {
    /// `cache show --json` of `file` with the wall clock stepped by `step` (e.g. `+1d`), as (remaining, stale).
    static func show(_ file: String, step: String) async throws -> (Double, Bool) {
        let output = try await HostsCTLProcess.run(
            executable: "/usr/bin/faketime",
            ["-f", step, HostsCTLProcess.executable, "cache", "show", "--cache-file", file, "--json"],
            environment: ["DONT_FAKE_MONOTONIC": "1"])
        #expect(output.status == 0, "\(output.standardError)")
        let entries = try #require(
            try JSONSerialization.jsonObject(with: Data(output.standardOutput.utf8)) as? [[String: Any]],
            "\(output.standardOutput)")
        let entry = try #require(entries.first { $0["host"] as? String == "multi.test" })
        return (try #require(entry["remainingSeconds"] as? Double), try #require(entry["stale"] as? Bool))
    }

    @Test("a cache saved before the wall clock is stepped a day forward or back keeps its answers' remaining TTL")
    func steppedWallClock() async throws {
        let dns = try await DNSMasq.start()
        defer { dns.stop() }
        let directory = try TemporaryDirectory()
        let cacheFile = directory.path("cache.json")
        let resolve = try await HostsCTLProcess.run([
            "resolve", "--server", dns.address.description, "--cache-file", cacheFile, "--json", "multi.test",
        ])
        #expect(resolve.status == 0, "\(resolve.standardError)")
        // Checks that faketime steps this binary's wall clock at all: the file records the real wall time.
        let stepped = try await HostsCTLProcess.run(
            executable: "/usr/bin/faketime", ["-f", "-1d", "/bin/date", "+%s"],
            environment: ["DONT_FAKE_MONOTONIC": "1"])
        let real = Date().timeIntervalSince1970
        let steppedSeconds = Double(stepped.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        #expect(abs(steppedSeconds - (real - 86_400)) < 60, "faketime did not step the clock")
        for step in ["+1d", "-1d", "+3y"] {
            let (remaining, stale) = try await Self.show(cacheFile, step: step)
            // multi.test has a TTL of 300 s; a few seconds passed.
            #expect(!stale && remaining > 250 && remaining <= 300, "wall clock \(step): \(remaining) s left")
        }
    }
}
