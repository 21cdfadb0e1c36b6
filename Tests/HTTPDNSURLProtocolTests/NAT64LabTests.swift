import Foundation
import TestSupport
import Testing

/// An IPv6-only host behind NAT64, for real (`scripts/nat64-lab.sh`: network namespaces, tayga, unbound's dns64
/// module, dnsdist as an HTTP DNS provider answering A only, an IPv4-only web server). The programs run inside the
/// namespace as an adopter runs them: `hostsctl`, and `httpdns-adopter` through the URL protocol and through the
/// AsyncHTTPClient front. Needs root, network namespaces and TUN, which CI has: there a missing piece fails the
/// suite rather than skipping it.
@Suite(
    "IPv6-only lab: NAT64",
    .enabled(if: NAT64Lab.available || ProcessInfo.processInfo.environment["CI"] != nil))
struct NAT64LabTests {
    static var adopter: String { HostsCTLProcess.executable(named: "httpdns-adopter") }

    /// One JSON object per line of `output`.
    static func lines(_ output: HostsCTLProcess.Output) -> [[String: Any]] {
        output.standardOutput.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    /// Both fronts fetch the lab's URL `count` times each inside the namespace; every answer must be the server's.
    static func expectBothFrontsReach(_ lab: NAT64Lab, settings: String, count: Int = 5) async throws {
        let urls = Array(repeating: NAT64Lab.url, count: count)
        for front in [[], ["--async-http-client"]] {
            let run = try await lab.run(Self.adopter, front + ["--config", settings] + urls)
            #expect(run.status == 0, "\(front): \(run.standardOutput) \(run.standardError)")
            let answers = Self.lines(run).filter { $0["url"] != nil }
            #expect(answers.count == count)
            #expect(answers.allSatisfy { $0["status"] as? Int == 200 && $0["body"] as? String == NAT64Lab.body })
        }
    }

    @Test(
        "HTTP DNS answers A only: synthesized under the discovered prefix, both fronts reach the server, one discovery")
    func httpDNSThroughNAT64() async throws {
        try await NAT64Lab.with { lab in
            let settings = try lab.settings(sources: ["overrides", "cache", "httpdns"])
            let resolve = try await lab.run(
                HostsCTLProcess.executable, ["resolve", "--no-cache", "--config", settings, "--json", "web.lab.test"])
            #expect(resolve.status == 0, "\(resolve.standardError)")
            let report = try #require(
                (try JSONSerialization.jsonObject(with: Data(resolve.standardOutput.utf8)) as? [[String: Any]])?.first)
            let addresses = try #require(report["addresses"] as? [[String: Any]])
            #expect(addresses.map { $0["ip"] as? String } == [NAT64Lab.synthesized])
            #expect(addresses.first?["synthesizedFrom"] as? String == "203.0.113.7")

            // 100 requests in one process: every one answered, and one discovery for all of them.
            let before = lab.resolverQueries(for: "ipv4only.arpa")
            let fetch = try await lab.run(
                HostsCTLProcess.executable,
                [
                    "fetch", "--no-cache", "--config", settings, "--json", "--repeat", "100", "--concurrency", "8",
                    NAT64Lab.url,
                ])
            #expect(fetch.status == 0, "\(fetch.standardError)")
            let reports = Self.lines(fetch).filter { $0["hops"] != nil }
            #expect(reports.count == 100)
            #expect(reports.allSatisfy { $0["status"] as? Int == 200 })
            let hop = try #require((reports.first?["hops"] as? [[String: Any]])?.first)
            #expect(hop["ip"] as? String == NAT64Lab.synthesized && hop["synthesizedFrom"] as? String == "203.0.113.7")
            #expect(lab.resolverQueries(for: "ipv4only.arpa") - before == 1, "one NAT64 discovery, cached afterwards")

            try await Self.expectBothFrontsReach(lab, settings: settings)
        }
    }

    @Test("names answered by c-ares through the network's DNS64: IPv6 first, both fronts reach the server")
    func caresThroughDNS64() async throws {
        try await NAT64Lab.with { lab in
            let settings = try lab.settings(sources: ["overrides", "cache", "cares"])
            let fetch = try await lab.run(
                HostsCTLProcess.executable,
                ["fetch", "--no-cache", "--config", settings, "--json", "--repeat", "20", NAT64Lab.url])
            #expect(fetch.status == 0, "\(fetch.standardError)")
            let reports = Self.lines(fetch).filter { $0["hops"] != nil }
            #expect(reports.count == 20 && reports.allSatisfy { $0["status"] as? Int == 200 })
            #expect((reports.first?["hops"] as? [[String: Any]])?.first?["ip"] as? String == NAT64Lab.synthesized)
            try await Self.expectBothFrontsReach(lab, settings: settings)
        }
    }

    @Test("without the library, curl reaches the server too (the system resolver's DNS64)")
    func curlWithoutTheLibrary() async throws {
        try await NAT64Lab.with { lab in
            let curl = try await lab.run("/usr/bin/curl", ["-s", "-m", "10", NAT64Lab.url])
            #expect(curl.status == 0 && curl.standardOutput == NAT64Lab.body, "\(curl.standardError)")
        }
    }

    @Test("synthesis off: both fronts fail with an error that names the missing IPv4 route")
    func synthesisOff() async throws {
        try await NAT64Lab.with { lab in
            let settings = try lab.settings(sources: ["overrides", "cache", "httpdns"])
            let off = ["HOSTSCTL_NAT64_MODE": "off"]
            let fetch = try await lab.run(
                HostsCTLProcess.executable, ["fetch", "--no-cache", "--config", settings, NAT64Lab.url],
                environment: off)
            #expect(fetch.status != 0)
            #expect(fetch.standardOutput.contains("no IPv4 route"), "\(fetch.standardOutput) \(fetch.standardError)")
            for front in [[], ["--async-http-client"]] {
                let run = try await lab.run(
                    Self.adopter, front + ["--config", settings, NAT64Lab.url], environment: off)
                #expect(run.status == 1)
                let error = Self.lines(run).first?["error"] as? String ?? ""
                #expect(error.contains("no IPv4 route") && error.contains("nat64.mode"), "\(front): \(error)")
            }
        }
    }
}
