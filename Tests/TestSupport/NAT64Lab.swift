import Foundation

/// The IPv6-only lab of `scripts/nat64-lab.sh`: a client network namespace with IPv6 only, whose resolver is
/// unbound with DNS64, an HTTP DNS provider (dnsdist) answering A only, and a NAT64 gateway (tayga) in front of an
/// IPv4-only web server. Programs run inside the client namespace with ``run(_:_:environment:)``.
public final class NAT64Lab: Sendable {
    /// The web server's URL (`web.lab.test` is 203.0.113.7, IPv4 only).
    public static let url = "http://web.lab.test:8080/hello.txt"
    /// What the web server answers.
    public static let body = "hello over NAT64\n"
    /// The NAT64 prefix the lab's DNS64 and gateway use (network-specific; discovery must find it).
    public static let prefix = "2001:db8:46::/96"
    /// The address of `web.lab.test` under the prefix.
    public static let synthesized = "2001:db8:46::cb00:7107"

    /// Whether this machine can build the lab: root, TUN, and the lab's programs.
    public static var available: Bool {
        getuid() == 0 && FileManager.default.fileExists(atPath: "/dev/net/tun")
            && ["/usr/sbin/tayga", "/usr/sbin/unbound", "/usr/sbin/dnsmasq", "/usr/bin/dnsdist", "/usr/bin/python3"]
                .allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// The lab's id (names its namespaces and files).
    public let id: String
    /// The client namespace.
    public let namespace: String

    private init(id: String, namespace: String) {
        self.id = id
        self.namespace = namespace
    }

    /// Builds a lab, runs `body` with it and removes it, whatever happens.
    public static func with(_ body: (NAT64Lab) async throws -> Void) async throws {
        let id = String(UInt32.random(in: 0...UInt32.max), radix: 16)
        let up = try await HostsCTLProcess.run(executable: "scripts/nat64-lab.sh", ["up", id])
        guard up.status == 0 else {
            _ = try? await HostsCTLProcess.run(executable: "scripts/nat64-lab.sh", ["down", id])
            throw TestServerError("the NAT64 lab did not come up: \(up.standardError)")
        }
        let lab = NAT64Lab(id: id, namespace: up.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines))
        do {
            try await body(lab)
        } catch {
            _ = try? await HostsCTLProcess.run(executable: "scripts/nat64-lab.sh", ["down", id])
            throw error
        }
        _ = try await HostsCTLProcess.run(executable: "scripts/nat64-lab.sh", ["down", id])
    }

    /// Runs `executable` with `arguments` inside the client namespace (its resolv.conf in place) and waits.
    public func run(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) async throws
        -> HostsCTLProcess.Output
    {
        try await HostsCTLProcess.run(
            executable: "/usr/sbin/ip", ["netns", "exec", namespace, executable] + arguments, environment: environment)
    }

    /// How many queries for `name` the client's DNS64 resolver has logged.
    public func resolverQueries(for name: String) -> Int {
        let log = (try? String(contentsOfFile: "/tmp/nat64-lab-\(id)/unbound.log", encoding: .utf8)) ?? ""
        return log.split(separator: "\n").filter { $0.contains(" \(name). ") }.count
    }

    /// Writes a settings file for the client: the layers `sources`, and the lab's DoH provider.
    public func settings(sources: [String]) throws -> String {
        let order = sources.map { "\"\($0)\"" }.joined(separator: ", ")
        return try TemporaryFiles.file(
            """
            {"sources": {"order": [\(order)], "systemFallback": false},
             "httpdns": {"providers": ["lab"],
                         "provider": {"lab": {"api": "doh", "urls": ["http://127.0.0.1:8053/dns-query"]}}},
             "probe": {"enabled": false}}
            """, name: "hostsctl.json")
    }
}
