public import ArgumentParser
import Foundation
public import HTTPDNS

/// `hostsctl resolve HOST...`: resolves host names and prints their addresses with TTL and source.
public struct ResolveCommand: AsyncParsableCommand {
    /// The subcommand's name and help.
    public static let configuration = CommandConfiguration(
        commandName: "resolve",
        abstract: "Resolve host names to IP addresses.",
        discussion: """
            Exit status: 0 when every host resolved, 1 when any failed, 64 for bad arguments.
            IP literals are printed as they are; localhost answers 127.0.0.1 and ::1 without a query.
            """
    )

    /// The names to resolve.
    @Argument(help: "Host names (or IP literals) to resolve.")
    public var names: [String] = []

    /// The DNS servers; the system's when none is given.
    @Option(
        name: .customLong("server"),
        help: ArgumentHelp("DNS server as IP[:PORT] or [IPv6]:PORT; repeatable. Default: /etc/resolv.conf.", valueName: "IP[:PORT]"),
        transform: { try ServerAddress(parsing: $0) }
    )
    public var servers: [ServerAddress] = []

    /// Which address family to ask for.
    @Option(help: "Address family: ipv4, ipv6 or any.", transform: ResolveCommand.parseFamily)
    public var family: AddressFamily = .any

    /// Seconds to wait for each try.
    @Option(
        help: """
            Seconds to wait for an answer on the first try (c-ares doubles it on each later round);             with HTTP DNS, the time one HTTP exchange may take.
            """
    )
    public var timeout: Double = 2

    /// How many tries per query.
    @Option(help: "How many times each query is sent before it times out.")
    public var tries: Int = 2

    /// An overrides file in hosts format; its names are answered from it with source `override`.
    @Option(help: ArgumentHelp("Overrides file in hosts format (IP name [name...]; *.suffix wildcards).", valueName: "FILE"))
    public var hosts: String?

    /// An HTTP DNS service to resolve through instead of c-ares.
    @OptionGroup(title: "HTTP DNS")
    public var httpDNS: HTTPDNSOptions

    /// Print JSON instead of tables.
    @Flag(help: "Print a JSON array with one object per host.")
    public var json = false

    /// Creates the command (used by the argument parser).
    public init() {}

    /// Checks argument ranges before anything runs.
    public func validate() throws {
        guard !names.isEmpty else { throw ValidationError("Give at least one host name.") }
        guard timeout.isFinite, timeout >= 0.001, timeout <= 3600 else {
            throw ValidationError("--timeout must be between 0.001 and 3600 seconds.")
        }
        guard (1...16).contains(tries) else { throw ValidationError("--tries must be between 1 and 16.") }
        if httpDNS.isSelected, !servers.isEmpty {
            throw ValidationError("--server is for c-ares; it cannot be combined with HTTP DNS options.")
        }
    }

    /// Resolves every host concurrently and prints the results in the order given.
    public func run() async throws {
        let overrides = try hosts.map(Self.loadOverrides)
        let reports: [ResolveReport]
        if httpDNS.isSelected {
            let (resolver, transport) = try httpDNS.makeResolver(timeout: .milliseconds(Int64((timeout * 1000).rounded(.up))))
            reports = await Self.resolveAll(names, family: family, with: OverridingResolver(overrides: overrides, upstream: resolver))
            await transport.shutdown()
        } else {
            reports = try await resolveWithCAres(overrides: overrides)
        }
        if json {
            print(ResolveReport.json(reports))
        } else {
            print(ResolveReport.text(reports), terminator: "")
        }
        if reports.contains(where: { $0.error != nil }) {
            throw ExitCode(1)
        }
    }

    private func resolveWithCAres(overrides: HostOverrides?) async throws -> [ResolveReport] {
        let options = CAresResolver.Options(
            servers: servers,
            timeout: .milliseconds(Int64((timeout * 1000).rounded(.up))),
            tries: tries
        )
        let resolver: CAresResolver
        do {
            resolver = try CAresResolver(options: options)
        } catch {
            throw ValidationError(error.description)
        }
        defer { resolver.shutdown() }
        return await Self.resolveAll(names, family: family, with: OverridingResolver(overrides: overrides, upstream: resolver))
    }

    /// Resolves `hosts` concurrently, timing each, and returns the reports in input order.
    static func resolveAll(
        _ hosts: [String],
        family: AddressFamily,
        with resolver: some HostNameResolver
    ) async -> [ResolveReport] {
        await withTaskGroup(of: (Int, ResolveReport).self) { group in
            for (index, host) in hosts.enumerated() {
                group.addTask {
                    let clock = ContinuousClock()
                    let start = clock.now
                    let outcome: Result<Resolution, DNSError>
                    do {
                        outcome = .success(try await resolver.resolve(host, family: family))
                    } catch let error as DNSError {
                        outcome = .failure(error)
                    } catch {
                        outcome = .failure(DNSError(code: .cancelled, message: "\(error)", host: host))
                    }
                    return (index, ResolveReport(host: host, outcome: outcome, elapsed: clock.now - start))
                }
            }
            var reports = [ResolveReport?](repeating: nil, count: hosts.count)
            for await (index, report) in group { reports[index] = report }
            return reports.compactMap { $0 }
        }
    }

    /// Loads an overrides file; bad lines are reported on standard error and skipped, an unreadable file is a
    /// usage error.
    static func loadOverrides(_ path: String) throws -> HostOverrides {
        let file: HostsFile
        do {
            file = try HostsFile(contentsOf: path)
        } catch {
            throw ValidationError(error.message)
        }
        for diagnostic in file.diagnostics {
            printToStandardError("\(diagnostic) (line skipped)")
        }
        return HostOverrides(file: file.table)
    }

    static func parseFamily(_ text: String) throws -> AddressFamily {
        guard let family = AddressFamily(rawValue: text.lowercased()) else {
            throw ValidationError("'\(text)' is not a family; use ipv4, ipv6 or any.")
        }
        return family
    }
}
