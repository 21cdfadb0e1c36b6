import Foundation
import TestSupport
import Testing

@testable import HTTPDNSCore
@testable import HostsCTLCommands

/// A long-running `hostsctl serve` inside a network namespace, whose resolver reads `/etc/resolv.conf` (the
/// namespace's own, which `ip netns exec` puts in place): when the network changes, resolv.conf is read again and
/// the new network's DNS server answers, without a restart.
@Suite(
    "Network changes, hostsctl",
    .enabled(if: NetworkNamespace.available || ProcessInfo.processInfo.environment["CI"] != nil))
struct NetworkChangeCommandTests {
    @Test("after a default-route change, resolv.conf is read again: the new network's DNS server answers")
    func resolvConfReadAgain() async throws {
        try await NetworkNamespace.with { namespace in
            try await namespace.inside(["addr", "add", "192.0.2.10/24", "dev", "a0"])
            // Two DNS servers of the namespace, on port 53 of two loopback addresses (resolv.conf takes no port).
            var servers: [ChildProcess] = []
            defer { for server in servers { server.stop() } }
            for (address, name, answer) in [
                ("127.0.0.1", "old.test", "198.51.100.1"), ("127.0.0.2", "new.test", "198.51.100.2"),
            ] {
                servers.append(
                    try ChildProcess(
                        path: "/usr/sbin/ip",
                        arguments: [
                            "netns", "exec", namespace.name, "dnsmasq", "--keep-in-foreground", "--no-resolv",
                            "--no-hosts", "--bind-interfaces", "--listen-address=\(address)", "--port=53",
                            "--user=root", "--pid-file=", "--host-record=\(name),\(answer),60",
                        ], logPath: TemporaryFiles.path("dnsmasq.log")))
            }
            let resolvConf = "/etc/netns/\(namespace.name)/resolv.conf"
            try FileManager.default.createDirectory(
                atPath: "/etc/netns/\(namespace.name)", withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: "/etc/netns/\(namespace.name)") }
            try "nameserver 127.0.0.1\n".write(toFile: resolvConf, atomically: false, encoding: .utf8)
            let settings = try TemporaryFiles.file(
                """
                {"sources": {"order": ["cache", "cares"], "systemFallback": false},
                 "cares": {"search": [], "timeoutMs": 500, "tries": 1},
                 "serve": {"listen": "127.0.0.1:8053"}}
                """, name: "hostsctl.json")
            let log = TemporaryFiles.path("serve.log")
            let serve = try ChildProcess(
                path: "/usr/sbin/ip",
                arguments: [
                    "netns", "exec", namespace.name, HostsCTLProcess.executable, "serve", "--config", settings,
                ],
                logPath: log)
            defer { serve.stop() }
            func ask(_ name: String) async throws -> String {
                let output = try await HostsCTLProcess.run(
                    executable: "/usr/sbin/ip",
                    [
                        "netns", "exec", namespace.name, HostsCTLProcess.executable, "resolve", "--doh",
                        "http://127.0.0.1:8053/dns-query", "--family", "ipv4", "--json", name,
                    ])
                let reports =
                    try? JSONSerialization.jsonObject(with: Data(output.standardOutput.utf8)) as? [[String: Any]]
                let addresses = reports?.first?["addresses"] as? [[String: Any]]
                return addresses?.first?["ip"] as? String ?? "error: \(output.standardOutput) \(output.standardError)"
            }
            let old = try await waitUntil { (try? await ask("old.test")) == "198.51.100.1" }
            let first = try await ask("old.test")
            #expect(old, "\(first)")

            // Another network: a new default route, and its DNS server in resolv.conf (written in place).
            try "nameserver 127.0.0.2\n".write(toFile: resolvConf, atomically: false, encoding: .utf8)
            try await namespace.inside(["route", "add", "default", "via", "192.0.2.1"])
            let new = try await waitUntil { (try? await ask("new.test")) == "198.51.100.2" }
            let last = try await ask("new.test")
            #expect(new, "\(last) \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        }
    }
}
