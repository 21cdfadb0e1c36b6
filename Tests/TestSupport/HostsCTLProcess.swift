import Foundation
import HTTPDNSCore

/// Runs the built `hostsctl` executable (or another of the package's executables) as a child process, as a user
/// would.
public enum HostsCTLProcess {
    /// The result of one run.
    public struct Output: Sendable {
        /// The exit status.
        public var status: Int32
        /// Standard output.
        public var standardOutput: String
        /// Standard error.
        public var standardError: String
    }

    /// The `hostsctl` binary next to the test bundle in the build directory.
    public static var executable: String { executable(named: "hostsctl") }

    /// The executable `name` next to the test bundle in the build directory (`name` itself if none is found).
    public static func executable(named name: String) -> String {
        let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var directory = bundle.deletingLastPathComponent()
        while directory.path != "/" {
            let candidate = directory.appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate.path }
            directory = directory.deletingLastPathComponent()
        }
        return name
    }

    /// Runs `hostsctl` with `arguments` and extra environment variables, and waits for it. Unless the caller sets
    /// `XDG_CACHE_HOME`, the default cache file lives in a directory removed after the run, so tests never touch
    /// the user's cache.
    public static func run(_ arguments: [String], environment: [String: String] = [:]) async throws -> Output {
        try await run(executable: executable, arguments, environment: environment)
    }

    /// Runs the executable at `path` the same way as ``run(_:environment:)``.
    public static func run(executable path: String, _ arguments: [String], environment: [String: String] = [:])
        async throws -> Output
    {
        try await offThePool { try runBlocking(path, arguments, environment: environment) }
    }

    /// How long a run may take before it is killed (seconds).
    public static let timeLimit: Double = 300

    private static func runBlocking(_ executable: String, _ arguments: [String], environment: [String: String]) throws
        -> Output
    {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "hostsctl-run-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let out = directory.appendingPathComponent("out").path
        let err = directory.appendingPathComponent("err").path
        var environment = environment
        if environment["XDG_CACHE_HOME"] == nil {
            environment["XDG_CACHE_HOME"] = directory.appendingPathComponent("cache").path
        }
        // The system-resolver fallback would ask the machine's own resolver (not a test server) for names the test
        // servers do not know; tests that exercise it turn it back on inside a mount namespace of their own.
        if environment["HOSTSCTL_SOURCES_SYSTEM_FALLBACK"] == nil {
            environment["HOSTSCTL_SOURCES_SYSTEM_FALLBACK"] = "false"
        }
        let process = try ChildProcess(
            path: executable, arguments: arguments, logPath: out, errorPath: err, environment: environment)
        // A child that hangs fails its test instead of holding the whole run: killed after the time limit.
        let finished = Locked(false)
        DispatchQueue.global().asyncAfter(deadline: .now() + timeLimit) {
            // Only a signal: the waiting thread reaps the child.
            finished.withLock { done in if !done { _ = kill(process.pid, SIGKILL) } }
        }
        let status = process.wait()
        let timedOut = finished.withLock { done -> Bool in
            done = true
            return status == 128 + SIGKILL
        }
        return Output(
            status: status,
            standardOutput: (try? String(contentsOfFile: out, encoding: .utf8)) ?? "",
            standardError: ((try? String(contentsOfFile: err, encoding: .utf8)) ?? "")
                + (timedOut ? "\n[killed: still running after \(Int(timeLimit)) s]" : "")
        )
    }
}
