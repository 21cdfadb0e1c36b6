import Foundation
public import HTTPDNS

#if canImport(Glibc)
    import Glibc
#endif

/// A real dnsmasq serving a test zone on 127.0.0.1 at a free high port, with its own config file.
///
/// Nothing is forwarded: `no-resolv` and `local=/test/` make dnsmasq answer `.test` names itself (NXDOMAIN for
/// unknown ones) and REFUSE everything else, so no query ever leaves the machine.
public final class DNSMasq: Sendable {
    /// The server's address, e.g. `127.0.0.1:40123`.
    public let address: ServerAddress
    private let process: ChildProcess
    private let directory: URL
    /// Where dnsmasq logs every query it receives, when started with `logsQueries`.
    private let queryLog: URL?

    /// Starts dnsmasq with `records` (dnsmasq config lines such as `host-record=…`, `cname=…`); with `logsQueries`
    /// it logs every query it receives, which ``queriesSeen()`` reads.
    ///
    /// Waits until the server answers. Tries a few ports in case another process grabs one first.
    /// - Throws: ``TestServerError`` when dnsmasq is missing or does not come up.
    public init(records: [String] = TestZone.records, logsQueries: Bool = false) throws {
        guard let binary = ["/usr/sbin/dnsmasq", "/usr/bin/dnsmasq"].first(where: FileManager.default.isExecutableFile)
        else {
            throw TestServerError("dnsmasq is not installed; run scripts/test.sh, which installs dnsmasq-base")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "httpdns-dnsmasq-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let queryLog = logsQueries ? directory.appendingPathComponent("queries.log") : nil
        do {
            (process, address) = try ServerLaunch.dnsServer("dnsmasq") { port in
                let config = directory.appendingPathComponent("dnsmasq.conf")
                let lines =
                    [
                        "port=\(port)", "listen-address=127.0.0.1", "bind-interfaces", "no-resolv", "no-hosts",
                        "no-poll", "local=/test/", "cache-size=0", "pid-file=",
                    ] + (queryLog == nil ? [] : ["log-queries"]) + records
                try (lines.joined(separator: "\n") + "\n").write(to: config, atomically: true, encoding: .utf8)
                return try ChildProcess(
                    path: binary,
                    arguments: [
                        "--keep-in-foreground", "--conf-file=\(config.path)", "--log-facility=\(queryLog?.path ?? "-")",
                    ]
                )
            }
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
        self.directory = directory
        self.queryLog = queryLog
    }

    /// The queries dnsmasq has received so far, as it logs them (`query[A] fast.test from 127.0.0.1`), when started
    /// with `logsQueries`; empty otherwise.
    public func queriesSeen() -> [String] {
        guard let queryLog, let text = try? String(contentsOf: queryLog, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            line.range(of: "query[").map { String(line[$0.lowerBound...]) }
        }
    }

    /// Freezes the server (SIGSTOP): it keeps its port, so nothing else can take it, and answers nothing, as a dead
    /// upstream on the network does (queries time out).
    public func freeze() {
        if process.isRunning { kill(process.pid, SIGSTOP) }
    }

    /// Stops the server and removes its files.
    public func stop() {
        if process.isRunning { kill(process.pid, SIGCONT) }
        process.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    deinit { stop() }

    /// Starts dnsmasq (see ``init(records:)``) without holding a thread of the cooperative pool while it comes up.
    public static func start(records: [String] = TestZone.records, logsQueries: Bool = false) async throws -> DNSMasq {
        try await offThePool { try DNSMasq(records: records, logsQueries: logsQueries) }
    }

    /// Runs `body` with a fresh dnsmasq and stops it afterwards.
    public static func with<T>(
        records: [String] = TestZone.records,
        _ body: (DNSMasq) async throws -> T
    ) async throws -> T {
        let server = try await start(records: records)
        defer { server.stop() }
        return try await body(server)
    }
}

/// The zone the tests query: several A and AAAA records with known TTLs, a CNAME chain, NODATA cases.
public enum TestZone {
    /// `multi.test`: two A and two AAAA records, TTL 300.
    public static let multiV4 = ["192.0.2.1", "192.0.2.2"]
    /// The AAAA records of `multi.test`.
    public static let multiV6 = ["2001:db8::1", "2001:db8::2"]
    /// How many `nN.test` names the bulk tests use; `nN.test` has the single address `198.51.100.N` / `10.1.X.Y`.
    public static let bulkNames = 200

    /// The address of the bulk name `n<index>.test`.
    public static func bulkAddress(_ index: Int) -> String { "10.1.\(index / 256).\(index % 256)" }

    /// The dnsmasq lines for the zone.
    public static let records: [String] =
        [
            "host-record=multi.test,192.0.2.1,2001:db8::1,300",
            "host-record=multi.test,192.0.2.2,2001:db8::2,300",
            "host-record=v4only.test,192.0.2.10,120",
            "host-record=v6only.test,2001:db8::10,45",
            "host-record=UPPER.test,192.0.2.20,30",
            "cname=alias.test,alias2.test,60",
            "cname=alias2.test,multi.test,90",
            "cname=dangling.test,nowhere.test,30",
        ] + (0..<bulkNames).map { "host-record=n\($0).test,\(bulkAddress($0)),600" }
}

/// A failure of the test infrastructure itself.
public struct TestServerError: Error, CustomStringConvertible {
    /// What went wrong.
    public var description: String

    /// Creates the error.
    public init(_ description: String) { self.description = description }
}
