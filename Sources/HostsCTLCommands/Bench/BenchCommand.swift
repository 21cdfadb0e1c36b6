public import ArgumentParser
import Foundation
import HTTPDNS

/// `hostsctl bench HOST...`: measures how fast and how reliably each source resolves the hosts.
public struct BenchCommand: AsyncParsableCommand {
    /// The subcommand's name and help.
    public static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure resolvers side by side: queries/s, success rate, errors and latency percentiles.",
        discussion: """
            Sources (--source, repeatable): system (getaddrinfo), cares (with --server), httpdns (the service of \
            --doh/--httpdns/--provider, else every configured provider), a configured provider by name, \
            pipeline-cold (the whole pipeline, cache off) and pipeline-warm (cache filled before the run). \
            Default: cares when servers are given or configured, the HTTP DNS services, pipeline-cold and \
            pipeline-warm. The persisted cache is never read or written.

            Each source gets its own run of --queries or --duration (by default 3 seconds): --concurrency workers each \
            await one resolution at a time, asking the hosts in turn; one query is one resolution of --family \
            (default ipv4; any asks A and AAAA). Latency percentiles are over the successful queries.

            Exit status: 0, or 1 when a source answered no query at all, or 64 for bad arguments.
            """
    )

    /// The names to resolve.
    @Argument(help: "Host names to resolve, asked in turn.")
    var names: [String] = []

    /// A file with more names, one per line.
    @Option(
        name: .customLong("hosts-file"),
        help: ArgumentHelp("Also ask the names in FILE, one per line (# comments).", valueName: "FILE"))
    var hostsFile: String?

    /// The sources to measure, in order.
    @Option(
        name: .customLong("source"),
        help: ArgumentHelp("A source to measure; repeatable (see below).", valueName: "SOURCE"),
        transform: BenchSource.init(argument:)
    )
    var sources: [BenchSource] = []

    /// Queries per source.
    @Option(help: "Queries per source (by default each source runs for 3 seconds).")
    var queries: Int?

    /// Seconds per source instead of a query count.
    @Option(
        help: ArgumentHelp("Measure each source for this long instead of a number of queries.", valueName: "SECONDS"))
    var duration: Double?

    /// Queries in flight.
    @Option(help: "Queries kept in flight per source.")
    var concurrency: Int = 10

    /// Untimed queries first.
    @Option(
        help: """
            Untimed queries per source before measuring (sockets opened, connections made, caches and the \
            allocator warm); by default each source is warmed up for half a second.
            """)
    var warmup: Int?

    /// How names are resolved: servers, family (default `ipv4`), timeouts, settings, overrides, HTTP DNS.
    @OptionGroup
    var resolution: ResolutionOptions

    /// Print JSON.
    @Flag(help: "Print {\"sources\": [...]} as JSON instead of a table (and no progress bar).")
    var json = false

    /// Write an HTML report.
    @Option(
        help: ArgumentHelp(
            "Also write a self-contained HTML report with a latency chart per source.", valueName: "FILE"))
    var html: String?

    /// Creates the command (used by the argument parser).
    public init() {}

    /// The address family asked for: `ipv4` unless `--family` says otherwise.
    var family: AddressFamily { resolution.family ?? .ipv4 }

    /// What each source's run lasts.
    var length: BenchPlan.Length {
        if let duration { return .duration(.milliseconds(Int64((duration * 1000).rounded()))) }
        if let queries { return .queries(queries) }
        return .duration(Self.defaultDuration)
    }

    /// Each source's run when neither --queries nor --duration is given: long enough for a stable rate whatever the
    /// source's speed (a count would be over in a blink against a local c-ares and take minutes against a remote
    /// provider).
    static let defaultDuration: Duration = .seconds(3)

    /// The warm-up when --warmup is not given. A few dozen queries leave a fast source's figure low (against a
    /// local dnsmasq, 20,000 queries after 50 warm-up ones measured 0.83 of a long run; after half a second, the
    /// same as the long run).
    static let defaultWarmup: Duration = .milliseconds(500)

    /// The untimed run before each source's measurement; `nil` for none.
    var warmupLength: BenchPlan.Length? {
        guard let warmup else { return .duration(Self.defaultWarmup) }
        return warmup > 0 ? .queries(warmup) : nil
    }

    /// Checks ranges and names before anything runs.
    public func validate() throws {
        guard !names.isEmpty || hostsFile != nil else {
            throw ValidationError("Give at least one host name, or --hosts-file.")
        }
        for name in names { _ = try Self.hostName(name) }
        if queries != nil, duration != nil { throw ValidationError("Choose --queries or --duration, not both.") }
        if let queries, !(1...100_000_000).contains(queries) {
            throw ValidationError("--queries must be between 1 and 100000000.")
        }
        if let duration, !(duration.isFinite && duration >= 0.1 && duration <= 86_400) {
            throw ValidationError("--duration must be between 0.1 and 86400 seconds.")
        }
        guard (1...10_000).contains(concurrency) else {
            throw ValidationError("--concurrency must be between 1 and 10000.")
        }
        if let warmup, !(0...1_000_000).contains(warmup) {
            throw ValidationError("--warmup must be between 0 and 1000000.")
        }
        if let html, html.isEmpty { throw ValidationError("--html needs a file name.") }
    }

    /// Measures each source in turn and prints the table or JSON; writes the HTML report if asked.
    public func run() async throws {
        let report = try await measure(showProgress: !json && BenchProgress.isTerminal)
        if json {
            print(report.json().serialized())
        } else {
            print(report.text(), terminator: "")
        }
        if let html {
            fflush(nil)  // the table first, then the note on standard error
            do {
                try Data(BenchHTMLReport.render(report, version: HostsCTLVersion.current).utf8).write(
                    to: URL(fileURLWithPath: html), options: .atomic)
            } catch {
                throw ValidationError("cannot write \(html): \(error.localizedDescription)")
            }
            printToStandardError("HTML report written to \(html)")
        }
        if report.results.contains(where: { $0.ok == 0 }) { throw ExitCode(1) }
    }

    /// Measures every source as ``run()`` does, printing nothing but the settings' diagnostics, and returns the
    /// results in source order (for benchmarks and tools that embed the command).
    /// - Throws: `ValidationError` for unusable settings, sources, hosts files or resolver options.
    public func measureSources() async throws -> [BenchResult] {
        try await measure().results
    }

    /// Runs the measurement without printing anything but the progress bar (if asked for) and the settings'
    /// diagnostics.
    /// - Throws: `ValidationError` for unusable settings, sources, hosts files or resolver options.
    func measure(showProgress: Bool = false) async throws -> BenchReport {
        let hosts = try allHosts()
        let settings = try resolution.loadSettings()
        let factory = BenchTargetFactory(
            settings: settings, options: resolution, concurrency: concurrency, logger: CommandLogging.logger())
        let pending = try factory.pending(sources.isEmpty ? factory.defaultSources() : sources)
        if pending.contains(where: { $0.name.hasPrefix("pipeline") }) { try ResolutionOptions.checkOverrides(settings) }
        let plan = BenchPlan(
            length: length, concurrency: concurrency, warmup: warmupLength, family: family, hosts: hosts)
        var results: [BenchResult] = []
        let clock = ContinuousClock()
        for source in pending {
            let began = clock.now
            let target = try source.make()
            let made = clock.now - began
            let counter = BenchCounter()
            let result =
                showProgress
                ? await BenchProgress.show(source: source.name, length: plan.length, counter: counter) {
                    await BenchEngine.run(target, plan: plan, progress: counter)
                }
                : await BenchEngine.run(target, plan: plan, progress: counter)
            await target.close()
            var measured = result
            measured.setup += made
            results.append(measured)
        }
        let setup = BenchReport.Setup(
            hosts: hosts.map(\.name), family: family.rawValue, concurrency: concurrency,
            warmup: plan.warmup.map(Self.text) ?? "", length: Self.text(plan.length), date: Date())
        return BenchReport(setup: setup, results: results)
    }

    /// `20000 queries` or `3 s`.
    static func text(_ length: BenchPlan.Length) -> String {
        switch length {
        case .queries(let count): return "\(count) queries"
        case .duration(let duration): return "\(duration.fractionalSeconds.formatted()) s"
        }
    }

    /// The names from the arguments, then from `--hosts-file`.
    func allHosts() throws -> [HostName] {
        var hosts = try names.map(Self.hostName)
        if let hostsFile {
            let text: String
            do {
                text = try String(contentsOfFile: hostsFile, encoding: .utf8)
            } catch {
                throw ValidationError("cannot read the hosts file \(hostsFile): \(error.localizedDescription)")
            }
            for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let name =
                    line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first?
                    .trimmingCharacters(in: .whitespaces) ?? ""
                guard !name.isEmpty else { continue }
                do {
                    hosts.append(try Self.hostName(name))
                } catch let error as ValidationError {
                    throw ValidationError("\(hostsFile):\(index + 1): \(error.message)")
                }
            }
        }
        guard !hosts.isEmpty else { throw ValidationError("The hosts file \(hostsFile ?? "") names no host.") }
        return hosts
    }

    /// A name to ask; IP literals are refused, since nothing would be queried.
    static func hostName(_ text: String) throws -> HostName {
        if IPAddress(text.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))) != nil {
            throw ValidationError("'\(text)' is an IP address; bench needs host names to resolve.")
        }
        do {
            return try HostName(text)
        } catch {
            throw ValidationError("'\(text)' is not a valid host name: \(error.message)")
        }
    }
}
