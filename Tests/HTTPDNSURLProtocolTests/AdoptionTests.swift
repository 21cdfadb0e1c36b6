#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Foundation
import HTTPDNS
import HTTPDNSURLProtocol
import Synchronization
import Testing
import TestSupport

/// What an application sees the day it adds the one-call start-up: every request that worked before still works
/// (proxies, cookies, names only the system knows), and settings follow the file while running. The end-to-end
/// runs are child processes (`httpdns-adopter`, `hostsctl`) so that their process-wide registration and
/// environment are their own.
@Suite("Adopting the library")
struct AdoptionTests {
    /// Addresses no other test uses.
    static let web = "127.0.0.50"
    static let other = "127.0.0.51"

    /// Answers `/login` with a cookie, and every path with the `Cookie` and `Host` headers it received.
    static func cookieEcho(_ request: LocalHTTPServer.Request) -> LocalHTTPServer.Reply {
        let seen =
            "path=\(request.path) cookie=\(request.headers["cookie"] ?? "-") host=\(request.headers["host"] ?? "-")"
        if request.path == "/login" {
            return .full(
                status: 200, headers: [("Set-Cookie", "sid=abc123; Path=/"), ("Content-Type", "text/plain")],
                body: Array(seen.utf8))
        }
        return .text(seen)
    }

    struct Line: Decodable {
        var url: String?
        var status: Int?
        var body: String?
        var error: String?
        var cookies: Int?
    }

    static func lines(_ output: HostsCTLProcess.Output) throws -> [Line] {
        try output.standardOutput.split(separator: "\n").map {
            try JSONDecoder().decode(Line.self, from: Data($0.utf8))
        }
    }

    static var adopter: String { HostsCTLProcess.executable(named: "httpdns-adopter") }

    @Test("libcurl's proxy rules: which variable applies, no_proxy names, suffixes, IPs and CIDR ranges")
    func proxyRules() throws {
        let environment = ProxyEnvironment(environment: [
            "http_proxy": "127.0.0.9:3128", "HTTP_PROXY": "http://ignored:1",
            "HTTPS_PROXY": "http://user:pw@[::1]:8443/",
            "ALL_PROXY": "socks5://127.0.0.8", "NO_PROXY": "internal.test, .corp.test,10.0.0.0/8 ,[::2]",
        ])
        #expect(environment.http == .init(scheme: "http", host: "127.0.0.9", port: 3128), "lower-case http_proxy only")
        #expect(environment.https == .init(scheme: "http", host: "::1", port: 8443), "credentials and path dropped")
        #expect(environment.all == .init(scheme: "socks5", host: "127.0.0.8", port: 1080), "libcurl's default port")
        func proxy(_ url: String) -> String? { environment.proxy(for: URL(string: url)!)?.description }
        #expect(proxy("http://api.test/") == "http://127.0.0.9:3128")
        #expect(proxy("https://api.test/") == "http://::1:8443")
        #expect(proxy("http://internal.test/") == nil)
        #expect(proxy("http://db.internal.test/") == nil, "a name matches the names under it")
        #expect(proxy("http://notinternal.test/") != nil, "but not a longer label")
        #expect(proxy("http://corp.test/") == nil, "a leading dot is ignored")
        #expect(proxy("http://10.2.3.4/") == nil, "CIDR")
        #expect(proxy("http://11.2.3.4/") != nil)
        #expect(proxy("http://[::2]/") == nil)
        #expect(
            ProxyEnvironment(environment: ["HTTP_PROXY": "http://127.0.0.9:3128"]).proxy(
                for: URL(string: "http://a.test/")!) == nil)
        #expect(
            ProxyEnvironment(environment: ["all_proxy": "http://p:1", "no_proxy": "*"]).proxy(
                for: URL(string: "http://a.test/")!) == nil)
        #expect(ProxyEnvironment(environment: ["https_proxy": ""]).isEmpty, "an empty value is no proxy")
    }

    @Test("a request the environment sends through a proxy is left to URLSession, which sends it through the proxy")
    func proxiedRequestsBypass() async throws {
        let server = try await LocalHTTPServer(host: Self.web, handler: Self.cookieEcho)
        let proxy = try RecordingProxy(ip: Self.other, routes: ["api.test": Self.web])
        defer { proxy.stop() }
        let files = try TemporaryFiles()
        let hosts = try files.write("hosts", "127.0.0.99 api.test\n")  // a wrong address: only the proxy can get there
        let body = files.directory.appendingPathComponent("body").path
        let output = try await HostsCTLProcess.run(
            [
                "fetch", "--hosts", hosts, "--no-cache", "--json", "-o", body,
                "http://api.test:\(server.port)/via-proxy",
            ],
            environment: ["http_proxy": proxy.url])
        await server.stop()
        #expect(output.status == 0, "\(output.standardError) \(output.standardOutput)")
        #expect(try String(contentsOfFile: body, encoding: .utf8).contains("path=/via-proxy"))
        #expect(output.standardOutput.contains(#""hops":[]"#), "the protocol did not take it")
        #expect(
            proxy.requests == ["GET http://api.test:\(server.port)/via-proxy HTTP/1.1"], "as plain URLSession would")
    }

    @Test("interception.proxy tunnel: pinned requests go through the proxy with a CONNECT to the real host name")
    func proxiedRequestsTunnel() async throws {
        let server = try await LocalHTTPServer(host: Self.web, handler: Self.cookieEcho)
        let proxy = try RecordingProxy(ip: Self.other, routes: ["api.test": Self.web])
        defer { proxy.stop() }
        let files = try TemporaryFiles()
        let body = files.directory.appendingPathComponent("body").path
        let output = try await HostsCTLProcess.run(
            ["fetch", "--no-cache", "--json", "-o", body, "http://api.test:\(server.port)/tunnelled"],
            environment: ["http_proxy": proxy.url, "HOSTSCTL_INTERCEPTION_PROXY": "tunnel"])
        await server.stop()
        #expect(output.status == 0, "\(output.standardError) \(output.standardOutput)")
        let received = try String(contentsOfFile: body, encoding: .utf8)
        #expect(received.contains("path=/tunnelled"))
        #expect(received.contains("host=api.test:\(server.port)"))
        #expect(proxy.requests == ["CONNECT api.test:\(server.port) HTTP/1.1"])
    }

    @Test("one-call start-up: URLSession.shared goes through the protocol; cookies go out once and land once")
    func oneCallStartAndCookies() async throws {
        let server = try await LocalHTTPServer(host: Self.web, handler: Self.cookieEcho)
        let base = "http://cookies.test:\(server.port)"
        let output = try await HostsCTLProcess.run(
            executable: Self.adopter,
            ["--override", "cookies.test=\(Self.web)", "\(base)/login", "\(base)/me", "\(base)/again"],
            environment: ["HOSTSCTL_SOURCES_ORDER": "overrides,cache"])
        await server.stop()
        #expect(output.status == 0, "\(output.standardError) \(output.standardOutput)")
        let lines = try Self.lines(output)
        try #require(lines.count == 4, "\(output.standardOutput)")
        #expect(lines[0].body?.contains("cookie=-") == true, "no cookie before the login")
        #expect(lines[1].body?.contains("cookie=sid=abc123 ") == true, "exactly once: \(lines[1].body ?? "")")
        #expect(lines[2].body?.contains("cookie=sid=abc123 ") == true, "exactly once: \(lines[2].body ?? "")")
        #expect(
            lines[1].body?.contains("host=cookies.test:\(server.port)") == true,
            "the real host, reached through the override")
        #expect(lines[3].cookies == 1, "Set-Cookie landed once, for the real host")
        #expect(!output.standardError.contains("URLSession.shared was created before"))
    }

    @Test("starting after URLSession.shared exists warns and says what to do")
    func lateStartWarns() async throws {
        let output = try await HostsCTLProcess.run(
            executable: Self.adopter, ["--late"])
        #expect(output.status == 0, "\(output.standardError)")
        #expect(output.standardError.contains("URLSession.shared was created before HTTPDNSRuntime.start"))
        #expect(output.standardError.contains("HTTPDNSURLProtocol.install"))
    }

    @Test("a name only the system hosts file knows, a search domain and ndots: resolve and fetch reach them")
    func hostsAndSearch() async throws {
        try await DNSMasq.with(records: TestZone.records + ["host-record=orders.svc.test,\(Self.web),300"]) { dnsmasq in
            let server = try await LocalHTTPServer(host: Self.web, handler: Self.cookieEcho)
            let files = try TemporaryFiles()
            let hosts = try files.write("hosts", "\(Self.web) box.test\n")
            let environment = [
                "HOSTSCTL_HOSTS_FILE": hosts, "HOSTSCTL_CARES_SEARCH": "svc.test", "HOSTSCTL_CARES_NDOTS": "1",
                "HOSTSCTL_CARES_SERVERS": dnsmasq.address.description,
            ]
            let resolved = try await HostsCTLProcess.run(
                ["resolve", "--no-cache", "--json", "box.test", "orders"], environment: environment)
            #expect(resolved.status == 0, "\(resolved.standardError) \(resolved.standardOutput)")
            let reports = try #require(
                try JSONSerialization.jsonObject(with: Data(resolved.standardOutput.utf8)) as? [[String: Any]])
            let sources = reports.map { (($0["addresses"] as? [[String: Any]])?.first?["source"] as? String) ?? "-" }
            #expect(sources == ["hosts", "cares"])
            #expect(reports.allSatisfy { (($0["addresses"] as? [[String: Any]])?.first?["ip"] as? String) == Self.web })
            let body = files.directory.appendingPathComponent("body").path
            let fetched = try await HostsCTLProcess.run(
                ["fetch", "--no-cache", "--json", "-o", body, "http://orders:\(server.port)/searched"],
                environment: environment)
            await server.stop()
            #expect(fetched.status == 0, "\(fetched.standardError) \(fetched.standardOutput)")
            #expect(
                fetched.standardOutput.contains(#""ip":"\#(Self.web)""#),
                "through the protocol, to the searched name's address")
            #expect(
                try String(contentsOfFile: body, encoding: .utf8).contains("host=orders:\(server.port)"),
                "the Host header names the URL's host")
        }
    }

    @Test("the system resolver answers names no upstream knows (inside a mount namespace with its own /etc files)")
    func systemFallback() async throws {
        try await DNSMasq.with { dnsmasq in
            let files = try TemporaryFiles()
            let etcHosts = try files.write("etc-hosts", "127.0.0.1 localhost\n127.0.0.52 nss-only.test\n")
            // The namespace's resolver asks a loopback address where nothing listens: no query leaves the machine.
            let resolvConf = try files.write("resolv.conf", "nameserver 127.0.0.53\noptions timeout:1 attempts:1\n")
            let script = """
                mount --bind \(etcHosts) /etc/hosts && mount --bind \(resolvConf) /etc/resolv.conf && \
                exec \(HostsCTLProcess.executable) resolve --no-cache --json nss-only.test multi.test
                """
            let output = try await HostsCTLProcess.run(
                executable: "/usr/bin/unshare", ["--mount", "--propagation", "private", "/bin/sh", "-c", script],
                environment: [
                    "HOSTSCTL_SOURCES_SYSTEM_FALLBACK": "true", "HOSTSCTL_HOSTS_FILE": "/nonexistent",
                    "HOSTSCTL_CARES_SERVERS": dnsmasq.address.description,
                ])
            #expect(output.status == 0, "\(output.standardError) \(output.standardOutput)")
            let reports = try #require(
                try JSONSerialization.jsonObject(with: Data(output.standardOutput.utf8)) as? [[String: Any]])
            let first = try #require((reports.first?["addresses"] as? [[String: Any]])?.first)
            #expect(first["ip"] as? String == "127.0.0.52")
            #expect(first["source"] as? String == "system", "marked system")
            #expect(first["ttl"] as? Int == 30, "system.ttlSeconds")
            let second = try #require((reports.last?["addresses"] as? [[String: Any]])?.first)
            #expect(second["source"] as? String == "cares", "names the upstreams know never reach the system resolver")
        }
    }
}
