import Foundation
import Logging
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore
@testable import HTTPDNSServer

/// The server asked by clients no one here wrote: kdig (Knot DNS) over DoH with GET and POST, curl resolving a page's
/// host through the server (`--doh-url`) and fetching it, and dnspython's DoH client over HTTP/2 sending thousands
/// of POSTs on one long-lived connection.
@Suite("HTTP DNS server interop with other clients")
struct InteropTests {
    static let logger = Logger(label: "interop-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    /// A TLS server (certificate for doh.test and 127.0.0.1) answering `fast.test` and `page.test` from overrides.
    struct Served {
        let certificates: TestCertificates
        let resolver: HostResolver
        let server: HTTPDNSServer

        static func start(page: String) async throws -> Served {
            let certificates = try TestCertificates()
            let leaf = try certificates.leaf(for: "doh.test", ip: "127.0.0.1")
            let overrides = HostOverrides()
            overrides.set([IPAddress(ipv4: 127, 0, 0, 5)], for: try HostPattern("fast.test"))
            overrides.set([try #require(IPAddress(page))], for: try HostPattern("page.test"))
            let resolver = HostResolver(upstreams: [], overrides: overrides, cache: HostCache(), prober: nil)
            let service = HTTPDNSService(resolver: resolver, logger: logger)
            let server = try await HTTPDNSServer.start(
                service: service,
                configuration: .init(port: 0, certificatePath: leaf.certificatePath, privateKeyPath: leaf.keyPath),
                logger: logger)
            return Served(certificates: certificates, resolver: resolver, server: server)
        }

        func stop() async {
            await server.shutdown(grace: .milliseconds(100))
            await resolver.shutdown()
            certificates.remove()
        }
    }

    static func run(_ path: String, _ arguments: [String]) async throws -> (status: Int32, output: String) {
        let log = TemporaryFiles.path("interop.log")
        let process = try ChildProcess(path: path, arguments: arguments, logPath: log)
        let status = try await offThePool { process.wait() }
        return (status, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
    }

    @Test("kdig asks over DoH with POST and with GET and gets the address")
    func kdig() async throws {
        let served = try await Served.start(page: "127.0.0.61")
        let port = served.server.port
        // +https POSTs to the path given; +https-get sends GET to /dns-query.
        for method in ["+https=/dns-query", "+https-get"] {
            let (status, output) = try await Self.run(
                "/usr/bin/kdig",
                [
                    "@127.0.0.1", "-p", "\(port)", method, "+tls-ca=\(served.certificates.caPath)",
                    "+tls-hostname=doh.test", "+timeout=20", "+retry=2", "fast.test", "A",
                ])
            #expect(status == 0, "\(output)")
            #expect(output.contains("127.0.0.5") && output.contains("NOERROR"), "kdig \(method): \(output)")
        }
        await served.stop()
    }

    @Test("curl resolves a page's host through the server (--doh-url) and fetches the page")
    func curl() async throws {
        let web = try await LocalHTTPServer(host: "127.0.0.61") { _ in .text("hello from the page") }
        let served = try await Served.start(page: "127.0.0.61")
        let (status, output) = try await Self.run(
            "/usr/bin/curl",
            [
                // 10 s, stretched under the sanitizers (a DoH lookup there once took longer).
                "--silent", "--show-error", "--max-time", "\(Int(10 * TestTiming.scale))", "--doh-url",
                "https://127.0.0.1:\(served.server.port)/dns-query", "--cacert", served.certificates.caPath,
                "http://page.test:\(web.port)/",
            ])
        #expect(status == 0, "\(output)")
        #expect(output.contains("hello from the page"), "\(output)")
        await served.stop()
        await web.stop()
    }

    @Test(
        "dnspython's DoH client over HTTP/2: 3,000 POSTs (about 100 KB of bodies) on one long-lived connection, all answered"
    )
    func dnspython() async throws {
        let served = try await Served.start(page: "127.0.0.61")
        let script = """
            import sys, httpx2, dns.message, dns.query, dns.rdatatype
            url, ca = sys.argv[1], sys.argv[2]
            answered = 0
            with httpx2.Client(http1=False, http2=True, verify=ca) as session:
                for i in range(3000):
                    query = dns.message.make_query("fast.test", dns.rdatatype.A)
                    reply = dns.query.https(query, url, session=session, post=True, timeout=10,
                                            http_version=dns.query.HTTPVersion.H2)
                    if any(r.address == "127.0.0.5" for rrset in reply.answer for r in rrset):
                        answered += 1
            print("answered", answered)
            """
        let file = try TemporaryFiles.file(script, name: "doh.py")
        let (status, output) = try await Self.run(
            "/usr/bin/env",
            ["python3", file, "https://127.0.0.1:\(served.server.port)/dns-query", served.certificates.caPath])
        #expect(status == 0, "\(output)")
        #expect(output.contains("answered 3000"), "\(output)")
        #expect(served.server.protocolCounts.http2 == 1, "one HTTP/2 connection carried them all")
        await served.stop()
    }
}
