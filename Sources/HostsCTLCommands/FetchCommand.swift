import ArgumentParser
import Foundation
import HTTPDNS
import HTTPDNSSettings
import HTTPDNSURLProtocol

/// `hostsctl fetch URL`: one request through URLSession with the rewriting URL protocol registered, as an
/// application would make it, and a report of what the protocol did.
struct FetchCommand: AsyncParsableCommand {
    /// The subcommand's name and help.
    static let configuration = CommandConfiguration(
        commandName: "fetch",
        abstract: "Fetch a URL through URLSession with the HTTP DNS URL protocol, and show the IP each hop reached.",
        discussion: """
            The protocol is registered before the process creates any URLSession, and the request goes through
            URLSession.shared: the pattern an application uses. Each hop (the request and every redirect) is resolved
            through the pipeline, sent to the best IP with the original Host header, and TLS is checked for the real
            host name. With --repeat and --concurrency N, N requests are in flight at once through the same session (a
            load test of a host through the protocol), and a summary closes the run. Exit status: 0 when every
            request got an HTTP answer, 1 when any failed, 64 for bad arguments.
            """
    )

    /// The URL to fetch.
    @Argument(help: "The http or https URL.")
    var url: String

    /// The method.
    @Option(
        name: [.customShort("X"), .customLong("request")],
        help: ArgumentHelp("The HTTP method (default GET, or POST with --data).", valueName: "METHOD"))
    var method: String?

    /// The request body.
    @Option(
        name: [.customShort("d"), .customLong("data")],
        help: ArgumentHelp("Request body; @FILE reads it from a file.", valueName: "DATA"))
    var data: String?

    /// Extra header fields.
    @Option(
        name: [.customShort("H"), .customLong("header")],
        help: ArgumentHelp("A header field, \"Name: value\"; repeatable.", valueName: "HEADER"))
    var headers: [String] = []

    /// How many times to make the request.
    @Option(help: "Make the request N times; one report (one JSON object a line) each, then a summary.")
    var `repeat`: Int = 1

    /// How many requests are in flight at once.
    @Option(help: "Keep N of the --repeat requests in flight at once (default 1: one after the other).")
    var concurrency: Int = 1

    /// The settings file.
    @Option(help: SettingsLoading.configHelp)
    var config: String?

    /// An overrides file in hosts format.
    @Option(help: SettingsLoading.hostsHelp)
    var hosts: String?

    /// Extra trusted CA certificates.
    @Option(
        name: .customLong("trust-ca"),
        help: ArgumentHelp(
            "A PEM file of extra trusted CA certificates for the fetched URLs (interception.trustCA; HTTP DNS keeps httpdns.trustCA); repeatable.",
            valueName: "FILE"))
    var trustCA: [String] = []

    /// The request's time limit.
    @Option(help: "Seconds one hop may take, from connect to the whole answer (default 30).")
    var timeout: Double = 30

    /// Deliver redirects instead of following them.
    @Flag(name: .customLong("no-follow"), help: "Do not follow redirects; report the 3xx answer.")
    var noFollow = false

    /// Where the body goes.
    @Option(
        name: [.customShort("o"), .customLong("output")],
        help: ArgumentHelp("Write the last response body to FILE (- for standard output).", valueName: "FILE"))
    var output: String?

    /// `--cache-file` and `--no-cache`.
    @OptionGroup
    var cache: CacheOptions

    /// Print JSON.
    @Flag(help: "Print one JSON object per request.")
    var json = false

    /// Creates the command (used by the argument parser).
    init() {}

    /// Checks the arguments before anything runs.
    func validate() throws {
        guard let parsed = URL(string: url), let scheme = parsed.scheme?.lowercased(),
            scheme == "http" || scheme == "https",
            parsed.host?.isEmpty == false
        else {
            throw ValidationError("'\(url)' is not an http or https URL.")
        }
        guard (1...1_000_000).contains(`repeat`) else {
            throw ValidationError("--repeat must be between 1 and 1000000.")
        }
        guard (1...1024).contains(concurrency) else {
            throw ValidationError("--concurrency must be between 1 and 1024.")
        }
        guard timeout.isFinite, timeout >= 0.001, timeout <= 3600 else {
            throw ValidationError("--timeout must be between 0.001 and 3600 seconds.")
        }
        if let method, method.isEmpty || !method.allSatisfy({ $0.isLetter || $0 == "-" }) {
            throw ValidationError("-X needs a method name such as GET or POST.")
        }
        for header in headers { _ = try Self.parseHeader(header) }
    }

    /// Makes the requests and prints a report for each.
    func run() async throws {
        let loaded = try SettingsLoading.settings(config)
        var settings = loaded.resolver
        if let hosts {
            try ResolutionOptions.reportOverrideProblems(hosts)
            SettingsLoading.useOverrides(hosts, in: &settings)
        }
        cache.apply(to: &settings)
        settings.files.reloadIntervalMilliseconds = 0
        settings.preResolve = []
        let body = try loadBody()
        let request = URLSessionFetcher.Request(
            url: url,
            method: method?.uppercased() ?? (body == nil ? "GET" : "POST"),
            headers: try headers.map(Self.parseHeader),
            body: body,
            timeout: .milliseconds(Int64((timeout * 1000).rounded(.up)))
        )
        var interception = try loaded.read(HTTPDNSInterceptor.Configuration.section)
        interception.connection.additionalTrustRoots += trustCA
        // OpenTelemetry export (the `otel` section), off by default: the requests' spans and the resolver's metrics.
        let telemetry = try Telemetry.start(
            loaded.read(Telemetry.Configuration.section), logger: CommandLogging.logger())
        interception.connection.tracer = telemetry.tracer
        let resolver = try ResolveCommand.usage {
            try HostResolver(
                configuration: settings, logger: CommandLogging.logger(), metricsFactory: telemetry.metricsFactory)
        }
        interception.connection.followRedirects = !noFollow
        interception.cookieStorage = nil
        let fetcher: URLSessionFetcher
        do {
            fetcher = try URLSessionFetcher(
                resolver: resolver, configuration: interception, session: .shared, logger: CommandLogging.logger())
        } catch {
            await resolver.shutdown()
            throw ValidationError(error.description)
        }
        let summary = await telemetry.whileExporting(logger: CommandLogging.logger()) {
            await fetchAll(request, through: fetcher)
        }
        if `repeat` > 1 {
            if json { print(summary.json.serialized(pretty: false)) } else { print(summary.text) }
        }
        await fetcher.shutdown()
        await resolver.shutdown()
        if summary.failures > 0 { throw ExitCode(1) }
    }

    /// Makes the `repeat` requests, `concurrency` at a time, printing each report as its request ends.
    private func fetchAll(_ request: URLSessionFetcher.Request, through fetcher: URLSessionFetcher) async
        -> FetchSummary
    {
        let started = ContinuousClock.now
        var summary = FetchSummary(requests: `repeat`)
        await withTaskGroup(of: (FetchReport, [UInt8]?).self) { group in
            var launched = 0
            func launch() {
                launched += 1
                let url = url
                group.addTask {
                    do throws(HTTPDNSError) {
                        let result = try await fetcher.fetch(request)
                        return (FetchReport(url: url, result: result), result.body)
                    } catch {
                        return (FetchReport(url: url, error: error), nil)
                    }
                }
            }
            while launched < min(concurrency, `repeat`) { launch() }
            while let (report, body) = await group.next() {
                if launched < `repeat` { launch() }
                summary.add(report)
                if json {
                    print(report.json.serialized(pretty: false))
                } else {
                    print(report.text, terminator: "")
                }
                if let body {
                    do { try writeBody(body) } catch { printToStandardError("\(error)") }
                }
            }
        }
        summary.elapsed = ContinuousClock.now - started
        return summary
    }

    /// `Name: value` split in two.
    static func parseHeader(_ text: String) throws -> (name: String, value: String) {
        guard let colon = text.firstIndex(of: ":") else {
            throw ValidationError("-H '\(text)' is not \"Name: value\".")
        }
        let name = text[..<colon].trimmingCharacters(in: .whitespaces)
        let value = text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        let token = CharacterSet(charactersIn: "!#$%&'*+-.^_`|~").union(.alphanumerics)
        guard !name.isEmpty, name.unicodeScalars.allSatisfy({ token.contains($0) && $0.isASCII }) else {
            throw ValidationError("-H '\(text)': '\(name)' is not a valid header name.")
        }
        guard !value.contains("\r"), !value.contains("\n") else {
            throw ValidationError("-H '\(text)': header values cannot contain line breaks.")
        }
        return (name, value)
    }

    private func loadBody() throws -> [UInt8]? {
        guard let data else { return nil }
        guard data.hasPrefix("@") else { return Array(data.utf8) }
        let path = String(data.dropFirst())
        guard let contents = FileManager.default.contents(atPath: path) else {
            throw ValidationError("cannot read the body file \(path).")
        }
        return Array(contents)
    }

    private func writeBody(_ body: [UInt8]) throws {
        guard let output else { return }
        if output == "-" {
            fflush(nil)  // the report printed before the body comes first
            FileHandle.standardOutput.write(Data(body))
        } else {
            // Written in place, never replaced by a renamed temporary file (what FileManager.createFile does): `-o
            // /dev/null` run as root must not turn the device into a regular file.
            let descriptor = open(output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard descriptor >= 0 else {
                throw ValidationError("cannot write \(output): \(String(cString: strerror(errno))).")
            }
            let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
            do {
                try handle.write(contentsOf: body)
            } catch {
                throw ValidationError("cannot write \(output): \(error.localizedDescription)")
            }
        }
    }
}

/// What `hostsctl fetch` prints after several requests: counts, throughput and latency percentiles.
struct FetchSummary {
    var requests: Int
    var failures = 0
    /// The successful requests' latencies, in milliseconds.
    var latencies: [Double] = []
    /// From the first request to the last answer.
    var elapsed: Duration = .zero

    mutating func add(_ report: FetchReport) {
        if report.error != nil { failures += 1 } else { latencies.append(report.elapsedMilliseconds) }
    }

    var requestsPerSecond: Double {
        let seconds = elapsed.fractionalSeconds
        return seconds > 0 ? (Double(requests) / seconds).rounded() : 0
    }

    /// The `fraction` percentile of the successful latencies (nearest rank); `nil` when none succeeded.
    func percentile(_ fraction: Double) -> Double? {
        guard !latencies.isEmpty else { return nil }
        let sorted = latencies.sorted()
        let rank = Int((fraction * Double(sorted.count)).rounded(.up)) - 1
        return sorted[min(max(rank, 0), sorted.count - 1)]
    }

    /// `{"summary": {"requests", "failures", "seconds", "requestsPerSecond", "p50Ms", "p99Ms"}}`.
    var json: JSONValue {
        .object([
            (
                "summary",
                .object([
                    ("requests", .number(Double(requests))),
                    ("failures", .number(Double(failures))),
                    ("seconds", .number((elapsed.fractionalSeconds * 1000).rounded() / 1000)),
                    ("requestsPerSecond", .number(requestsPerSecond)),
                    ("p50Ms", percentile(0.5).map(JSONValue.number) ?? .null),
                    ("p99Ms", percentile(0.99).map(JSONValue.number) ?? .null),
                ])
            )
        ])
    }

    var text: String {
        let p50 = percentile(0.5).map { String(format: "%.2f ms", $0) } ?? "-"
        let p99 = percentile(0.99).map { String(format: "%.2f ms", $0) } ?? "-"
        return "\(requests) requests, \(failures) failed, in \(String(format: "%.2f", elapsed.fractionalSeconds)) s: "
            + "\(Int(requestsPerSecond)) requests/s, p50 \(p50), p99 \(p99)"
    }
}

/// What `hostsctl fetch` prints for one request.
struct FetchReport: Sendable {
    var url: String
    var status: Int?
    var bytes: Int = 0
    var elapsedMilliseconds: Double = 0
    var trace: RequestTrace?
    var error: HTTPDNSError?

    init(url: String, result: URLSessionFetcher.Result) {
        self.url = url
        status = result.status
        bytes = result.body.count
        elapsedMilliseconds = Self.milliseconds(result.elapsed)
        trace = result.trace
    }

    init(url: String, error: HTTPDNSError) {
        self.url = url
        self.error = error
        trace = nil
        elapsedMilliseconds = 0
    }

    static func milliseconds(_ duration: Duration) -> Double {
        (duration.fractionalMilliseconds * 1000).rounded() / 1000
    }

    private var hops: [RequestTrace.Hop] { trace?.hops ?? [] }

    /// `{"url", "status", "ip", "hostHeader", "hops": [...], "elapsedMs", "bytes"}`, or `"error"` instead of the status.
    var json: JSONValue {
        var fields: [(String, JSONValue)] = [("url", .string(url))]
        if let error {
            fields.append(
                ("error", .object([("code", .string(error.code.description)), ("message", .string(error.message))])))
            return .object(fields)
        }
        fields += [
            ("status", status.map { .number(Double($0)) } ?? .null),
            ("ip", hops.last?.address.map { .string($0.description) } ?? .null),
            ("hostHeader", hops.last.map { .string($0.hostHeader) } ?? .null),
            (
                "hops",
                .array(
                    hops.map { hop in
                        .object([
                            ("url", .string(hop.url)),
                            ("method", .string(hop.method)),
                            ("ip", hop.address.map { .string($0.description) } ?? .null),
                            ("hostHeader", .string(hop.hostHeader)),
                            ("status", hop.status.map { .number(Double($0)) } ?? .null),
                            ("source", hop.freshness.map { .string($0.rawValue) } ?? .null),
                            ("raced", .bool(hop.raced)),
                            ("synthesizedFrom", hop.synthesizedFrom.map { .string($0.description) } ?? .null),
                            ("resolveMs", .number(Self.milliseconds(hop.resolveTime))),
                            ("elapsedMs", .number(Self.milliseconds(hop.elapsed))),
                            (
                                "failed",
                                .array(
                                    hop.failedAttempts.map { attempt in
                                        .object([
                                            ("ip", attempt.address.map { .string($0.description) } ?? .null),
                                            ("code", .string(attempt.error.code.description)),
                                            ("message", .string(attempt.error.message)),
                                        ])
                                    })
                            ),
                        ])
                    })
            ),
            ("elapsedMs", .number(elapsedMilliseconds)),
            ("bytes", .number(Double(bytes))),
        ]
        return .object(fields)
    }

    /// A summary line and one line per hop.
    var text: String {
        if let error { return "\(url): error \(error.code): \(error.message)\n" }
        var out =
            "\(hops.first?.method ?? "GET") \(url) -> \(status.map(String.init) ?? "-"), \(bytes) bytes in \(Self.format(elapsedMilliseconds)) ms"
        if trace == nil { out += " (not intercepted)" }
        out += "\n"
        for (index, hop) in hops.enumerated() {
            let nat64 = hop.synthesizedFrom.map { ", NAT64 from \($0)" } ?? ""
            let ip = hop.address.map { "\($0) (\(hop.freshness?.rawValue ?? "-")\(nat64))" } ?? "not rewritten"
            out +=
                "  hop \(index + 1): \(hop.method) \(hop.url) -> \(hop.status.map(String.init) ?? "-") via \(ip), Host: \(hop.hostHeader), "
            out +=
                "resolve \(Self.format(Self.milliseconds(hop.resolveTime))) ms, exchange \(Self.format(Self.milliseconds(hop.elapsed))) ms\n"
            for attempt in hop.failedAttempts {
                out +=
                    "    failed over from \(attempt.address?.description ?? "-"): \(attempt.error.code) (\(attempt.error.message))\n"
            }
        }
        return out
    }

    private static func format(_ value: Double) -> String { String(format: "%.2f", value) }
}
