import ArgumentParser
import Foundation
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore
@testable import HostsCTLCommands

@Suite("hostsctl overrides and config check")
struct OverridesCommandTests {
    @Test("resolve --hosts answers exact and wildcard names from the file and the rest from DNS")
    func overridesFirst() async throws {
        let path = try TemporaryFiles.file(
            "192.0.2.50 multi.test\n198.51.100.1 *.wild.test\n2001:db8::77 v6.wild.test\n"
        )
        defer { try? FileManager.default.removeItem(atPath: path) }
        try await DNSMasq.with { server in
            let cares = try CAresResolver(configuration: .init(servers: [server.address]))
            defer { cares.shutdown() }
            let overriding = HostResolver(
                upstreams: [.init(name: "cares", kind: .cares, resolver: cares)],
                overrides: HostOverrides(file: try HostsFile(contentsOf: path)),
                cache: nil
            )
            try await withCleanup { () async throws in
                let reports = await ResolveCommand.resolveAll(
                    ["multi.test", "a.wild.test", "v6.wild.test", "v4only.test", "wild.test"],
                    family: .any,
                    with: overriding
                )
                #expect(reports[0].addresses.map(\.ip.description) == ["192.0.2.50"])
                #expect(reports[0].resolution?.origin == .override)
                #expect(reports[1].addresses.map(\.ip.description) == ["198.51.100.1"])
                #expect(reports[2].addresses.map(\.ip.description) == ["2001:db8::77"], "exact beats the wildcard")
                #expect(reports[3].resolution?.origin == .cares, "not overridden: asked dnsmasq")
                #expect(reports[4].error?.code == .notFound, "a wildcard does not match its own suffix")
                let json = ResolveReport.json(reports)
                #expect(json.contains("\"source\": \"override\""))
            } cleanup: {
                await overriding.shutdown()
            }
        }
    }

    @Test("an unreadable overrides file is a usage error")
    func unreadable() throws {
        #expect(throws: ValidationError.self) { try ResolutionOptions.reportOverrideProblems("/nonexistent/hosts") }
    }

    @Test("config check pinpoints errors and exits 1; a good file exits 0")
    func check() async throws {
        let bad = try TemporaryFiles.file("192.0.2.1 ok.test\n\n999.0.0.1 x.test\n192.0.2.2 fine.test *bad\n")
        let good = try TemporaryFiles.file("192.0.2.1 ok.test\n")
        defer {
            try? FileManager.default.removeItem(atPath: bad)
            try? FileManager.default.removeItem(atPath: good)
        }
        let result = ConfigCheckCommand.check(bad)
        #expect(result.hasErrors)
        #expect(result.entries == 2)
        #expect(
            result.diagnostics.map(\.description) == [
                "\(bad):3:1: error: '999.0.0.1' is not an IPv4 or IPv6 address",
                "\(bad):4:21: error: invalid wildcard '*bad': only a leading '*.' is allowed, as in *.example.com",
            ])
        #expect(result.text.hasSuffix("\(bad): 2 entries, 2 errors\n"))
        let failing = try #require(
            try HostsCTLCommand.parseAsRoot(["config", "check", good, bad]) as? ConfigCheckCommand)
        await #expect(throws: ExitCode(1)) { try await failing.run() }
        let passing = try #require(
            try HostsCTLCommand.parseAsRoot(["config", "check", "--json", good]) as? ConfigCheckCommand)
        try await passing.run()
        #expect(ConfigCheckCommand.check("/nonexistent").hasErrors)
    }

    @Test("the example overrides file in Config/ is valid")
    func exampleFile() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let result = ConfigCheckCommand.check(root.appendingPathComponent("Config/hosts").path)
        #expect(!result.hasErrors, "\(result.text)")
        #expect(result.entries > 0)
    }
}
