import Foundation
import TestSupport
import Testing

/// Errors that name what failed: every problem of a settings file in one `config check` run, listen addresses
/// parsed as listen addresses, and a listener that cannot open naming itself and its address.
@Suite("hostsctl: errors that name what failed")
struct SettingsErrorsTests {
    /// A file with a problem in every section: a wrong type and a range in `cares`, a mistyped key in `cache`, a
    /// missing overrides file, listen addresses without a port and with a host name, a range in `serve`, an unknown
    /// key in `interception`.
    static let broken = """
        {
          "cares": {"timeoutMs": "x", "tries": 99},
          "cache": {"minTtlSecond": 5},
          "overrides": {"file": "/nonexistent/hosts"},
          "serve": {"listen": "127.0.0.2", "admin": {"listen": "localhost:8054"}, "maxAnswers": -1},
          "interception": {"bogus": 1}
        }
        """

    static let expected = [
        "2:26: error: 'cares.timeoutMs' must be an integer",
        "2:40: error: 'cares.tries': 99 is outside 1...16",
        "3:13: error: unknown key 'cache.minTtlSecond'; did you mean 'cache.minTtlSeconds'?",
        "4:17: error: 'overrides.file' names /nonexistent/hosts, which does not exist",
        "5:23: error: 'serve.listen': '127.0.0.2': the port is missing",
        "error: 'serve.admin.listen': 'localhost:8054': a listen address is an IP address, not a host name",
        "error: 'serve.maxAnswers': -1 is outside 1...64",
        "6:20: error: unknown key 'interception.bogus'",
    ]

    @Test("config check reports every problem of every section in one run, with the file named by $HOSTSCTL_CONFIG too")
    func everyProblemAtOnce() async throws {
        let file = try TemporaryFiles.file(Self.broken, name: "broken.json")
        for (arguments, environment) in [
            (["config", "check", file], [:]), (["config", "check"], ["HOSTSCTL_CONFIG": file]),
        ] {
            let output = try await HostsCTLProcess.run(arguments, environment: environment)
            #expect(output.status == 1)
            for line in Self.expected {
                #expect(output.standardOutput.contains(line), "missing '\(line)' in:\n\(output.standardOutput)")
            }
            #expect(output.standardOutput.contains("8 errors"), "\(output.standardOutput)")
        }
    }

    @Test("a mistyped key far from every known one gets no guess; the log level variable is no unknown setting")
    func noWildGuess() async throws {
        let file = try TemporaryFiles.file(#"{"cache": {"zzzzzzzz": 1}}"#, name: "guess.json")
        let output = try await HostsCTLProcess.run(
            ["config", "check", file], environment: ["HOSTSCTL_LOG_LEVEL": "info"])
        #expect(output.standardOutput.contains("unknown key 'cache.zzzzzzzz'; known here:"), "\(output.standardOutput)")
        #expect(!output.standardOutput.contains("did you mean"))
        #expect(!(output.standardOutput + output.standardError).contains("HOSTSCTL_LOG_LEVEL"))
    }

    @Test("two listeners on one port are refused by config check, naming both keys")
    func listenerClash() async throws {
        let file = try TemporaryFiles.file(
            #"{"serve": {"listen": "127.0.0.1:8073", "admin": {"listen": "0.0.0.0:8073"}}}"#, name: "clash.json")
        let output = try await HostsCTLProcess.run(["config", "check", file])
        #expect(output.status == 1)
        #expect(
            output.standardOutput.contains("serve.admin.listen")
                && output.standardOutput.contains(
                    "0.0.0.0:8073 is also serve.listen (127.0.0.1:8073): each listener needs its own port"),
            "\(output.standardOutput)")
    }

    @Test("serve --listen takes IP:PORT only: a missing port and a host name are refused with that wording")
    func listenOption() async throws {
        let settings = try TemporaryFiles.file(#"{"serve": {"admin": {"listen": "none"}}}"#, name: "plain.json")
        for (listen, wording) in [
            ("127.0.0.2", "the port is missing"),
            ("localhost:8073", "a listen address is an IP address, not a host name"),
        ] {
            let output = try await HostsCTLProcess.run(["serve", "--config", settings, "--listen", listen])
            #expect(output.status != 0)
            #expect(output.standardError.contains(wording), "\(listen): \(output.standardError)")
        }
    }

    @Test("a listener whose port is taken: the error names the listener's key and its address, and serve exits")
    func portTaken() async throws {
        let taken = try TCPListener(ip: "127.0.0.1")
        defer { taken.close() }
        let port = try FreePort.tcp()
        let settings = try TemporaryFiles.file(
            """
            {"sources": {"order": ["overrides"], "systemFallback": false},
             "serve": {"listen": "127.0.0.1:\(port)", "admin": {"listen": "127.0.0.1:\(taken.port)"}}}
            """, name: "taken.json")
        let output = try await HostsCTLProcess.run(["serve", "--config", settings])
        #expect(output.status != 0)
        #expect(
            output.standardError.contains(
                "cannot listen on 127.0.0.1:\(taken.port) for serve.admin.listen: Address already in use"),
            "\(output.standardError)")
    }
}
