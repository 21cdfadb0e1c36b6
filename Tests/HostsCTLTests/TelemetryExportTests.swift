import Foundation
import Glibc
import TestSupport
import Testing

/// OpenTelemetry export (the `otel` section) from a running `hostsctl serve` and from `hostsctl fetch`, received by an
/// OTLP/HTTP receiver on loopback that decodes every export with the official schema (Tests/OTLP/otlp_receiver.py).
@Suite("OpenTelemetry export")
struct TelemetryExportTests {
    /// The receiver, and what it wrote: one JSON object per export request.
    struct Receiver {
        let process: ChildProcess
        let port: UInt16
        let out: String

        static func start() async throws -> Receiver {
            let port = try FreePort.tcp()
            let out = TemporaryFiles.path("otlp-\(port).jsonl")
            let process = try ChildProcess(
                path: "/usr/bin/env",
                arguments: ["python3", "Tests/OTLP/otlp_receiver.py", "--listen", "127.0.0.1:\(port)", "--out", out],
                logPath: TemporaryFiles.path("otlp-\(port).log"))
            let up = try await offThePool { FreePort.waitUntilAccepting(port: port, while: { process.isRunning }) }
            #expect(up, "the OTLP receiver did not start (is opentelemetry-proto installed? scripts/install-deps.sh)")
            return Receiver(process: process, port: port, out: out)
        }

        var endpoint: String { "http://127.0.0.1:\(port)" }

        /// Every export received so far to `path` (all of them with `nil`), each line read only if it names it.
        func exports(to path: String? = nil) -> [[String: Any]] {
            guard let text = try? String(contentsOfFile: out, encoding: .utf8) else { return [] }
            return text.split(separator: "\n").compactMap { line in
                if let path, !line.hasPrefix(#"{"path": "\#(path)""#) { return nil }
                return try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            }
        }

        /// The spans of every trace export, each with its attributes as strings, and the resource's attributes.
        func spans() -> [Span] {
            exports(to: "/v1/traces").flatMap { export -> [Span] in
                let request = export["request"] as? [String: Any] ?? [:]
                return (request["resourceSpans"] as? [[String: Any]] ?? []).flatMap { resourceSpans -> [Span] in
                    let resource = attributes((resourceSpans["resource"] as? [String: Any])?["attributes"])
                    return (resourceSpans["scopeSpans"] as? [[String: Any]] ?? []).flatMap { scope in
                        (scope["spans"] as? [[String: Any]] ?? []).map { span in
                            Span(
                                name: span["name"] as? String ?? "", kind: span["kind"] as? String ?? "",
                                attributes: attributes(span["attributes"]), resource: resource,
                                start: UInt64(span["startTimeUnixNano"] as? String ?? "") ?? 0,
                                end: UInt64(span["endTimeUnixNano"] as? String ?? "") ?? 0)
                        }
                    }
                }
            }
        }

        /// The names of the metrics in every metrics export.
        func metricNames() -> Set<String> {
            var names: Set<String> = []
            for export in exports(to: "/v1/metrics") {
                let request = export["request"] as? [String: Any] ?? [:]
                for resource in request["resourceMetrics"] as? [[String: Any]] ?? [] {
                    for scope in resource["scopeMetrics"] as? [[String: Any]] ?? [] {
                        for metric in scope["metrics"] as? [[String: Any]] ?? [] {
                            if let name = metric["name"] as? String { names.insert(name) }
                        }
                    }
                }
            }
            return names
        }

        /// Exports the receiver could not decode.
        func undecodable() -> [String] {
            exports().compactMap { $0["error"] as? String }
        }
    }

    struct Span {
        var name: String
        var kind: String
        var attributes: [String: String]
        var resource: [String: String]
        var start: UInt64
        var end: UInt64
    }

    /// OTLP key-values (`[{"key", "value": {"stringValue"|"intValue"|…}}]`) as strings.
    static func attributes(_ list: Any?) -> [String: String] {
        var result: [String: String] = [:]
        for entry in list as? [[String: Any]] ?? [] {
            guard let key = entry["key"] as? String, let value = entry["value"] as? [String: Any],
                let first = value.values.first
            else { continue }
            result[key] = "\(first)"
        }
        return result
    }

    #if OTLPExport
        @Test(
            "serve exports a span per request (transport, outcome, cache status, client network, never the address) and its metrics"
        )
        func serveExports() async throws {
            let receiver = try await Receiver.start()
            defer { receiver.process.stop() }
            let port = try FreePort.tcp()
            let dnsPort = try FreePort.udpAndTCP()
            let overrides = try TemporaryFiles.file("127.0.0.88 otel.test\n", name: "hosts")
            let settings = try TemporaryFiles.file(
                """
                {
                  "sources": { "order": ["overrides"], "systemFallback": false },
                  "overrides": { "file": "\(overrides)" },
                  "serve": { "listen": "127.0.0.1:\(port)", "dns": { "listen": "127.0.0.1:\(dnsPort)" } },
                  "otel": { "endpoint": "\(receiver.endpoint)", "metricsIntervalMs": 1000, "serviceName": "serve-under-test" }
                }
                """, name: "hostsctl.json")
            let (process, log) = try await ServeCommandTests.startServe(settings, port: port, log: "serve-otel.log")
            defer { process.stop() }
            let client = try await offThePool { try KeepAliveConnection(port: Int(port)) }
            for _ in 0..<3 {
                #expect(try await offThePool { try client.get("/resolve?name=otel.test&type=A") }.status == 200)
            }
            #expect(try await offThePool { try client.get("/resolve?type=A") }.status == 400)
            let dig = try await HostsCTLProcess.run(
                executable: "/usr/bin/kdig",
                ["@127.0.0.1", "-p", "\(dnsPort)", "otel.test", "A", "+notcp", "+time=10", "+retry=0", "+short"])
            #expect(dig.standardOutput.contains("127.0.0.88"), "\(dig.standardOutput) \(dig.standardError)")

            // Spans leave in batches (swift-otel's batch processor waits up to 5 s), metrics every second here.
            var exported = false
            let deadline = ContinuousClock.now + TestTiming.scaled(.seconds(30))
            while !exported, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(250))
                exported = receiver.spans().count >= 5 && receiver.metricNames().contains("httpdns_serve_queries_total")
            }
            let spans = receiver.spans()
            #expect(exported, "spans: \(spans.count), metrics: \(receiver.metricNames().sorted()); \(logText(log))")
            #expect(receiver.undecodable().isEmpty, "\(receiver.undecodable())")

            let answered = spans.filter { $0.name == "resolve" && $0.attributes["http.response.status_code"] == "200" }
            #expect(answered.count == 3, "\(spans.map(\.name))")
            if let span = answered.first {
                #expect(span.kind == "SPAN_KIND_SERVER")
                #expect(span.attributes["dns.transport"] == "http")
                #expect(span.attributes["dns.question.name"] == "otel.test")
                #expect(span.attributes["dns.outcome"] == "answered")
                #expect(span.attributes["dns.cache"] == "hit", "an override answers at once")
                #expect(span.attributes["client.network"] == "127.0.0.0/24")
                #expect(span.resource["service.name"] == "serve-under-test")
                #expect(span.end >= span.start && span.start > 0)
            }
            let rejected = spans.first { $0.name == "resolve" && $0.attributes["http.response.status_code"] == "400" }
            #expect(rejected?.attributes["dns.outcome"] == "rejected")
            #expect(rejected?.attributes["dns.cache"] == nil, "no name, no cache status")
            let udp = spans.first { $0.attributes["dns.transport"] == "udp" }
            #expect(udp?.attributes["dns.question.name"] == "otel.test", "\(spans.map(\.attributes))")
            // The client's own address is in no span: only its network.
            for span in spans {
                #expect(!span.attributes.values.contains { $0.contains("127.0.0.1") }, "\(span.attributes)")
            }
            // The metrics /metrics shows, exported too: the queries by transport and the answer-time histogram.
            let names = receiver.metricNames()
            #expect(names.contains("httpdns_serve_request_duration_seconds"), "\(names.sorted())")

            // A graceful stop sends what is left and ends cleanly.
            kill(process.pid, SIGTERM)
            #expect(try await offThePool { process.wait() } == 0, "\(logText(log))")
        }

        @Test(
            "a receiver that refuses connections or never answers costs no answer, and the server still stops cleanly")
        func receiverDown() async throws {
            // 127.0.0.95:PORT refuses; 127.0.0.96:PORT accepts into a backlog and never reads or answers.
            let silent = try TCPListener(ip: "127.0.0.96")
            defer { silent.close() }
            let refusing = try TCPListener(ip: "127.0.0.95", port: silent.port, listening: false)
            defer { refusing.close() }
            for receiver in ["127.0.0.95", "127.0.0.96"] {
                let port = try FreePort.tcp()
                let overrides = try TemporaryFiles.file("127.0.0.88 otel.test\n", name: "hosts")
                let settings = try TemporaryFiles.file(
                    """
                    {
                      "sources": { "order": ["overrides"], "systemFallback": false },
                      "overrides": { "file": "\(overrides)" },
                      "serve": { "listen": "127.0.0.1:\(port)" },
                      "otel": { "endpoint": "http://\(receiver):\(silent.port)", "metricsIntervalMs": 200, "timeoutMs": 1000 }
                    }
                    """, name: "hostsctl.json")
                let (process, log) = try await ServeCommandTests.startServe(
                    settings, port: port, log: "serve-otel-down.log")
                defer { process.stop() }
                let client = try await offThePool { try KeepAliveConnection(port: Int(port)) }
                for _ in 0..<20 {
                    #expect(try await offThePool { try client.get("/resolve?name=otel.test&type=A") }.status == 200)
                    try await Task.sleep(for: .milliseconds(50))
                }
                #expect(process.isRunning, "\(logText(log))")
                kill(process.pid, SIGTERM)
                #expect(try await offThePool { process.wait() } == 0, "\(receiver): \(logText(log))")
            }
        }

        @Test("fetch exports its request's spans before it exits; without an endpoint nothing is sent")
        func fetchExports() async throws {
            let receiver = try await Receiver.start()
            defer { receiver.process.stop() }
            let server = try await LocalHTTPServer(host: "127.0.0.89") { _ in .text("fetched") }
            try await withCleanup { () async throws in
                let hostsFile = try TemporaryFiles.file("127.0.0.89 fetch-otel.test\n", name: "hosts")
                let environment = [
                    "HOSTSCTL_SOURCES_ORDER": "overrides", "HOSTSCTL_INTERCEPTION_CONNECT_TIMEOUT_MS": "15000",
                ]
                let url = "http://fetch-otel.test:\(server.port)/traced"
                let quiet = try await HostsCTLProcess.run(
                    ["fetch", "--hosts", hostsFile, "--no-cache", url], environment: environment)
                #expect(quiet.status == 0 && quiet.standardOutput.contains("127.0.0.89"), "\(quiet)")
                #expect(receiver.exports().isEmpty, "export is off by default")

                let traced = try await HostsCTLProcess.run(
                    ["fetch", "--hosts", hostsFile, "--no-cache", url],
                    environment: environment.merging(["HOSTSCTL_OTEL_ENDPOINT": receiver.endpoint]) { $1 })
                #expect(traced.status == 0 && traced.standardOutput.contains("127.0.0.89"), "\(traced)")
                // Sent before the command exited: nothing to wait for.
                let spans = receiver.spans()
                let request = spans.first { $0.kind == "SPAN_KIND_CLIENT" && $0.name == "GET" }
                #expect(request != nil, "\(spans.map { ($0.name, $0.kind) })")
                #expect(spans.allSatisfy { $0.resource["service.name"] == "hostsctl" })
                #expect(receiver.undecodable().isEmpty, "\(receiver.undecodable())")
            } cleanup: {
                await server.stop()
            }
        }

    #else
        @Test("built without the OTLPExport trait, a command asked to export refuses to start and says why")
        func exportNotBuilt() async throws {
            let output = try await HostsCTLProcess.run(
                ["fetch", "--no-cache", "http://127.0.0.1:9/"],
                environment: ["HOSTSCTL_SOURCES_ORDER": "overrides", "HOSTSCTL_OTEL_ENDPOINT": "http://127.0.0.1:4318"])
            #expect(output.status != 0)
            #expect(output.standardError.contains("OTLPExport"), "\(output.standardError)")
        }
    #endif

    @Test("the otel section is checked: a bad endpoint, protocol or sampling names its key")
    func settingsChecked() async throws {
        for (settings, key) in [
            (#"{"otel": {"endpoint": "ftp://collector.test"}}"#, "otel.endpoint"),
            (#"{"otel": {"protocol": "grpc"}}"#, "otel.protocol"),
            (#"{"otel": {"sampleOneIn": 0}}"#, "otel.sampleOneIn"),
            (#"{"otel": {"tracez": true}}"#, "otel.tracez"),
        ] {
            let file = try TemporaryFiles.file(settings, name: "otel-settings.json")
            let check = try await HostsCTLProcess.run(["config", "check", file])
            #expect(check.status != 0, "\(settings)")
            #expect(check.standardError.contains(key) || check.standardOutput.contains(key), "\(settings): \(check)")
        }
        let keys = try await HostsCTLProcess.run(["config", "keys"])
        for key in ["otel.endpoint", "otel.protocol", "otel.sampleOneIn", "otel.metricsIntervalMs"] {
            #expect(keys.standardOutput.contains(key), "\(key)")
        }
    }

    private func logText(_ path: String) -> String {
        (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    }
}
