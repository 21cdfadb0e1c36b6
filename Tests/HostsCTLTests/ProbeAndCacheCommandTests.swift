import ArgumentParser
import Foundation
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore
@testable import HostsCTLCommands

@Suite("hostsctl probe and cache")
struct ProbeAndCacheCommandTests {
    @Test("probe arguments parse, and bad ones exit with 64")
    func probeParsing() throws {
        let command = try #require(
            try HostsCTLCommand.parseAsRoot([
                "probe", "--port", "8443", "--samples", "9", "--connect-timeout", "0.25", "--server", "127.0.0.1:5353",
                "--family", "ipv4",
                "--cache-file", "/tmp/c.json", "--json", "a.test",
            ]) as? ProbeCommand
        )
        #expect(command.port == 8443 && command.samples == 9 && command.connectTimeout == 0.25)
        #expect(command.resolution.family == .ipv4 && command.cache.cacheFile == "/tmp/c.json" && command.json)
        for arguments in [
            ["probe"], ["probe", "--port", "0", "a.test"], ["probe", "--port", "65536", "a.test"],
            ["probe", "--samples", "0", "a.test"],
            ["probe", "--connect-timeout", "0", "a.test"], ["probe", "--no-cache", "--cache-file", "c", "a.test"],
        ] {
            expectUsageError(arguments)
        }
    }

    @Test("cache arguments parse, and bad ones exit with 64")
    func cacheParsing() throws {
        let show = try #require(
            try HostsCTLCommand.parseAsRoot(["cache", "show", "--json", "--cache-file", "c.json"]) as? CacheCommand.Show
        )
        #expect(show.json && show.location.cacheFile == "c.json")
        let export = try #require(
            try HostsCTLCommand.parseAsRoot(["cache", "export", "-o", "out", "--json"]) as? CacheCommand.Export)
        #expect(export.output == "out" && export.json)
        let clear = try #require(
            try HostsCTLCommand.parseAsRoot(["cache", "clear", "a.test", "b.test"]) as? CacheCommand.Clear)
        #expect(clear.hosts == ["a.test", "b.test"])
        for arguments in [["cache", "clear", "bad..name"], ["cache", "bogus"], ["cache", "show", "extra"]] {
            expectUsageError(arguments)
        }
    }

    /// A name with two addresses in a real dnsmasq: one accepts connections, the other refuses them.
    private static let probeRecords =
        TestZone.records + ["host-record=probe.test,127.0.0.20,300", "host-record=probe.test,127.0.0.21,300"]

    @Test("override addresses are ranked and scored like any answer: probe, then cache show")
    func overrideAddressesRanked() async throws {
        let listener = try TCPListener(ip: "127.0.0.64")
        defer { listener.close() }
        let refusing = try TCPListener(ip: "127.0.0.65", port: listener.port, listening: false)
        defer { refusing.close() }
        let directory = try TemporaryDirectory()
        let cacheFile = directory.path("cache.json")
        let hosts = directory.path("hosts")
        // The refused address comes first in the file; the probe's samples put it last.
        try "127.0.0.65 pinned.test\n127.0.0.64 pinned.test\n".write(toFile: hosts, atomically: true, encoding: .utf8)
        let environment = ["HOSTSCTL_SOURCES_ORDER": "overrides,cache"]
        let probe = try await HostsCTLProcess.run(
            [
                "probe", "--hosts", hosts, "--family", "ipv4", "--port", "\(listener.port)", "--samples", "2",
                "--cache-file", cacheFile,
                "--json", "pinned.test",
            ], environment: environment)
        #expect(probe.status == 0, "\(probe.standardError)")
        let report = try #require(
            (try JSONSerialization.jsonObject(with: Data(probe.standardOutput.utf8)) as? [[String: Any]])?.first)
        #expect(report["source"] as? String == "override")
        let addresses = try #require(report["addresses"] as? [[String: Any]])
        #expect(addresses.map { $0["ip"] as? String } == ["127.0.0.64", "127.0.0.65"])
        #expect(addresses.map { $0["rank"] as? Int } == [1, 2])
        #expect(addresses.allSatisfy { $0["score"] is Double || $0["score"] is Int })

        let show = try await HostsCTLProcess.run(
            ["cache", "show", "--cache-file", cacheFile, "--json"], environment: environment)
        #expect(show.status == 0, "\(show.standardError)")
        let entries = try #require(
            try JSONSerialization.jsonObject(with: Data(show.standardOutput.utf8)) as? [[String: Any]])
        let entry = try #require(entries.first { $0["host"] as? String == "pinned.test" })
        #expect(entry["origin"] as? String == "override")
        let listed = try #require(entry["addresses"] as? [[String: Any]])
        #expect(listed.map { $0["ip"] as? String } == ["127.0.0.64", "127.0.0.65"])
    }

    @Test("probe: samples per address, the cache's rank and score, saved for cache show, export and clear")
    func probeThenCache() async throws {
        let listener = try TCPListener(ip: "127.0.0.20")
        defer { listener.close() }
        let refusing = try TCPListener(ip: "127.0.0.21", port: listener.port, listening: false)
        defer { refusing.close() }
        let dns = try await DNSMasq.start(records: Self.probeRecords)
        defer { dns.stop() }
        let directory = try TemporaryDirectory()
        let cacheFile = directory.path("cache.json")
        let probe = try await HostsCTLProcess.run([
            "probe", "--server", dns.address.description, "--family", "ipv4", "--port", "\(listener.port)", "--samples",
            "3",
            "--cache-file", cacheFile, "--json", "probe.test",
        ])
        #expect(probe.status == 0, "\(probe.standardError)")
        let hosts = try #require(
            try JSONSerialization.jsonObject(with: Data(probe.standardOutput.utf8)) as? [[String: Any]])
        let host = try #require(hosts.first)
        #expect(host["host"] as? String == "probe.test")
        #expect(host["port"] as? Int == Int(listener.port))
        #expect(host["source"] as? String == "cares")
        #expect(host["error"] is NSNull)
        let addresses = try #require(host["addresses"] as? [[String: Any]])
        #expect(addresses.map { $0["ip"] as? String } == ["127.0.0.20", "127.0.0.21"])
        let good = addresses[0]
        let bad = addresses[1]
        #expect(Set(good.keys) == ["ip", "samples", "ok", "medianMs", "minMs", "maxMs", "errors", "score", "rank"])
        #expect(good["samples"] as? Int == 3 && good["ok"] as? Int == 3)
        #expect(good["rank"] as? Int == 1 && bad["rank"] as? Int == 2)
        let minimum = try #require(good["minMs"] as? Double)
        let median = try #require(good["medianMs"] as? Double)
        let maximum = try #require(good["maxMs"] as? Double)
        #expect(minimum <= median && median <= maximum)
        #expect(bad["ok"] as? Int == 0 && bad["medianMs"] is NSNull)
        #expect((bad["errors"] as? [String: Int]) == ["connectionFailed": 3])
        #expect(try #require(good["score"] as? Double) < (try #require(bad["score"] as? Double)))

        // The samples were saved: cache show ranks the same way and counts the connects.
        let show = try await HostsCTLProcess.run(["cache", "show", "--json", "--cache-file", cacheFile])
        #expect(show.status == 0, "\(show.standardError)")
        let entries = try #require(
            try JSONSerialization.jsonObject(with: Data(show.standardOutput.utf8)) as? [[String: Any]])
        let entry = try #require(entries.first { $0["host"] as? String == "probe.test" })
        #expect(entry["family"] as? String == "ipv4")
        #expect(entry["origin"] as? String == "cares")
        #expect(entry["stale"] as? Bool == false)
        let cached = try #require(entry["addresses"] as? [[String: Any]])
        #expect(cached.map { $0["ip"] as? String } == ["127.0.0.20", "127.0.0.21"])
        #expect(cached.map { $0["successes"] as? Int } == [3, 0])
        #expect(cached.map { $0["failures"] as? Int } == [0, 3])
        let text = try await HostsCTLProcess.run(["cache", "show", "--cache-file", cacheFile])
        #expect(text.standardOutput.contains("probe.test (ipv4, from cares"))

        let exported = try await HostsCTLProcess.run(["cache", "export", "--cache-file", cacheFile])
        let lines = exported.standardOutput.split(separator: "\n").filter { !$0.hasPrefix("#") }
        #expect(lines == ["127.0.0.20\tprobe.test", "127.0.0.21\tprobe.test"])
        // The export is a valid overrides file.
        let exportFile = directory.path("exported.hosts")
        #expect(
            try await HostsCTLProcess.run(["cache", "export", "--cache-file", cacheFile, "-o", exportFile]).status == 0)
        let overrides = try HostsFile(contentsOf: exportFile)
        #expect(overrides.diagnostics.isEmpty)
        #expect(HostOverrides(file: overrides).resolve(try HostName("probe.test"), family: .any)?.addresses.count == 2)
        let exportedJSON = try await HostsCTLProcess.run(["cache", "export", "--json", "--cache-file", cacheFile])
        #expect(
            try JSONSerialization.jsonObject(with: Data(exportedJSON.standardOutput.utf8)) as? [[String: Any]] != nil)

        let clearOne = try await HostsCTLProcess.run([
            "cache", "clear", "--json", "--cache-file", cacheFile, "probe.test", "other.test",
        ])
        let cleared = try #require(
            try JSONSerialization.jsonObject(with: Data(clearOne.standardOutput.utf8)) as? [String: Any])
        #expect(cleared["removed"] as? Int == 1)
        #expect(cleared["path"] as? String == cacheFile)
        let after = try await HostsCTLProcess.run(["cache", "show", "--cache-file", cacheFile])
        #expect(after.standardOutput.contains("empty"))
        let clearAll = try await HostsCTLProcess.run(["cache", "clear", "--cache-file", cacheFile])
        #expect(clearAll.status == 0)
        #expect(!FileManager.default.fileExists(atPath: cacheFile))
    }

    @Test("probe with no reachable address exits with 1; an unknown host reports its DNS error")
    func unreachable() async throws {
        let dns = try await DNSMasq.start(records: Self.probeRecords)
        defer { dns.stop() }
        let port = try FreePort.tcp()
        let output = try await HostsCTLProcess.run([
            "probe", "--server", dns.address.description, "--family", "ipv4", "--port", "\(port)", "--samples", "1",
            "--no-cache",
            "probe.test", "nope.test",
        ])
        #expect(output.status == 1)
        #expect(output.standardOutput.contains("probe.test port \(port)"))
        #expect(output.standardOutput.contains("connectionFailed 1"))
        #expect(output.standardOutput.contains("nope.test port \(port)"))
        #expect(output.standardOutput.contains("error notFound"))
    }

    @Test("a damaged cache file: show fails with a message and no stack trace, clear removes it")
    func damagedCache() async throws {
        let directory = try TemporaryDirectory()
        let cacheFile = try directory.write("cache.json", "{ not json")
        let show = try await HostsCTLProcess.run(["cache", "show", "--cache-file", cacheFile])
        #expect(show.status == 1)
        #expect(show.standardError.contains("cannot be used"))
        #expect(!show.standardError.contains("Fatal error") && !show.standardError.contains("Stack"))
        let clear = try await HostsCTLProcess.run(["cache", "clear", "--cache-file", cacheFile])
        #expect(clear.status == 0, "\(clear.standardError)")
        #expect(!FileManager.default.fileExists(atPath: cacheFile))
        let missing = try await HostsCTLProcess.run(["cache", "show", "--json", "--cache-file", cacheFile])
        #expect(missing.status == 0 && missing.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) == "[]")
    }

    @Test("--version, completions and help for every command")
    func versionAndCompletions() async throws {
        let version = try await HostsCTLProcess.run(["--version"])
        #expect(
            version.status == 0
                && version.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) == HostsCTLVersion.current)
        for shell in ["bash", "zsh", "fish"] {
            let script = try await HostsCTLProcess.run(["--generate-completion-script", shell])
            #expect(script.status == 0)
            for command in ["bench", "probe", "cache", "resolve", "fetch", "config"] {
                #expect(script.standardOutput.contains(command), "\(shell) \(command)")
            }
        }
        for command in [["bench"], ["probe"], ["cache", "show"], ["cache", "export"], ["cache", "clear"]] {
            let help = try await HostsCTLProcess.run(command + ["--help"])
            #expect(help.status == 0 && help.standardOutput.contains("USAGE"), "\(command)")
        }
    }
}
