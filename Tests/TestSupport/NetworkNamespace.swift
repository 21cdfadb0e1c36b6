import Foundation

/// A network namespace a test makes and changes (`ip netns`), with a veth pair inside it (a0, b0) to hold addresses
/// and routes; removed at the end. Needs root.
public final class NetworkNamespace: Sendable {
    /// Whether this machine lets the tests make namespaces (root and `ip`).
    public static var available: Bool {
        getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip")
    }

    /// The namespace's name.
    public let name: String
    /// Its path, which `setns` takes.
    public var path: String { "/var/run/netns/\(name)" }

    private init(name: String) {
        self.name = name
    }

    /// Makes a namespace, runs `body` with it, and removes it.
    public static func with(_ body: (NetworkNamespace) async throws -> Void) async throws {
        let namespace = NetworkNamespace(name: "httpdns-net-\(String(UInt32.random(in: 0...UInt32.max), radix: 16))")
        try await namespace.ip(["netns", "add", namespace.name])
        do {
            try await namespace.inside(["link", "add", "a0", "type", "veth", "peer", "name", "b0"])
            for link in ["lo", "a0", "b0"] { try await namespace.inside(["link", "set", link, "up"]) }
            try await body(namespace)
        } catch {
            try? await namespace.ip(["netns", "del", namespace.name])
            throw error
        }
        try await namespace.ip(["netns", "del", namespace.name])
    }

    /// Runs `ip ARGUMENTS` inside the namespace (`ip -n NAME …`); throws when it fails.
    public func inside(_ arguments: [String]) async throws {
        try await ip(["-n", name] + arguments)
    }

    /// Runs several `ip` commands inside the namespace at once (`ip -batch`), as one burst of kernel changes.
    public func batch(_ commands: [String]) async throws {
        let file = try TemporaryFiles.file(commands.joined(separator: "\n") + "\n", name: "batch")
        try await ip(["-n", name, "-batch", file])
    }

    private func ip(_ arguments: [String]) async throws {
        let output = try await HostsCTLProcess.run(executable: "/usr/sbin/ip", arguments)
        guard output.status == 0 else {
            throw TestServerError("ip \(arguments.joined(separator: " ")) failed: \(output.standardError)")
        }
    }
}
