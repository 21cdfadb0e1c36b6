import ArgumentParser
import Foundation
import TestSupport
import Testing

@testable import HostsCTLCommands

@Suite("hostsctl fetch")
struct FetchCommandTests {
    @Test("arguments parse: method, data, headers, repeat, hosts, trust roots")
    func parsing() throws {
        let command = try #require(
            try HostsCTLCommand.parseAsRoot([
                "fetch", "-X", "PUT", "-d", "x=1", "-H", "Accept: text/plain", "-H", "X-Trace:  abc ", "--repeat", "3",
                "--hosts", "h", "--trust-ca", "ca.pem", "--json", "--no-follow", "--concurrency", "2",
                "https://api.test:8443/p",
            ]) as? FetchCommand
        )
        #expect(command.method == "PUT")
        #expect(command.data == "x=1")
        #expect(
            try command.headers.map(FetchCommand.parseHeader).map { "\($0.name)=\($0.value)" } == [
                "Accept=text/plain", "X-Trace=abc",
            ])
        #expect(command.repeat == 3 && command.concurrency == 2)
        #expect(command.trustCA == ["ca.pem"])
        #expect(command.json && command.noFollow)
        #expect(command.url == "https://api.test:8443/p")
    }

    @Test(
        "bad arguments exit with 64",
        arguments: [
            ["fetch"], ["fetch", "ftp://a.test/"], ["fetch", "not a url"],
            ["fetch", "--repeat", "0", "http://a.test/"],
            ["fetch", "-H", "NoColon", "http://a.test/"], ["fetch", "-H", "Bad Name: x", "http://a.test/"],
            ["fetch", "--timeout", "0", "http://a.test/"], ["fetch", "-X", "", "http://a.test/"],
            ["fetch", "--no-cache", "--cache-file", "c.json", "http://a.test/"],
            ["fetch", "--concurrency", "0", "http://a.test/"], ["fetch", "--concurrency", "2000", "http://a.test/"],
        ]
    )
    func badArguments(arguments: [String]) {
        expectUsageError(arguments)
    }

    /// Runs `hostsctl fetch` with only the overrides layer, so nothing is ever asked of a real DNS server.
    private func fetch(_ arguments: [String], hosts: [String]) async throws -> HostsCTLProcess.Output {
        let hostsFile = try TemporaryFiles.file(hosts.joined(separator: "\n"), name: "hosts")
        return try await HostsCTLProcess.run(
            ["fetch", "--hosts", hostsFile, "--no-cache"] + arguments,
            // A loaded test machine (the whole suite runs at once) can take more than the default 2 s for a TLS
            // handshake; these tests are not about the connect timeout.
            environment: ["HOSTSCTL_SOURCES_ORDER": "overrides", "HOSTSCTL_INTERCEPTION_CONNECT_TIMEOUT_MS": "15000"])
    }

    private func object(_ line: Substring) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    }

    @Test("HTTPS through URLSession.shared: pinned IP, SNI and Host for the real name, the documented JSON")
    func httpsJSON() async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        let server = try await LocalHTTPServer(host: "127.0.0.14", tls: try certificates.leaf(for: "api.test")) {
            request in
            .text("sni=\(request.serverName ?? "-") host=\(request.headers["host"] ?? "-")")
        }
        try await withCleanup { () async throws in
            let url = "https://api.test:\(server.port)/"
            let bodyFile = TemporaryFiles.path("body")
            let output = try await fetch(
                ["--trust-ca", certificates.caPath, "--json", "--repeat", "2", "-o", bodyFile, url],
                hosts: ["127.0.0.14 api.test"])
            #expect(output.status == 0, "\(output.standardError)")
            let lines = output.standardOutput.split(separator: "\n")
            let objects = try lines.filter { $0.hasPrefix("{") }.map(object)
            let reports = objects.filter { $0["summary"] == nil }
            #expect(reports.count == 2)
            let summary = try #require(objects.last?["summary"] as? [String: Any])
            #expect(summary["requests"] as? Int == 2 && summary["failures"] as? Int == 0)
            let report = try #require(reports.first)
            #expect(report["status"] as? Int == 200)
            #expect(report["ip"] as? String == "127.0.0.14")
            #expect(report["hostHeader"] as? String == "api.test:\(server.port)")
            #expect(report["bytes"] as? Int == "sni=api.test host=api.test:\(server.port)".utf8.count)
            #expect(report["elapsedMs"] is Double || report["elapsedMs"] is Int)
            let hops = try #require(report["hops"] as? [[String: Any]])
            #expect(hops.count == 1)
            #expect(hops.first?["ip"] as? String == "127.0.0.14")
            #expect(hops.first?["status"] as? Int == 200)
            #expect(
                try String(contentsOfFile: bodyFile, encoding: .utf8) == "sni=api.test host=api.test:\(server.port)")
        } cleanup: {
            await server.stop()
        }
    }

    @Test("without the CA the certificate is rejected: exit 1 with the error code")
    func untrusted() async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        let server = try await LocalHTTPServer(host: "127.0.0.14", tls: try certificates.leaf(for: "api.test")) { _ in
            .text("no")
        }
        try await withCleanup { () async throws in
            let output = try await fetch(
                ["--json", "https://api.test:\(server.port)/"], hosts: ["127.0.0.14 api.test"])
            #expect(output.status == 1)
            let report = try object(try #require(output.standardOutput.split(separator: "\n").first))
            #expect((report["error"] as? [String: Any])?["code"] as? String == "certificateRejected")
        } cleanup: {
            await server.stop()
        }
    }

    @Test("redirect hops are re-resolved and a dead address fails over, as the report shows")
    func redirectAndFailover() async throws {
        let target = try await LocalHTTPServer(host: "127.0.0.16") { request in
            .text("final \(request.headers["host"] ?? "-")")
        }
        let targetPort = target.port
        let start = try await LocalHTTPServer(host: "127.0.0.15") { _ in
            .redirect(to: "http://b.test:\(targetPort)/end", status: 307)
        }
        try await withCleanup { () async throws in
            // b.test's first address has nothing listening on the port: the hop fails over to 127.0.0.16.
            let output = try await fetch(
                ["--json", "-X", "POST", "-d", "payload", "http://a.test:\(start.port)/begin"],
                hosts: ["127.0.0.15 a.test", "127.0.0.17 b.test", "127.0.0.16 b.test"])
            #expect(output.status == 0, "\(output.standardError)")
            let report = try object(try #require(output.standardOutput.split(separator: "\n").first))
            let hops = try #require(report["hops"] as? [[String: Any]])
            #expect(hops.map { $0["ip"] as? String } == ["127.0.0.15", "127.0.0.16"])
            #expect(hops.map { $0["status"] as? Int } == [307, 200])
            #expect(hops.map { $0["method"] as? String } == ["POST", "POST"])
            // With --no-cache nothing is learned, so there is no connection race: the hop fails over in file order.
            let failed = try #require(hops.last?["failed"] as? [[String: Any]])
            #expect(failed.map { $0["ip"] as? String } == ["127.0.0.17"])
            #expect(failed.first?["code"] as? String == "connectionFailed")
            #expect(hops.last?["raced"] as? Bool == false)
            #expect(report["ip"] as? String == "127.0.0.16")
        } cleanup: {
            await start.stop(); await target.stop()
        }
    }

    @Test("the text report names the IP, the Host header and each hop")
    func textReport() async throws {
        let server = try await LocalHTTPServer(host: "127.0.0.14") { _ in .text("ok") }
        try await withCleanup { () async throws in
            let output = try await fetch(["http://web.test:\(server.port)/x"], hosts: ["127.0.0.14 web.test"])
            #expect(output.status == 0)
            #expect(output.standardOutput.hasPrefix("GET http://web.test:\(server.port)/x -> 200, 2 bytes in "))
            #expect(
                output.standardOutput.contains(
                    "hop 1: GET http://web.test:\(server.port)/x -> 200 via 127.0.0.14 (override), Host: web.test:\(server.port)"
                ))
        } cleanup: {
            await server.stop()
        }
    }

    @Test("--concurrency: many requests in flight through URLSession.shared, each report its own, then a summary")
    func concurrentRequests() async throws {
        let server = try await LocalHTTPServer(host: "127.0.0.42") { request in
            .text("path=\(request.path) host=\(request.headers["host"] ?? "-")")
        }
        try await withCleanup { () async throws in
            // The first address refuses (held bound, not listening): every request fails over, as the reports show.
            let refused = try TCPListener(ip: "127.0.0.43", port: UInt16(server.port), listening: false)
            defer { refused.close() }
            // -o writes the body in place: a second hard link to the file sees it (a file replaced by rename would not).
            let bodyFile = TemporaryFiles.path("body")
            let link = bodyFile + ".link"
            #expect(FileManager.default.createFile(atPath: bodyFile, contents: Data()))
            try FileManager.default.linkItem(atPath: bodyFile, toPath: link)
            defer {
                try? FileManager.default.removeItem(atPath: bodyFile); try? FileManager.default.removeItem(atPath: link)
            }
            let output = try await fetch(
                [
                    "--json", "--repeat", "600", "--concurrency", "32", "-o", bodyFile,
                    "http://load.test:\(server.port)/item",
                ],
                hosts: ["127.0.0.43 load.test", "127.0.0.42 load.test"])
            #expect(output.status == 0, "exit \(output.status): \(output.standardError.suffix(2000))")
            let objects = try output.standardOutput.split(separator: "\n").filter { $0.hasPrefix("{") }.map(object)
            let reports = objects.filter { $0["summary"] == nil }
            #expect(reports.count == 600)
            #expect(reports.allSatisfy { $0["status"] as? Int == 200 && $0["ip"] as? String == "127.0.0.42" })
            #expect(
                reports.allSatisfy { ($0["hops"] as? [[String: Any]])?.first?["failed"] as? [[String: Any]] != nil })
            #expect(reports.allSatisfy { $0["bytes"] as? Int == "path=/item host=load.test:\(server.port)".utf8.count })
            let summary = try #require(objects.last?["summary"] as? [String: Any])
            #expect(summary["requests"] as? Int == 600)
            #expect(summary["failures"] as? Int == 0)
            #expect((summary["requestsPerSecond"] as? Double ?? Double(summary["requestsPerSecond"] as? Int ?? 0)) > 0)
            let p50 = try #require(summary["p50Ms"] as? Double), p99 = try #require(summary["p99Ms"] as? Double)
            #expect(p50 > 0 && p50 <= p99)
            #expect(try String(contentsOfFile: link, encoding: .utf8) == "path=/item host=load.test:\(server.port)")
        } cleanup: {
            await server.stop()
        }
    }

    @Test("--concurrency in text: a summary line with counts, throughput and percentiles")
    func concurrentText() async throws {
        let server = try await LocalHTTPServer(host: "127.0.0.42") { _ in .text("ok") }
        try await withCleanup { () async throws in
            let output = try await fetch(
                ["--repeat", "20", "--concurrency", "4", "http://load.test:\(server.port)/"],
                hosts: ["127.0.0.42 load.test"])
            #expect(output.status == 0)
            let last = try #require(output.standardOutput.split(separator: "\n").last)
            #expect(last.hasPrefix("20 requests, 0 failed, in "))
            #expect(last.contains("requests/s, p50 ") && last.contains(", p99 "))
        } cleanup: {
            await server.stop()
        }
    }
}
