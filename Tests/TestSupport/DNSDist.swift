import Foundation
public import HTTPDNS

/// A real dnsdist with DNS-over-HTTPS listeners on loopback, forwarding to a backend such as ``DNSMasq``.
///
/// The config sets `setSecurityPollSuffix("")` (dnsdist would otherwise query a public name for security
/// updates), an ACL limited to loopback, and health checks for a name of the test zone. The backend is always asked:
/// dnsdist checks it once, synchronously, at start and then marks it down for a whole check interval if that answer
/// is late, which a backend under ThreadSanitizer once was (kdig then got nothing for 70 s). So the first check may
/// take 5 s, and the round-robin policy still forwards to a backend marked down.
public final class DNSDist: Sendable {
    /// Plain-HTTP DoH: `http://127.0.0.1:PORT/dns-query`.
    public let httpURL: String
    /// DoH over TLS, for the certificate's name: `https://NAME:PORT/dns-query` (connect through 127.0.0.1).
    public let httpsURL: String?
    /// The plain-HTTP DoH port.
    public let httpPort: UInt16
    /// The TLS DoH port, when a certificate was given.
    public let httpsPort: UInt16?
    /// The plain DNS port (UDP and TCP) on 127.0.0.1.
    public let dnsPort: UInt16
    private let process: ChildProcess
    private let directory: URL

    /// Starts dnsdist.
    /// - Parameters:
    ///   - backend: The DNS server queries are forwarded to.
    ///   - certificate: A certificate and key for the TLS listener, and the name `httpsURL` uses.
    /// - Throws: ``TestServerError`` when dnsdist is missing or does not come up.
    public init(backend: ServerAddress, certificate: TestCertificates.Leaf? = nil) throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/dnsdist") else {
            throw TestServerError("dnsdist is not installed; run scripts/test.sh, which installs it")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "httpdns-dnsdist-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        do {
            (process, httpPort, httpsPort, dnsPort) = try ServerLaunch.retrying("dnsdist") {
                _ throws -> (ChildProcess, UInt16, UInt16?, UInt16) in
                let udpPort = try FreePort.udp()
                let httpPort = try FreePort.tcp()
                let httpsPort = certificate == nil ? nil : try FreePort.tcp()
                var lines = [
                    "setSecurityPollSuffix(\"\")",
                    "setACL({\"127.0.0.0/8\", \"::1/128\"})",
                    "setLocal(\"127.0.0.1:\(udpPort)\")",
                    "newServer({address=\"\(backend)\", checkName=\"multi.test.\", checkInterval=60, checkTimeout=5000})",
                    "setServerPolicy(roundrobin)",
                    "addDOHLocal(\"127.0.0.1:\(httpPort)\", nil, nil, \"/dns-query\")",
                ]
                if let certificate, let httpsPort {
                    lines.append(
                        "addDOHLocal(\"127.0.0.1:\(httpsPort)\", \"\(certificate.certificatePath)\", "
                            + "\"\(certificate.keyPath)\", \"/dns-query\")"
                    )
                }
                let config = directory.appendingPathComponent("dnsdist.conf")
                try (lines.joined(separator: "\n") + "\n").write(to: config, atomically: true, encoding: .utf8)
                let process = try ChildProcess(
                    path: "/usr/bin/dnsdist",
                    arguments: ["--supervised", "--disable-syslog", "-C", config.path],
                    logPath: directory.appendingPathComponent("dnsdist.log").path
                )
                let up =
                    FreePort.waitUntilAccepting(port: httpPort, while: { process.isRunning })
                    && (httpsPort.map { port in FreePort.waitUntilAccepting(port: port, while: { process.isRunning }) }
                        ?? true)
                guard up else {
                    process.stop()
                    let log =
                        (try? String(contentsOf: directory.appendingPathComponent("dnsdist.log"), encoding: .utf8))
                        ?? ""
                    throw ServerLaunch.NotUp("dnsdist did not come up on port \(httpPort): \(log.suffix(2000))")
                }
                return (process, httpPort, httpsPort, udpPort)
            }
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
        self.directory = directory
        let (http, https) = (httpPort, httpsPort)
        self.httpURL = "http://127.0.0.1:\(http)/dns-query"
        self.httpsURL = certificate.flatMap { leaf in https.map { "https://\(leaf.name):\($0)/dns-query" } }
    }

    /// Starts dnsdist (see ``init(backend:certificate:)``) without holding a thread of the cooperative pool while
    /// it comes up.
    public static func start(backend: ServerAddress, certificate: TestCertificates.Leaf? = nil) async throws -> DNSDist
    {
        try await offThePool { try DNSDist(backend: backend, certificate: certificate) }
    }

    /// Stops the server and removes its files.
    public func stop() {
        process.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    deinit { stop() }
}

/// A private CA and leaf certificates made with the `openssl` command for a test, in a temporary directory.
public final class TestCertificates: Sendable {
    /// A leaf certificate and its key, for one DNS name.
    public struct Leaf: Sendable {
        /// The DNS name in the certificate's subjectAltName.
        public var name: String
        /// The PEM certificate file.
        public var certificatePath: String
        /// The PEM private key file.
        public var keyPath: String
    }

    /// The CA certificate (PEM) that signs the leaves: what `--trust-ca` is given.
    public let caPath: String
    private let directory: URL

    /// Creates a CA.
    /// - Throws: ``TestServerError`` when `openssl` fails.
    public init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        caPath = directory.appendingPathComponent("ca.pem").path
        try Self.openssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
            "-subj", "/CN=swift-httpdns test CA", "-keyout", directory.appendingPathComponent("ca.key").path,
            "-out", caPath, "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign",
        ])
    }

    /// Issues a leaf certificate for `name` (and for the address `ip`, when given, for clients that are pointed at
    /// an address), signed by the CA.
    public func leaf(for name: String, ip: String? = nil) throws -> Leaf {
        let key = directory.appendingPathComponent("\(name).key").path
        let csr = directory.appendingPathComponent("\(name).csr").path
        let cert = directory.appendingPathComponent("\(name).pem").path
        let extensions = directory.appendingPathComponent("\(name).ext")
        try "subjectAltName=DNS:\(name)\(ip.map { ",IP:" + $0 } ?? "")\nextendedKeyUsage=serverAuth\n".write(
            to: extensions, atomically: true, encoding: .utf8)
        try Self.openssl([
            "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-subj", "/CN=\(name)", "-keyout", key, "-out", csr,
        ])
        try Self.openssl([
            "x509", "-req", "-in", csr, "-CA", caPath, "-CAkey", directory.appendingPathComponent("ca.key").path,
            "-CAcreateserial", "-days", "2", "-extfile", extensions.path, "-out", cert,
        ])
        return Leaf(name: name, certificatePath: cert, keyPath: key)
    }

    /// Removes the files.
    public func remove() { try? FileManager.default.removeItem(at: directory) }

    deinit { remove() }

    private static func openssl(_ arguments: [String]) throws {
        let process = try ChildProcess(path: "/usr/bin/openssl", arguments: arguments, logPath: "/dev/null")
        let status = process.wait()
        guard status == 0 else {
            throw TestServerError("openssl \(arguments.first ?? "") failed with status \(status)")
        }
    }
}
