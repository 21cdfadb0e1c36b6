import ArgumentParser
import Foundation
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore
@testable import HostsCTLCommands

@Suite("hostsctl resolve")
struct ResolveCommandTests {
    @Test("arguments parse into servers, family, timeout and tries")
    func parsing() throws {
        let command = try #require(
            try HostsCTLCommand.parseAsRoot([
                "resolve", "--server", "127.0.0.1:5353", "--server", "[::1]:53", "--family", "IPv6", "--timeout", "0.5",
                "--tries", "3", "--json", "a.test", "b.test",
            ]) as? ResolveCommand
        )
        #expect(command.resolution.servers.map(\.description) == ["127.0.0.1:5353", "[::1]:53"])
        #expect(command.resolution.family == .ipv6)
        #expect(command.resolution.timeout == 0.5)
        #expect(command.resolution.tries == 3)
        #expect(command.json)
        #expect(command.names == ["a.test", "b.test"])
    }

    @Test(
        "bad arguments exit with 64",
        arguments: [
            ["resolve"], ["resolve", "--server", "dns.example", "a.test"], ["resolve", "--family", "ipv5", "a.test"],
            ["resolve", "--timeout", "0", "a.test"], ["resolve", "--timeout", "nan", "a.test"],
            ["resolve", "--tries", "0", "a.test"], ["resolve", "--bogus", "a.test"],
        ]
    )
    func badArguments(arguments: [String]) {
        expectUsageError(arguments)
    }

    @Test("JSON output has the documented shape, addresses, TTLs and error codes")
    func json() async throws {
        try await DNSMasq.with { server in
            let resolver = try CAresResolver(configuration: .init(servers: [server.address], timeout: .seconds(1)))
            let reports = await ResolveCommand.resolveAll(
                ["multi.test", "nope.test", "v4only.test", "192.0.2.9", "bad..name"],
                family: .ipv4,
                with: resolver
            )
            let text = ResolveReport.json(reports)
            let parsed = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]])
            #expect(parsed.count == 5)
            #expect(
                parsed.map { $0["host"] as? String } == [
                    "multi.test", "nope.test", "v4only.test", "192.0.2.9", "bad..name",
                ])
            for object in parsed {
                #expect(Set(object.keys) == ["host", "addresses", "freshness", "elapsedMs", "error"])
                #expect(object["elapsedMs"] is Double || object["elapsedMs"] is Int)
            }

            let multi = try #require(parsed[0]["addresses"] as? [[String: Any]])
            #expect(Set(multi.compactMap { $0["ip"] as? String }) == Set(TestZone.multiV4))
            #expect(
                multi.allSatisfy {
                    $0["ttl"] as? Int == 300 && $0["family"] as? String == "ipv4" && $0["source"] as? String == "cares"
                })
            #expect(parsed[0]["error"] is NSNull)

            func errorCode(_ index: Int) -> String? { (parsed[index]["error"] as? [String: Any])?["code"] as? String }
            #expect(errorCode(1) == "notFound")
            #expect((parsed[1]["addresses"] as? [Any])?.isEmpty == true)
            #expect(errorCode(2) == nil, "v4only.test has an A record")
            #expect(errorCode(4) == "badName")
            let literal = try #require((parsed[3]["addresses"] as? [[String: Any]])?.first)
            #expect(literal["source"] as? String == "literal")
        }
    }

    @Test("NODATA and timeouts are reported with their codes")
    func failureCodes() async throws {
        let silent = try BoundUDPSocket()
        defer { silent.close() }
        try await DNSMasq.with { server in
            let resolver = try CAresResolver(configuration: .init(servers: [server.address]))
            let noData = await ResolveCommand.resolveAll(["v4only.test"], family: .ipv6, with: resolver)
            #expect(noData.first?.error?.code == .noData)
        }
        let stalled = try CAresResolver(
            configuration: .init(servers: [silent.address], timeout: .milliseconds(100), tries: 1))
        let timeout = await ResolveCommand.resolveAll(["a.test"], family: .ipv4, with: stalled)
        #expect(timeout.first?.error?.code == .timeout)
        #expect(ResolveReport.json(timeout).contains("\"code\": \"timeout\""))
    }

    @Test("run exits 0 when every host resolved and 1 when any failed")
    func exitStatus() async throws {
        try await DNSMasq.with { server in
            let ok = try #require(
                try HostsCTLCommand.parseAsRoot([
                    "resolve", "--no-cache", "--server", server.address.description, "--json", "multi.test",
                ])
                    as? ResolveCommand
            )
            try await ok.run()
            let failing = try #require(
                try HostsCTLCommand.parseAsRoot([
                    "resolve", "--no-cache", "--server", server.address.description, "multi.test", "nope.test",
                ])
                    as? ResolveCommand
            )
            await #expect(throws: ExitCode(1)) { try await failing.run() }
        }
    }

    @Test("pipeline options parse, and contradictions exit with 64")
    func pipelineOptions() throws {
        let command = try #require(
            try HostsCTLCommand.parseAsRoot([
                "resolve", "--source", "cache", "--cache-file", "/tmp/c.json", "--probe", "a.test",
            ])
                as? ResolveCommand
        )
        #expect(command.source == .cache)
        #expect(command.cache.cacheFile == "/tmp/c.json")
        #expect(command.probe)
        #expect(!command.cache.noCache)
        for arguments in [
            ["resolve", "--source", "bogus", "a.test"], ["resolve", "--no-cache", "--cache-file", "/tmp/c", "a.test"],
            ["resolve", "--source", "cache", "--no-cache", "a.test"],
            ["resolve", "--source", "overrides", "--server", "127.0.0.1", "a.test"],
            ["resolve", "--source", "cares", "--doh", "https://doh.test/dns-query", "a.test"],
        ] {
            #expect(throws: (any Error).self, "\(arguments)") { _ = try HostsCTLCommand.parseAsRoot(arguments) }
            do {
                _ = try HostsCTLCommand.parseAsRoot(arguments)
            } catch {
                #expect(HostsCTLCommand.exitCode(for: error) == ExitCode(64), "\(arguments)")
            }
        }
    }

    @Test("the persisted cache answers, marked stale, when the DNS server is down", .timeLimit(.minutes(1)))
    func persistedCache() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "hostsctl-cache-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let cacheFile = directory.appendingPathComponent("cache.json").path
        // TTLs of one second, so the answer is stale by the third run.
        let environment = ["HOSTSCTL_CACHE_MIN_TTL_SECONDS": "0", "HOSTSCTL_CACHE_MAX_TTL_SECONDS": "1"]
        let server = try await DNSMasq.start()
        let address = server.address.description
        func resolve(_ extra: [String]) async throws -> (Int32, [[String: Any]]) {
            let output = try await HostsCTLProcess.run(
                ["resolve", "--json", "--family", "ipv4"] + extra, environment: environment)
            let parsed = try JSONSerialization.jsonObject(with: Data(output.standardOutput.utf8)) as? [[String: Any]]
            return (output.status, parsed ?? [])
        }
        func first(_ objects: [[String: Any]]) -> [String: Any] {
            (objects.first?["addresses"] as? [[String: Any]])?.first ?? [:]
        }

        let (status, upstream) = try await resolve(["--server", address, "--cache-file", cacheFile, "multi.test"])
        #expect(status == 0)
        #expect(first(upstream)["source"] as? String == "cares")
        #expect(first(upstream)["rank"] as? Int == 1)
        #expect(FileManager.default.fileExists(atPath: cacheFile))

        let noCacheFile = directory.appendingPathComponent("unused.json").path
        _ = try await resolve(["--server", address, "--no-cache", "multi.test"])
        _ = try await resolve(["--server", address, "--source", "cares", "--cache-file", noCacheFile, "multi.test"])
        #expect(
            !FileManager.default.fileExists(atPath: noCacheFile), "--no-cache and --source cares leave the cache alone")

        server.stop()
        try await Task.sleep(for: .milliseconds(1200))
        let (staleStatus, stale) = try await resolve([
            "--server", address, "--timeout", "0.2", "--tries", "1", "--cache-file", cacheFile, "multi.test",
        ])
        #expect(staleStatus == 0)
        #expect(stale.first?["freshness"] as? String == "stale")
        #expect(first(stale)["stale"] as? Bool == true)
        #expect(first(stale)["origin"] as? String == "cares")
        #expect(
            Set((stale.first?["addresses"] as? [[String: Any]] ?? []).compactMap { $0["ip"] as? String })
                == Set(TestZone.multiV4))

        let (cacheStatus, cacheOnly) = try await resolve([
            "--source", "cache", "--cache-file", cacheFile, "multi.test", "nope.test",
        ])
        #expect(cacheStatus == 1)
        #expect(cacheOnly.first?["freshness"] as? String == "stale")
        #expect((cacheOnly.last?["error"] as? [String: Any])?["code"] as? String == "notCached")

        let (downStatus, down) = try await resolve([
            "--server", address, "--timeout", "0.2", "--tries", "1", "--source", "cares", "multi.test",
        ])
        #expect(downStatus == 1, "c-ares alone has no answer")
        #expect(down.first?["error"] is [String: Any])
    }

    @Test("the text report shows a table, the source and the time")
    func text() async throws {
        try await DNSMasq.with { server in
            let resolver = try CAresResolver(configuration: .init(servers: [server.address]))
            let reports = await ResolveCommand.resolveAll(["v4only.test", "nope.test"], family: .any, with: resolver)
            let text = ResolveReport.text(reports)
            #expect(text.contains("ADDRESS"))
            #expect(text.contains("RANK"))
            #expect(text.contains("SCORE"))
            #expect(text.contains("192.0.2.10"))
            #expect(text.contains("120"))
            #expect(text.contains("cares"))
            #expect(text.contains("error notFound"))
            #expect(text.contains(" ms"))
        }
    }
}

extension ResolveCommandTests {
    @Test(
        "a named upstream answers: answers cached from another upstream are not served, and the report says where a cached answer came from"
    )
    func namedUpstreamBypassesOtherUpstreamsCache() async throws {
        try await DNSMasq.with(records: [
            "host-record=same.test,127.0.0.70,300", "host-record=only-a.test,127.0.0.72,300",
        ]) { a in
            try await DNSMasq.with(records: ["host-record=same.test,127.0.0.71,300"]) { b in
                let files = try TemporaryFiles()
                let cache = files.directory.appendingPathComponent("cache.json").path
                func resolve(_ server: DNSMasq, _ names: [String], json: Bool = true) async throws
                    -> HostsCTLProcess.Output
                {
                    try await HostsCTLProcess.run(
                        ["resolve", "--server", server.address.description, "--cache-file", cache]
                            + (json ? ["--json"] : []) + names)
                }
                func first(_ output: HostsCTLProcess.Output) throws -> [String: Any] {
                    let reports = try #require(
                        try JSONSerialization.jsonObject(with: Data(output.standardOutput.utf8)) as? [[String: Any]])
                    return try #require((reports.first?["addresses"] as? [[String: Any]])?.first)
                }
                let fromA = try first(try await resolve(a, ["same.test"]))
                #expect(fromA["ip"] as? String == "127.0.0.70")
                #expect(fromA["upstream"] as? String == "cares(\(a.address))")
                let fromB = try first(try await resolve(b, ["same.test"]))
                #expect(fromB["ip"] as? String == "127.0.0.71", "A's cached answer is not served to --server B")
                let cached = try first(try await resolve(b, ["same.test"]))
                #expect(cached["ip"] as? String == "127.0.0.71")
                #expect(cached["source"] as? String == "cache", "B's own cached answer is served")
                #expect(cached["upstream"] as? String == "cares(\(b.address))")
                let text = try await resolve(b, ["same.test"], json: false)
                #expect(
                    text.standardOutput.contains("cache (cares from cares(\(b.address)))"), "\(text.standardOutput)")
                // A name only A knows: B's NXDOMAIN is not replaced by A's cached answer, and A's is not B's.
                _ = try await resolve(a, ["only-a.test"])
                let missing = try await resolve(b, ["only-a.test"])
                #expect(missing.status == 1, "B does not know it: \(missing.standardOutput)")
            }
        }
    }
}

@Suite("JSON writer")
struct JSONValueTests {
    @Test("keys keep their order and strings are escaped")
    func serialization() {
        let value: JSONValue = .object([
            ("b", 1), ("a", .array([.string("x\"y\\z\n\u{1}"), .null, .bool(true), .number(1.5)])), ("e", .object([])),
        ])
        #expect(value.serialized(pretty: false) == #"{"b":1,"a":["x\"y\\z\n\u0001",null,true,1.5],"e":{}}"#)
    }
}
