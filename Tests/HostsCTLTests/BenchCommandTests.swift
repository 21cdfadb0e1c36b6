import ArgumentParser
import Foundation
import FoundationXML
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore
@testable import HostsCTLCommands

@Suite("hostsctl bench")
struct BenchCommandTests {
    @Test("arguments parse: sources, load, resolver options, outputs")
    func parsing() throws {
        let command = try #require(
            try HostsCTLCommand.parseAsRoot([
                "bench", "--source", "cares", "--source", "pipeline-warm", "--source", "my-doh", "--source", "SYSTEM",
                "--server", "127.0.0.1:5353", "--queries", "100", "--concurrency", "7", "--warmup", "3", "--family",
                "any",
                "--timeout", "0.5", "--hosts", "h", "--config", "c.json", "--json", "--html", "r.html", "a.test",
                "b.test",
            ]) as? BenchCommand
        )
        #expect(command.sources == [.cares, .pipelineWarm, .provider("my-doh"), .system])
        #expect(command.resolution.servers.map(\.description) == ["127.0.0.1:5353"])
        #expect(command.length == .queries(100))
        #expect(command.concurrency == 7 && command.warmup == 3)
        #expect(command.family == .any)
        #expect(
            command.resolution.timeout == 0.5 && command.resolution.hosts == "h"
                && command.resolution.config == "c.json")
        #expect(command.json && command.html == "r.html")
        #expect(command.names == ["a.test", "b.test"])

        let defaults = try #require(try HostsCTLCommand.parseAsRoot(["bench", "a.test"]) as? BenchCommand)
        #expect(defaults.length == .duration(.seconds(3)))
        #expect(defaults.warmupLength == .duration(.milliseconds(500)))
        #expect(defaults.family == .ipv4)
        #expect(defaults.sources.isEmpty)
        let timed = try #require(
            try HostsCTLCommand.parseAsRoot(["bench", "--duration", "1.5", "a.test"]) as? BenchCommand)
        #expect(timed.length == .duration(.milliseconds(1500)))
    }

    @Test(
        "bad arguments exit with 64",
        arguments: [
            ["bench"], ["bench", "--queries", "0", "a.test"],
            ["bench", "--queries", "10", "--duration", "1", "a.test"],
            ["bench", "--duration", "0", "a.test"], ["bench", "--duration", "inf", "a.test"],
            ["bench", "--concurrency", "0", "a.test"],
            ["bench", "--concurrency", "10001", "a.test"], ["bench", "--warmup", "-1", "a.test"],
            ["bench", "192.0.2.1"],
            ["bench", "[2001:db8::1]"], ["bench", "bad..name"], ["bench", "--source", "", "a.test"],
            ["bench", "--server", "127.0.0.1", "--doh", "https://doh.test/dns-query", "a.test"],
            ["bench", "--html", "", "a.test"],
            ["bench", "--family", "ipv5", "a.test"], ["bench", "--timeout", "0", "a.test"],
        ]
    )
    func badArguments(arguments: [String]) {
        expectUsageError(arguments)
    }

    @Test("an unknown source, httpdns without a service and an unreadable hosts file are usage errors")
    func runTimeValidation() async throws {
        let directory = try TemporaryDirectory()
        let config = try directory.write("settings.json", "{}")
        for arguments in [
            ["bench", "--config", config, "--source", "nosuch", "a.test"],
            ["bench", "--config", config, "--source", "httpdns", "a.test"],
            ["bench", "--config", config, "--hosts-file", directory.path("missing"), "--source", "cares"],
            [
                "bench", "--config", config, "--hosts-file",
                try directory.write("names", "a.test\n\n# only a comment\n10.0.0.1\n"),
            ],
            ["bench", "--config", config, "--hosts-file", try directory.write("empty", "# nothing\n")],
        ] {
            let command = try #require(try HostsCTLCommand.parseAsRoot(arguments) as? BenchCommand)
            await #expect(throws: ValidationError.self, "\(arguments)") { _ = try await command.measureSources() }
        }
        let hostsFile = try directory.write("list", "  n1.test  # first\nn2.test\n\nn3.test\n")
        let listed = try #require(
            try HostsCTLCommand.parseAsRoot(["bench", "--hosts-file", hostsFile, "n0.test"]) as? BenchCommand)
        #expect(try listed.allHosts().map(\.name) == ["n0.test", "n1.test", "n2.test", "n3.test"])
    }

    @Test("c-ares and the pipeline against dnsmasq: counts, errors by code, ordered percentiles")
    func againstDNSMasq() async throws {
        try await DNSMasq.with { server in
            let directory = try TemporaryDirectory()
            let config = try directory.write("settings.json", #"{"sources": {"order": ["cache", "cares"]}}"#)
            let command = try #require(
                try HostsCTLCommand.parseAsRoot([
                    "bench", "--config", config, "--server", server.address.description, "--source", "cares",
                    "--source", "pipeline-cold",
                    "--source", "pipeline-warm", "--queries", "3000", "--concurrency", "40", "--warmup", "20",
                    "n1.test", "n2.test", "nope.test",
                ]) as? BenchCommand
            )
            let results = try await command.measureSources()
            #expect(results.map(\.source) == ["cares", "pipeline-cold", "pipeline-warm"])
            for result in results {
                #expect(result.queries == 3000, "\(result.source)")
                // Hosts are asked in turn, so exactly a third of the queries ask for the missing name.
                #expect(result.ok == 2000, "\(result.source)")
                #expect(result.errors == ["notFound": 1000], "\(result.source)")
                #expect(result.latenciesMs.count == 2000)
                let p50 = try #require(result.percentile(0.5))
                let p90 = try #require(result.percentile(0.9))
                let p99 = try #require(result.percentile(0.99))
                #expect(0 < p50 && p50 <= p90 && p90 <= p99 && p99 <= (result.maximum ?? 0))
                #expect(result.queriesPerSecond > 0)
            }
        }
    }

    @Test("--duration measures for about that long and counts every query it finished")
    func duration() async throws {
        try await DNSMasq.with { server in
            let command = try #require(
                try HostsCTLCommand.parseAsRoot([
                    "bench", "--server", server.address.description, "--source", "cares", "--duration", "0.5",
                    "--concurrency", "8",
                    "--warmup", "0", "n5.test",
                ]) as? BenchCommand
            )
            let result = try #require(try await command.measureSources().first)
            // The window runs from the first query a worker sent to the last answer: the workers' start is not in it.
            #expect(result.elapsed >= .milliseconds(450))
            #expect(result.elapsed < .seconds(30))
            #expect(result.setup > .zero)
            #expect(result.queries > 0 && result.ok == result.queries)
        }
    }

    @Test("the system resolver source answers localhost from the hosts file")
    func systemSource() async throws {
        let command = try #require(
            try HostsCTLCommand.parseAsRoot([
                "bench", "--source", "system", "--queries", "200", "--concurrency", "4", "localhost",
            ])
                as? BenchCommand
        )
        let result = try #require(try await command.measureSources().first)
        #expect(result.source == "system")
        #expect(result.ok == 200)
    }

    @Test("the done-when command prints the documented JSON, with no progress bar when piped")
    func jsonShape() async throws {
        try await DNSMasq.with { server in
            let names = (0..<20).map { "n\($0).test" }
            let output = try await HostsCTLProcess.run(
                [
                    "bench", "--source", "cares", "--server", server.address.description, "--queries", "20000",
                    "--concurrency", "100", "--json",
                ]
                    + names
            )
            #expect(output.status == 0, "\(output.standardError)")
            #expect(!output.standardError.contains("\r") && !output.standardError.contains("[#"))
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(output.standardOutput.utf8)) as? [String: Any])
            #expect(Array(object.keys) == ["sources"])
            let sources = try #require(object["sources"] as? [[String: Any]])
            let cares = try #require(sources.first)
            #expect(sources.count == 1)
            // Key order is part of the documented shape.
            let keys = output.standardOutput.split(separator: "\n").compactMap { line -> String? in
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                guard trimmed.hasPrefix("\""), let end = trimmed.dropFirst().firstIndex(of: "\"") else { return nil }
                return String(trimmed[trimmed.index(after: trimmed.startIndex)..<end])
            }
            #expect(
                keys == [
                    "sources", "source", "queries", "ok", "errors", "qps", "p50Ms", "p90Ms", "p99Ms", "maxMs",
                    "elapsedMs", "setupMs",
                ])
            #expect((cares["elapsedMs"] as? Double ?? 0) > 0)
            #expect((cares["setupMs"] as? Double ?? 0) > 0)
            #expect(cares["source"] as? String == "cares")
            #expect(cares["queries"] as? Int == 20000)
            #expect(cares["ok"] as? Int == 20000)
            #expect((cares["errors"] as? [String: Any])?.isEmpty == true)
            let qps = try #require(cares["qps"] as? Double)
            #expect(qps > 100)
            let latencies = try ["p50Ms", "p90Ms", "p99Ms", "maxMs"].map { try #require(cares[$0] as? Double) }
            #expect(latencies == latencies.sorted() && latencies[0] > 0)
        }
    }

    @Test("text output: a table with a row per source and the errors by code")
    func textTable() async throws {
        try await DNSMasq.with { server in
            let output = try await HostsCTLProcess.run([
                "bench", "--source", "cares", "--server", server.address.description, "--queries", "300", "n1.test",
                "nope.test",
            ])
            #expect(output.status == 0, "\(output.standardError)")
            let lines = output.standardOutput.split(separator: "\n")
            #expect(lines.first?.split(separator: " ", omittingEmptySubsequences: true).first == "SOURCE")
            #expect(lines.dropFirst().first?.hasPrefix("cares ") == true)
            #expect(lines.dropFirst().first?.contains("50.0%") == true)
            #expect(lines.contains("errors (cares): notFound 150"))
        }
    }

    @Test("a source that answers nothing exits with 1 and still reports")
    func failingSource() async throws {
        try await DNSMasq.with { server in
            let output = try await HostsCTLProcess.run([
                "bench", "--source", "cares", "--server", server.address.description, "--queries", "50", "--json",
                "nope.test",
            ])
            #expect(output.status == 1)
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(output.standardOutput.utf8)) as? [String: Any])
            let source = try #require((object["sources"] as? [[String: Any]])?.first)
            #expect(source["ok"] as? Int == 0)
            #expect(source["p50Ms"] is NSNull)
            #expect((source["errors"] as? [String: Int]) == ["notFound": 50])
        }
    }

    @Test("--html writes a well-formed, self-contained page with one chart per source")
    func htmlReport() async throws {
        try await DNSMasq.with { server in
            let directory = try TemporaryDirectory()
            let config = try directory.write("settings.json", #"{"sources": {"order": ["cache", "cares"]}}"#)
            let page = directory.path("report <&>.html")
            let output = try await HostsCTLProcess.run([
                "bench", "--config", config, "--server", server.address.description, "--source", "cares", "--source",
                "pipeline-cold",
                "--source", "pipeline-warm", "--queries", "500", "--html", page, "n1.test", "n2.test", "nope.test",
            ])
            #expect(output.status == 0, "\(output.standardError)")
            #expect(output.standardError.contains("HTML report written to"))
            let html = try String(contentsOfFile: page, encoding: .utf8)
            #expect(html.hasPrefix("<!DOCTYPE html>"))
            // Well-formed XML (so every tag is closed and every attribute quoted).
            let document = try XMLDocument(data: Data(html.utf8), options: [])
            let charts = try document.nodes(forXPath: "//*[local-name()='svg']").compactMap { $0 as? XMLElement }
            #expect(charts.count == 3)
            #expect(
                try charts.map { try $0.nodes(forXPath: "@data-source").first?.stringValue } == [
                    "cares", "pipeline-cold", "pipeline-warm",
                ])
            for chart in charts {
                let bars = try chart.nodes(forXPath: ".//*[local-name()='rect']")
                #expect(!bars.isEmpty)
                let marks = try chart.nodes(forXPath: ".//*[local-name()='line' and contains(@class, 'mark')]")
                #expect(marks.count == 3)
            }
            #expect(html.contains("notFound"))
            // Self-contained: no scripts, no external references.
            #expect(
                try document.nodes(forXPath: "//*[local-name()='script' or local-name()='link' or local-name()='img']")
                    .isEmpty)
            #expect(try document.nodes(forXPath: "//@src | //@href").isEmpty)
        }
    }

    @Test("the HTML of a source without answers says so instead of drawing bars")
    func htmlWithoutAnswers() throws {
        let failed = BenchResult(
            source: "a<b", queries: 3, ok: 0, errors: ["timeout": 3], elapsed: .seconds(1), latenciesMs: [])
        let report = BenchReport(
            setup: .init(
                hosts: ["x.test"], family: "ipv4", concurrency: 1, warmup: "", length: "3 queries", date: Date()),
            results: [failed]
        )
        let html = BenchHTMLReport.render(report, version: "test")
        let document = try XMLDocument(data: Data(html.utf8), options: [])
        #expect(try document.nodes(forXPath: "//*[local-name()='svg']").count == 1)
        #expect(html.contains("no successful query"))
        #expect(html.contains("a&lt;b"))
        #expect(report.json().serialized(pretty: false).contains(#""p50Ms":null"#))
    }
}
