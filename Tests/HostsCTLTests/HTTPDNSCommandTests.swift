import ArgumentParser
import Foundation
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore
@testable import HostsCTLCommands

/// `hostsctl resolve` with HTTP DNS options, run as a real process against dnsdist and local vendor servers.
@Suite("hostsctl resolve over HTTP DNS")
struct HTTPDNSCommandTests {
    /// `[host: ["ip ttl", …]]` from `--json` output, or the error code.
    static func answers(_ output: String) throws -> [String: [String]] {
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [[String: Any]])
        var result: [String: [String]] = [:]
        for object in parsed {
            let host = try #require(object["host"] as? String)
            if let error = object["error"] as? [String: Any] {
                result[host] = ["error \(error["code"] ?? "?")"]
            } else {
                let addresses = try #require(object["addresses"] as? [[String: Any]])
                result[host] = addresses.map { "\($0["ip"] ?? "?") \($0["ttl"] ?? "?")" }.sorted()
            }
        }
        return result
    }

    static func sources(_ output: String) throws -> Set<String> {
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [[String: Any]])
        return Set(
            parsed.flatMap { ($0["addresses"] as? [[String: Any]] ?? []).compactMap { $0["source"] as? String } })
    }

    static let names = ["multi.test", "alias.test", "v4only.test", "v6only.test", "nope.test"]

    @Test("--doh against dnsdist answers exactly what c-ares answers against the dnsmasq behind it")
    func dohMatchesCAres() async throws {
        try await DNSMasq.with { dnsmasq in
            let dnsdist = try await DNSDist.start(backend: dnsmasq.address)
            defer { dnsdist.stop() }
            let cares = try await HostsCTLProcess.run(
                ["resolve", "--server", dnsmasq.address.description, "--timeout", "10", "--json"] + Self.names)
            #expect(cares.status == 1, "nope.test fails")
            for extra in [[], ["--doh-method", "post"]] {
                let doh = try await HostsCTLProcess.run(
                    ["resolve", "--doh", dnsdist.httpURL, "--timeout", "10", "--json"] + extra + Self.names)
                #expect(doh.status == 1, "\(doh.standardError)")
                #expect(try Self.answers(doh.standardOutput) == Self.answers(cares.standardOutput))
                #expect(try Self.sources(doh.standardOutput) == ["doh"])
            }
            #expect(try Self.answers(cares.standardOutput)["nope.test"] == ["error notFound"])
        }
    }

    @Test("--doh over TLS works with --trust-ca and fails with a certificate error without it")
    func dohTLS() async throws {
        try await DNSMasq.with { dnsmasq in
            let certificates = try TestCertificates()
            defer { certificates.remove() }
            let dnsdist = try await DNSDist.start(
                backend: dnsmasq.address, certificate: try certificates.leaf(for: "doh.test"))
            defer { dnsdist.stop() }
            let url = try #require(dnsdist.httpsURL)
            let trusted = try await HostsCTLProcess.run(
                [
                    "resolve", "--doh", url, "--bootstrap", "127.0.0.1", "--trust-ca", certificates.caPath, "--timeout",
                    "20", "--json", "multi.test",
                ])
            #expect(trusted.status == 0, "\(trusted.standardError)")
            #expect(try Self.answers(trusted.standardOutput)["multi.test"]?.count == 4)
            let untrusted = try await HostsCTLProcess.run(
                ["resolve", "--doh", url, "--bootstrap", "127.0.0.1", "--timeout", "20", "--json", "multi.test"])
            #expect(untrusted.status == 1)
            #expect(
                try Self.answers(untrusted.standardOutput)["multi.test"] == ["error certificateRejected"],
                "\(untrusted.standardOutput)")
        }
    }

    @Test("--httpdns alibaba signs with the secret from the environment; tencent parses text answers")
    func vendors() async throws {
        let alibaba = try await LocalHTTPServer(handler: FakeHTTPDNS.alibaba(account: "139450", secret: "env-secret"))
        let tencent = try await LocalHTTPServer(handler: FakeHTTPDNS.tencent())
        try await withCleanup { () async throws in
            let arguments = [
                "resolve", "--httpdns", "alibaba", "--endpoint", alibaba.url, "--account", "139450", "--timeout", "10",
                "--json", "multi.test",
            ]
            let signed = try await HostsCTLProcess.run(
                arguments, environment: [HTTPDNSOptions.secretVariable: "env-secret"])
            #expect(signed.status == 0, "\(signed.standardError)")
            #expect(try Self.answers(signed.standardOutput)["multi.test"]?.count == 4)
            #expect(try Self.sources(signed.standardOutput) == ["alibaba"])
            #expect(!signed.standardOutput.contains("env-secret") && !signed.standardError.contains("env-secret"))
            let wrong = try await HostsCTLProcess.run(arguments, environment: [HTTPDNSOptions.secretVariable: "wrong"])
            #expect(try Self.answers(wrong.standardOutput)["multi.test"] == ["error invalidSignature"])

            let text = try await HostsCTLProcess.run([
                "resolve", "--httpdns", "tencent", "--endpoint", tencent.url, "--family", "ipv6", "--timeout", "10",
                "--json", "multi.test", "private.test",
            ])
            #expect(try Self.answers(text.standardOutput)["multi.test"] == TestZone.multiV6.map { "\($0) 300" })
            #expect(try Self.answers(text.standardOutput)["private.test"] == ["error noData"])
            let guarded = try await HostsCTLProcess.run([
                "resolve", "--httpdns", "tencent", "--endpoint", tencent.url, "--timeout", "10", "--json",
                "private.test",
            ])
            #expect(try Self.answers(guarded.standardOutput)["private.test"] == ["error privateAddress"])
            let allowed = try await HostsCTLProcess.run(
                [
                    "resolve", "--httpdns", "tencent", "--endpoint", tencent.url, "--allow-private-answers",
                    "--timeout", "10", "--json", "private.test",
                ])
            #expect(try Self.answers(allowed.standardOutput)["private.test"] == ["10.0.0.7 30"])
        } cleanup: {
            await alibaba.stop(); await tencent.stop()
        }
    }

    @Test(
        "conflicting or incomplete HTTP DNS options exit with 64",
        arguments: [
            [
                "resolve", "--doh", "https://a.example/dns-query", "--httpdns", "tencent", "--endpoint",
                "http://b.example", "x.test",
            ],
            ["resolve", "--httpdns", "alibaba", "--endpoint", "http://b.example", "x.test"],
            ["resolve", "--httpdns", "tencent", "x.test"],
            ["resolve", "--doh-json", "x.test"],
            ["resolve", "--bootstrap", "127.0.0.1", "x.test"],
            ["resolve", "--doh", "https://a.example/dns-query", "--server", "127.0.0.1", "x.test"],
            ["resolve", "--doh", "https://a.example/dns-query", "--bootstrap", "not-an-ip", "x.test"],
            ["resolve", "--doh", "https://a.example/dns-query", "--doh-method", "put", "x.test"],
            ["resolve", "--secret", "x", "x.test"],
        ])
    func badOptions(arguments: [String]) {
        do {
            _ = try HostsCTLCommand.parseAsRoot(arguments)
            Issue.record("expected a usage error for \(arguments)")
        } catch {
            #expect(HostsCTLCommand.exitCode(for: error) == ExitCode(64))
        }
    }

    @Test("presets come from --presets, $HOSTSCTL_PRESETS or the installed file, never from the current directory")
    func presetsNotFromCurrentDirectory() async throws {
        let files = try TemporaryFiles()
        try FileManager.default.createDirectory(
            at: files.directory.appendingPathComponent("Config"), withIntermediateDirectories: true)
        let planted = #"[{"name": "planted", "api": "doh", "url": "http://127.0.0.1:9/dns-query"}]"#
        _ = try files.write("Config/providers.json", planted)
        let script =
            "cd \(files.directory.path) && exec \(HostsCTLProcess.executable) resolve --no-cache --provider planted x.test"
        let output = try await HostsCTLProcess.run(executable: "/bin/sh", ["-c", script])
        #expect(output.status == 64, "\(output.standardError)")
        #expect(output.standardError.contains("No preset 'planted'"), "\(output.standardError)")
        let installed = try #require(HTTPDNSOptions.installedPresets(executable: HostsCTLProcess.executable))
        #expect(
            installed.hasSuffix("/Config/providers.json") && installed.hasPrefix("/"),
            "the source tree's, found from the binary")
        #expect(output.standardError.contains(installed))
    }

    @Test("a bad URL, a missing trust root or an unknown preset is a usage error at run time")
    func runTimeUsageErrors() async throws {
        for arguments in [
            ["resolve", "--doh", "ftp://a.example/", "x.test"],
            ["resolve", "--doh", "https://a.example/", "--trust-ca", "/nonexistent.pem", "x.test"],
            ["resolve", "--provider", "no-such-preset", "--presets", "Config/providers.json", "x.test"],
        ] {
            let output = try await HostsCTLProcess.run(arguments)
            #expect(output.status == 64, "\(arguments): \(output.standardError)")
        }
    }

    @Test("the shipped presets file parses and every preset has bootstrap addresses or an IP URL")
    func presets() throws {
        let presets = try HTTPDNSPreset.load(contentsOf: "Config/providers.json")
        #expect(presets.count >= 6)
        for preset in presets {
            #expect(preset.endpoint.hostIsIPAddress || !preset.endpoint.bootstrapAddresses.isEmpty, "\(preset.name)")
            #expect(preset.endpoint.scheme == .https || preset.notes?.contains("HTTP") == true, "\(preset.name)")
        }
    }
}

/// `--config`, `config show` and `config check` on settings files, run as a real process.
@Suite("hostsctl settings")
struct SettingsCommandTests {
    static func write(_ text: String, name: String, next to: String? = nil) throws -> String {
        guard let to else { return try TemporaryFiles.file(text, name: name) }
        let path = URL(fileURLWithPath: to).deletingLastPathComponent().appendingPathComponent(name).path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test(
        "resolve --config takes servers, overrides file and sources from the settings; the environment overrides them")
    func resolveWithConfig() async throws {
        try await DNSMasq.with { dnsmasq in
            let hosts = try Self.write("198.51.100.7 pinned.test\n", name: "hosts")
            let settings = try Self.write(
                """
                { "sources": { "order": ["overrides", "cares"] }, "overrides": { "file": "hosts" },
                  "cares": { "servers": ["\(dnsmasq.address)"], "timeoutMs": 5000 } }
                """, name: "hostsctl.json", next: hosts)
            let output = try await HostsCTLProcess.run([
                "resolve", "--config", settings, "--family", "ipv4", "--json", "pinned.test", "v4only.test",
            ])
            #expect(output.status == 0, "\(output.standardError)")
            #expect(
                try HTTPDNSCommandTests.answers(output.standardOutput) == [
                    "pinned.test": ["198.51.100.7 60"], "v4only.test": ["192.0.2.10 120"],
                ])
            #expect(try HTTPDNSCommandTests.sources(output.standardOutput) == ["override", "cares"])

            // Without the overrides layer (set through the environment) the pinned name goes to dnsmasq: NXDOMAIN.
            let env = try await HostsCTLProcess.run(
                ["resolve", "--config", settings, "--family", "ipv4", "--json", "pinned.test"],
                environment: ["HOSTSCTL_SOURCES_ORDER": "cares"])
            #expect(try HTTPDNSCommandTests.answers(env.standardOutput)["pinned.test"] == ["error notFound"])

            // HOSTSCTL_CONFIG names the file when --config is absent.
            let viaVariable = try await HostsCTLProcess.run(
                ["resolve", "--json", "pinned.test"], environment: ["HOSTSCTL_CONFIG": settings])
            #expect(try HTTPDNSCommandTests.answers(viaVariable.standardOutput)["pinned.test"] == ["198.51.100.7 60"])
        }
    }

    @Test("resolve --config through an HTTP DNS provider from the settings, with its secret from the environment")
    func resolveWithProvider() async throws {
        let server = try await LocalHTTPServer(handler: FakeHTTPDNS.alibaba(account: "77", secret: "from-env"))
        try await withCleanup { () async throws in
            // The exchange's limit and the lookup's budget (5 s by default) grow with the test time scale: under
            // ThreadSanitizer, with the suite running beside it, a sanitized hostsctl can take seconds to answer.
            let limit = Int(10_000 * TestTiming.scale)
            let settings = try Self.write(
                """
                { "sources": { "order": ["httpdns"] },
                  "httpdns": { "providers": ["vendor"], "timeoutMs": \(limit), "budgetMs": \(limit),
                    "provider": { "vendor": { "api": "alibaba", "urls": ["\(server.url)"], "account": "77", "secretEnv": "VENDOR_SECRET" } } } }
                """, name: "hostsctl.json")
            let output = try await HostsCTLProcess.run(
                ["resolve", "--config", settings, "--json", "multi.test"], environment: ["VENDOR_SECRET": "from-env"])
            #expect(output.status == 0, "\(output.standardError)\n\(output.standardOutput)")
            #expect(try HTTPDNSCommandTests.sources(output.standardOutput) == ["vendor"])

            let show = try await HostsCTLProcess.run(
                ["config", "show", "--config", settings], environment: ["VENDOR_SECRET": "from-env"])
            #expect(show.status == 0)
            #expect(show.standardOutput.contains("httpdns.provider.vendor.secret"))
            #expect(show.standardOutput.contains("(set)"))
            #expect(!show.standardOutput.contains("from-env"), "the secret is masked")
            let json = try await HostsCTLProcess.run(
                ["config", "show", "--config", settings, "--json"], environment: ["HOSTSCTL_CARES_TRIES": "4"])
            let parsed = try #require(
                try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [String: [String: String]])
            #expect(parsed["cares.tries"] == ["value": "4", "from": "env HOSTSCTL_CARES_TRIES"])
            #expect(parsed["httpdns.providers"]?["from"] == "file")
            #expect(parsed["probe.ports"]?["from"] == "default")
            #expect(parsed["interception.proxy"] == ["value": "bypass", "from": "default"])
            #expect(parsed["serve.listen"]?["from"] == "default")
        } cleanup: {
            await server.stop()
        }
    }

    @Test("config keys lists every documented key, and the settings guide's table is the same")
    func keys() async throws {
        let output = try await HostsCTLProcess.run(["config", "keys", "--markdown"])
        #expect(output.status == 0)
        // The resolver's keys and those of the sections the fronts and the server own.
        #expect(SettingsLoading.keys.contains { $0.path == "interception.proxy" })
        #expect(SettingsLoading.keys.contains { $0.path == "serve.listen" })
        for key in SettingsLoading.keys { #expect(output.standardOutput.contains("| `\(key.path)` |")) }
        let guide = try String(contentsOfFile: "docs/settings.md", encoding: .utf8)
        #expect(
            guide.contains(output.standardOutput),
            "regenerate the table in docs/settings.md with hostsctl config keys --markdown")
    }

    @Test("config check finds settings mistakes with positions; resolve refuses broken settings with exit 64")
    func check() async throws {
        let bad = try Self.write("{\n  \"cares\": { \"tries\": \"two\" },\n  \"bogus\": 1\n}\n", name: "bad.json")
        let output = try await HostsCTLProcess.run(["config", "check", bad, "Config/hostsctl.json", "Config/hosts"])
        #expect(output.status == 1)
        #expect(output.standardOutput.contains("\(bad):2:23: error: 'cares.tries' must be an integer, not a string"))
        #expect(output.standardOutput.contains("\(bad):3:3: error: unknown key 'bogus'"))
        #expect(output.standardOutput.contains("Config/hostsctl.json:") && output.standardOutput.contains(", 0 errors"))
        let defaults = try await HostsCTLProcess.run(["config", "check"])
        #expect(defaults.status == 0, "\(defaults.standardOutput)")
        let resolve = try await HostsCTLProcess.run(["resolve", "--config", bad, "localhost"])
        #expect(resolve.status == 64)
        #expect(resolve.standardError.contains("\(bad):2:23"))
    }
}
