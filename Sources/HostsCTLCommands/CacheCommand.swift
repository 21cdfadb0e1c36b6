import ArgumentParser
import Foundation
import HTTPDNS
import HTTPDNSSettings
import HTTPDNSServer

/// `hostsctl cache show|clear|export`: the persisted IP cache.
struct CacheCommand: AsyncParsableCommand {
    /// The subcommand's name and its own subcommands.
    static let configuration = CommandConfiguration(
        commandName: "cache",
        abstract: "Show, clear or export the persisted IP cache.",
        subcommands: [Show.self, Clear.self, Export.self]
    )

    /// Creates the command (used by the argument parser).
    init() {}

    /// Which cache file the subcommands use.
    struct Location: ParsableArguments {
        /// The file.
        @Option(
            name: .customLong("cache-file"),
            help: ArgumentHelp(
                "The persisted IP cache. Default: cache.path, else $XDG_CACHE_HOME/hostsctl/cache.json.",
                valueName: "PATH")
        )
        var cacheFile: String?

        /// The settings file, for cache.path and the cache's limits.
        @Option(help: SettingsLoading.configHelp)
        var config: String?

        /// Creates the options (used by the argument parser).
        init() {}

        /// The path and the settings.
        func resolve() throws -> (path: String, settings: HostResolver.Configuration) {
            let settings = try SettingsLoading.settings(config).resolver
            guard let path = cacheFile ?? settings.cachePath ?? HostCache.defaultPath() else {
                throw ValidationError(
                    "no cache file: give --cache-file, set cache.path, or set HOME or XDG_CACHE_HOME.")
            }
            return (path, settings)
        }

        /// The cache as persisted at the path; a missing file is an empty cache, a damaged one an error.
        func load() throws -> (path: String, cache: HostCache) {
            let (path, settings) = try resolve()
            let cache = HostCache(configuration: settings.cache)
            if let problem = cache.load(from: path).problem {
                printToStandardError(
                    "error: the cache file \(path) cannot be used: \(problem) (hostsctl cache clear removes it)")
                throw ExitCode(1)
            }
            return (path, cache)
        }
    }

    /// `hostsctl cache show`: every cached host with its ranked addresses.
    struct Show: AsyncParsableCommand {
        /// The subcommand's name and help.
        static let configuration = CommandConfiguration(
            abstract: "List the cached hosts: ranked addresses with scores, TTL left, where the answer came from."
        )

        /// Which file.
        @OptionGroup var location: Location

        /// Print JSON.
        @Flag(help: "Print a JSON array with one object per cached answer.")
        var json = false

        /// Show the scores client networks reported instead.
        @Option(
            name: .customLong("network"),
            help: ArgumentHelp(
                "Show what client networks reported to hostsctl serve (serve.clientReports), kept beside the cache "
                    + "file: all, or one network such as 198.51.100.0/24.",
                valueName: "NETWORK"))
        var network: String?

        /// Creates the command (used by the argument parser).
        init() {}

        /// Checks the network.
        func validate() throws {
            if let network, network != "all", IPNetwork(network) == nil {
                throw ValidationError(
                    "'\(HostName.printable(network))' is not all or a network such as 198.51.100.0/24")
            }
        }

        /// Prints the cache.
        func run() async throws {
            if let network {
                try showNetworks(network == "all" ? nil : IPNetwork(network))
                return
            }
            let (path, cache) = try location.load()
            let entries = cache.entries().sorted { ($0.host, $0.family.rawValue) < ($1.host, $1.family.rawValue) }
            if json {
                print(JSONValue.array(entries.map(CacheReport.json)).serialized())
            } else if entries.isEmpty {
                print("\(path): empty")
            } else {
                print("\(path): \(entries.count) answer\(entries.count == 1 ? "" : "s")\n")
                print(entries.map(CacheReport.text).joined(separator: "\n"), terminator: "")
            }
        }
    }

    /// `hostsctl cache clear [HOST...]`.
    struct Clear: AsyncParsableCommand {
        /// The subcommand's name and help.
        static let configuration = CommandConfiguration(
            abstract: "Remove the cache file, or only the named hosts from it."
        )

        /// Hosts to forget; all when empty.
        @Argument(help: "Hosts to remove from the cache; without any, the whole file is removed.")
        var hosts: [String] = []

        /// Which file.
        @OptionGroup var location: Location

        /// Print JSON.
        @Flag(help: "Print {\"path\", \"removed\"} as JSON.")
        var json = false

        /// Creates the command (used by the argument parser).
        init() {}

        /// Checks the names.
        func validate() throws {
            for host in hosts {
                do { _ = try HostName(host) } catch {
                    throw ValidationError("'\(host)' is not a valid host name: \(error.message)")
                }
            }
        }

        /// Removes the file or the hosts.
        func run() async throws {
            let removed: Int
            let path: String
            if hosts.isEmpty {
                let (resolvedPath, settings) = try location.resolve()
                path = resolvedPath
                // A damaged file is removed too: that is how one recovers from it.
                let report = HostCache(configuration: settings.cache).load(
                    from: path)
                removed = report.loaded + report.dropped
                do {
                    if FileManager.default.fileExists(atPath: path) { try FileManager.default.removeItem(atPath: path) }
                } catch {
                    throw ValidationError("cannot remove \(path): \(error.localizedDescription)")
                }
            } else {
                let (loadedPath, cache) = try location.load()
                path = loadedPath
                let before = cache.count
                for host in hosts { cache.remove(try HostName(host)) }
                removed = before - cache.count
                do {
                    try cache.save(to: path)
                } catch {
                    throw ValidationError(error.message)
                }
            }
            if json {
                print(JSONValue.object([("path", .string(path)), ("removed", .number(Double(removed)))]).serialized())
            } else {
                print("removed \(removed) answer\(removed == 1 ? "" : "s") from \(path)")
            }
        }
    }

    /// `hostsctl cache export`: the best addresses as a hosts file, or everything as JSON.
    struct Export: AsyncParsableCommand {
        /// The subcommand's name and help.
        static let configuration = CommandConfiguration(
            abstract: "Write the cached answers as a hosts file (best address first) or, with --json, as JSON.",
            discussion: """
                The hosts format lists every cached address, best ranked first, so the file can serve as an \
                overrides file (hostsctl --hosts FILE) on a machine without network access.
                """
        )

        /// Which file.
        @OptionGroup var location: Location

        /// Write JSON.
        @Flag(help: "Write the JSON of `cache show --json` instead of a hosts file.")
        var json = false

        /// Where to write.
        @Option(name: .shortAndLong, help: ArgumentHelp("Write to FILE instead of standard output.", valueName: "FILE"))
        var output: String?

        /// Creates the command (used by the argument parser).
        init() {}

        /// Writes the export.
        func run() async throws {
            let (path, cache) = try location.load()
            let entries = cache.entries().sorted { ($0.host, $0.family.rawValue) < ($1.host, $1.family.rawValue) }
            let text =
                json
                ? JSONValue.array(entries.map(CacheReport.json)).serialized() + "\n"
                : CacheReport.hostsFile(entries, from: path)
            guard let output else {
                print(text, terminator: "")
                return
            }
            do {
                try Data(text.utf8).write(to: URL(fileURLWithPath: output), options: .atomic)
            } catch {
                throw ValidationError("cannot write \(output): \(error.localizedDescription)")
            }
        }
    }
}

/// How cache entries print.
enum CacheReport {
    static func json(_ entry: HostCache.Entry) -> JSONValue {
        .object([
            ("host", .string(entry.host)),
            ("family", .string(entry.family.rawValue)),
            ("origin", .string(entry.origin.name)),
            ("ttl", .number(Double(entry.ttl))),
            ("remainingSeconds", .number((entry.remainingSeconds * 10).rounded() / 10)),
            ("stale", .bool(isStale(entry))),
            (
                "addresses",
                .array(
                    entry.addresses.map { address in
                        .object([
                            ("ip", .string(address.ip.description)),
                            ("rank", .number(Double(address.rank))),
                            ("score", .number((address.score * 1000).rounded() / 1000)),
                            (
                                "latencyMs",
                                address.latencyMilliseconds.map { .number(($0 * 1000).rounded() / 1000) } ?? .null
                            ),
                            ("successes", .number(Double(address.successes))),
                            ("failures", .number(Double(address.failures))),
                        ])
                    })
            ),
            ("error", entry.error.map { .string($0.description) } ?? .null),
        ])
    }

    /// Whether the cache serves `entry` as stale: expired (an answer expiring now included), and not an override.
    static func isStale(_ entry: HostCache.Entry) -> Bool {
        entry.origin != .override && entry.remainingSeconds <= 0
    }

    static func text(_ entry: HostCache.Entry) -> String {
        let state =
            isStale(entry)
            ? "stale for \(Int((-entry.remainingSeconds).rounded())) s"
            : "expires in \(Int(entry.remainingSeconds.rounded())) s"
        var out =
            entry.origin == .override
            ? "\(entry.host) (addresses from the overrides, ranked by their scores; never asked upstream)\n"
            : "\(entry.host) (\(entry.family), from \(entry.origin), ttl \(entry.ttl) s, \(state))\n"
        if let error = entry.error {
            return out + "  negative answer: \(error)\n"
        }
        out += TextTable.render(
            header: ["RANK", "ADDRESS", "SCORE", "CONNECTS"],
            rows: entry.addresses.map {
                [
                    "\($0.rank)", $0.ip.description, ResolveReport.scoreLabel($0),
                    "\($0.successes) ok, \($0.failures) failed",
                ]
            },
            indent: 2
        )
        return out
    }

    /// hosts(5) lines, one per address, best ranked first within each host.
    static func hostsFile(_ entries: [HostCache.Entry], from path: String) -> String {
        var out = "# exported by hostsctl \(HostsCTLVersion.current) from \(path)\n"
        for entry in entries where entry.error == nil {
            for address in entry.addresses { out += "\(address.ip)\t\(entry.host)\n" }
        }
        return out
    }
}

extension CacheCommand.Show {
    /// `hostsctl cache show --network`: per host and client network, the addresses in the order that network's
    /// reports give them.
    func showNetworks(_ filter: IPNetwork?) throws {
        let path = NetworkScores.path(forCache: try location.resolve().path)
        guard let data = FileManager.default.contents(atPath: path) else {
            print("\(path): no network scores (hostsctl serve writes them when clients report)")
            return
        }
        guard let snapshot = try? JSONDecoder().decode(NetworkScores.Snapshot.self, from: data) else {
            printToStandardError("error: \(path) cannot be read (remove it; hostsctl serve writes it again)")
            throw ExitCode(1)
        }
        let records = snapshot.scores.filter { record in filter.map { record.network == $0.description } ?? true }
        let sinceSave = max(0, Date().timeIntervalSince1970 - snapshot.savedAt)
        if json {
            print(JSONValue.array(records.map { Self.json($0, sinceSave: sinceSave) }).serialized())
            return
        }
        guard !records.isEmpty else {
            print("\(path): no scores" + (filter.map { " for \($0)" } ?? ""))
            return
        }
        print("\(path): \(records.count) measurement\(records.count == 1 ? "" : "s")\n")
        let groups = Dictionary(grouping: records) { "\($0.host)  \($0.network)" }
        for key in groups.keys.sorted() {
            print(key)
            for record in (groups[key] ?? []).sorted(by: { Self.cost($0) < Self.cost($1) }) {
                let measured = record.connectMs.map { String(format: "%.1f ms", $0) } ?? "no connect"
                let failures =
                    record.failures == 0 ? "" : ", \(record.failures) failure" + (record.failures == 1 ? "" : "s")
                print("  \(record.address)  \(measured)\(failures)")
            }
        }
    }

    /// How the network ranks an address: its smoothed connect time plus the failure penalties.
    private static func cost(_ record: NetworkScores.Record) -> Double {
        let penalty = NetworkScores.failurePenaltyMilliseconds
        return (record.connectMs ?? penalty) + Double(record.failures) * penalty
    }

    private static func json(_ record: NetworkScores.Record, sinceSave: Double) -> JSONValue {
        let connect: JSONValue = record.connectMs.map { .number($0) } ?? .null
        return .object([
            ("host", .string(record.host)), ("network", .string(record.network)), ("ip", .string(record.address)),
            ("connectMs", connect), ("failures", .number(Double(record.failures))),
            ("ageSeconds", .number((record.ageSeconds + sinceSave).rounded())),
        ])
    }
}
