import ArgumentParser
import Foundation
import HTTPDNS
import HTTPDNSCore
import HTTPDNSServer
import HTTPDNSSettings

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Where a running `hostsctl serve`'s admin listener is: `--admin`, else the settings' `serve.admin.listen`.
struct AdminOptions: ParsableArguments {
    /// The settings file, to find `serve.admin.listen`.
    @Option(
        help:
            "The settings file to read serve.admin.listen from (default: $HOSTSCTL_CONFIG, else the defaults); a reload re-reads the server's own file."
    )
    var config: String?

    /// The admin listener to ask, instead of the settings'.
    @Option(
        help:
            "The admin listener, IP:PORT, no host names; through a tunnel, its local end (default: serve.admin.listen)."
    )
    var admin: String?

    /// Creates the options (used by the argument parser).
    init() {}

    /// Checks `--admin` before anything runs.
    func validate() throws {
        guard let admin else { return }
        do { _ = try ServerAddress(listening: admin) } catch { throw ValidationError("--admin: \(error.message)") }
    }

    /// `--admin`, else the settings' `serve.admin.listen`.
    func address() throws -> ServerAddress {
        if let admin { return try ServerAddress(listening: admin) }
        let serve = try SettingsLoading.settings(config).read(ServeSettings.section)
        guard let listen = serve.server.adminListen else {
            printToStandardError("hostsctl: serve.admin.listen is none: the server has no admin listener to ask")
            throw ExitCode(1)
        }
        return listen
    }

    /// The URL of `path` (with `query`) on the admin listener.
    func url(_ path: String, query: [URLQueryItem] = []) throws -> (url: URL, address: ServerAddress) {
        let address = try address()
        var components = URLComponents()
        components.scheme = "http"
        components.host = address.ip.urlHost
        components.port = Int(address.port)
        components.path = path
        if !query.isEmpty { components.queryItems = query }
        guard let url = components.url else { throw ValidationError("cannot make a URL of \(address)") }
        return (url, address)
    }

    /// A session that goes to the admin listener directly (no proxy) and gives up after `timeout` seconds.
    static func session(timeout: Double) -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeout
        configuration.timeoutIntervalForResource = timeout
        configuration.connectionProxyDictionary = [:]
        return URLSession(configuration: configuration)
    }

    /// Why a request to the admin listener failed, in a few words (not an `NSError` dump).
    static func reason(_ error: any Error) -> String {
        if let error = error as? URLError {
            switch error.code {
            case .cannotConnectToHost: return "connection refused"
            case .timedOut: return "no answer in time"
            case .networkConnectionLost: return "the connection closed"
            default: return error.localizedDescription
            }
        }
        if let error = error as? DecodingError {
            return "not an answer of hostsctl serve (\(error.localizedDescription))"
        }
        return "\(error)"
    }
}

/// `hostsctl control`: asks a running `hostsctl serve` through its admin listener, as `unbound-control` does: its
/// status, a flush of one name or a suffix, a reload of the settings now.
struct ControlCommand: AsyncParsableCommand {
    /// The command's name, help and subcommands.
    static let configuration = CommandConfiguration(
        commandName: "control",
        abstract: "Ask a running hostsctl serve: status, flush a name or a suffix, reload the settings.",
        discussion: """
            Talks to the server's admin listener (serve.admin.listen, 127.0.0.1:8054 by default). Exit status: 0 \
            when the server did what was asked, 1 when it could not be reached or refused, 64 for bad arguments.
            """,
        subcommands: [Status.self, Flush.self, Reload.self])

    /// Creates the command (used by the argument parser).
    init() {}

    /// `hostsctl control status`.
    struct Status: AsyncParsableCommand {
        /// The subcommand's name and help.
        static let configuration = CommandConfiguration(
            abstract: "Show the version, uptime, settings file and last reload, listeners and upstream health.")

        /// Where the server is.
        @OptionGroup var target: AdminOptions

        /// Print the server's JSON.
        @Flag(help: "Print the server's JSON answer.")
        var json = false

        /// Creates the command (used by the argument parser).
        init() {}

        /// Asks and prints.
        func run() async throws {
            let (body, _) = try await ControlCommand.call(target, "/admin/status", method: "GET")
            if json {
                // The server's JSON escapes control characters; anything else answering there is shown escaped.
                print(ControlCommand.escaped(String(decoding: body, as: UTF8.self)))
                return
            }
            let status = try ControlCommand.decode(ServerStatus.self, body)
            print(ControlCommand.render(status, now: Date().timeIntervalSince1970), terminator: "")
        }
    }

    /// `hostsctl control flush NAME`.
    struct Flush: AsyncParsableCommand {
        /// The subcommand's name and help.
        static let configuration = CommandConfiguration(
            abstract: "Remove a name (with --suffix, it and every name under it) from the server's caches.")

        /// Where the server is.
        @OptionGroup var target: AdminOptions

        /// The name.
        @Argument(help: "The name to flush.")
        var name: String

        /// The name and every name under it.
        @Flag(help: "Flush the name and every name under it.")
        var suffix = false

        /// Creates the command (used by the argument parser).
        init() {}

        /// Checks the name before anything is sent.
        func validate() throws {
            if (try? HostName(name)) == nil {
                throw ValidationError("'\(HostName.printable(name))' is not a host name")
            }
        }

        /// Asks and prints what was removed.
        func run() async throws {
            let (body, _) = try await ControlCommand.call(
                target, "/admin/flush", method: "POST",
                query: [URLQueryItem(name: suffix ? "suffix" : "name", value: name)])
            let result = try ControlCommand.decode(FlushResult.self, body)
            let name = HostName.printable(result.name)
            let scope = result.subdomains ? "\(name) and the names under it" : name
            print(
                "flushed \(scope): \(result.cache) from the cache, \(result.clientSubnet) kept by client network, "
                    + "\(result.relayed) relayed answers of other types")
        }
    }

    /// `hostsctl control reload`.
    struct Reload: AsyncParsableCommand {
        /// The subcommand's name and help.
        static let configuration = CommandConfiguration(
            abstract:
                "Read the server's settings file again and apply it now (as SIGHUP does); listener settings wait for a restart."
        )

        /// Where the server is.
        @OptionGroup var target: AdminOptions

        /// Creates the command (used by the argument parser).
        init() {}

        /// Asks and prints the outcome; exits 1 when the settings were not applied.
        func run() async throws {
            let (body, _) = try await ControlCommand.call(target, "/admin/reload", method: "POST", accept: [200, 422])
            let record = try ControlCommand.decode(ReloadRecord.self, body)
            guard record.applied else {
                printToStandardError(
                    "hostsctl control: settings not applied, the last good ones stay: "
                        + ControlCommand.escaped(record.error ?? "unknown error"))
                throw ExitCode(1)
            }
            print(
                record.unchanged
                    ? "settings unchanged since they were applied; the overrides and hosts files checked"
                    : record.restartNeeded
                        ? "settings applied; the listener's settings changed and take effect at the next start"
                        : "settings applied")
        }
    }

    /// Sends one control call and returns the body of an answer whose status is in `accept`; anything else ends the
    /// command with one line and exit status 1.
    static func call(
        _ target: AdminOptions, _ path: String, method: String, query: [URLQueryItem] = [], accept: Set<Int> = [200]
    ) async throws -> (body: Data, status: Int) {
        let (url, address) = try target.url(path, query: query)
        var request = URLRequest(url: url)
        request.httpMethod = method
        // What the server asks of a state-changing call, so that no web page can make one.
        if method == "POST" { request.setValue("1", forHTTPHeaderField: "Hostsctl-Control") }
        let session = AdminOptions.session(timeout: 10)
        defer { session.finishTasksAndInvalidate() }
        var data = Data()
        var status = 0
        // A call the server's bound turned away (429: another reload within the second) is tried once more after
        // the wait it names, up to 2 s.
        for attempt in 0..<2 {
            let response: URLResponse
            do {
                (data, response) = try await session.data(for: request)
            } catch {
                printToStandardError(
                    "hostsctl control: cannot reach \(address): \(AdminOptions.reason(error)); "
                        + "is hostsctl serve running there? (--admin, serve.admin.listen)")
                throw ExitCode(1)
            }
            let http = response as? HTTPURLResponse
            status = http?.statusCode ?? 0
            guard status == 429, attempt == 0,
                let wait = (http?.value(forHTTPHeaderField: "Retry-After")).flatMap(Int.init), wait <= 2
            else { break }
            try await Task.sleep(for: .seconds(wait))
        }
        guard accept.contains(status) else {
            let text = String(decoding: data.prefix(512), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            printToStandardError("hostsctl control: \(address) answered \(status): \(HostName.printable(text))")
            throw ExitCode(1)
        }
        return (data, status)
    }

    /// `body` read as `type`, or one line and exit status 1.
    static func decode<T: Decodable>(_ type: T.Type, _ body: Data) throws -> T {
        do {
            return try JSONDecoder().decode(type, from: body)
        } catch {
            printToStandardError("hostsctl control: \(AdminOptions.reason(error))")
            throw ExitCode(1)
        }
    }

    /// The status as text: what runs, the settings, the listeners and a table of the upstreams.
    static func render(_ status: ServerStatus, now: Double) -> String {
        func ago(_ time: Double?) -> String { time.map { "\(duration(now - $0)) ago" } ?? "-" }
        func clock(_ time: Double) -> String {
            Date(timeIntervalSince1970: time).formatted(
                .iso8601.year().month().day().time(includingFractionalSeconds: false))
        }
        // What the server says is shown escaped: whatever answers on that port is not to reach the terminal raw.
        let text = escaped
        var out =
            "hostsctl serve \(text(status.version)), up \(duration(status.uptimeSeconds)) (since \(clock(status.started)) UTC)\n"
        out += "settings   \(text(status.settingsFile ?? "none (the defaults)"))\n"
        if let reload = status.lastReload {
            let outcome =
                reload.applied
                ? (reload.unchanged ? "unchanged" : "applied")
                    + (reload.restartNeeded ? " (listener settings wait for a restart)" : "")
                : "not applied: \(text(reload.error ?? "unknown error"))"
            out += "reloaded   \(ago(reload.time)) (\(text(reload.trigger))), \(outcome)\n"
        } else {
            out += "reloaded   never\n"
        }
        out += "cache      \(status.cachedHosts) hosts\n\n"
        out += TextTable.render(
            header: ["LISTENER", "ADDRESS"], rows: status.listeners.map { [$0.kind, $0.address] }, indent: 0)
        out += "\n"
        out += TextTable.render(
            header: ["UPSTREAM", "STATE", "ANSWERED", "FAILED", "IN A ROW", "LAST ANSWER", "LAST FAILURE"],
            rows: status.upstreams.map {
                [
                    $0.source, $0.state, "\($0.answered)", "\($0.failed)", "\($0.consecutiveFailures)",
                    ago($0.lastAnswer), ago($0.lastFailure),
                ]
            }, indent: 0, rightAligned: [2, 3, 4])
        return out
    }

    /// `text` with the characters that could drive a terminal (C0 and C1 controls, bidirectional overrides) written
    /// as `\u{…}`, whatever its length: what answers on the admin port may be anything.
    static func escaped(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            let value = scalar.value
            if value < 0x20 || (0x7F...0x9F).contains(value) || (0x202A...0x202E).contains(value)
                || (0x2066...0x2069).contains(value)
            {
                out += "\\u{\(String(value, radix: 16))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// A span of seconds as people say it: `45 s`, `3 min 20 s`, `2 h 5 min`, `3 d 4 h`.
    static func duration(_ seconds: Double) -> String {
        let total = max(0, Int(seconds.rounded()))
        let (days, hours, minutes, rest) = (total / 86_400, total / 3600 % 24, total / 60 % 60, total % 60)
        if days > 0 { return "\(days) d \(hours) h" }
        if hours > 0 { return "\(hours) h \(minutes) min" }
        if minutes > 0 { return "\(minutes) min \(rest) s" }
        return "\(rest) s"
    }
}
