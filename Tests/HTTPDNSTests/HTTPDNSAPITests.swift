import Crypto
import Foundation
import Logging
import Synchronization
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore

/// Every log line a test produced, with metadata.
final class LogStore: Sendable {
    let lines = Locked<[String]>([])
}

/// A log handler that keeps every message with its metadata, to check what reaches logs.
struct RecordingLogHandler: LogHandler {
    let store: LogStore
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        store.lines.withLock { $0.append("\(event.message) \(all)") }
    }
}

@Suite("HTTP DNS APIs against local servers")
struct HTTPDNSAPITests {
    /// Runs `body` with a local server and a transport. The timeouts are long so that a loaded machine never turns
    /// an expected answer into a timeout; a test that expects one passes a short `timeout`.
    static func withServer(
        timeout: Duration = .seconds(30),
        _ handler: @escaping @Sendable (LocalHTTPServer.Request) -> LocalHTTPServer.Reply,
        _ body: (LocalHTTPServer, HTTPDNSTransport) async throws -> Void
    ) async throws {
        let server = try await LocalHTTPServer(handler: handler)
        let transport = try HTTPDNSTransport(
            configuration: .init(requestTimeout: timeout, connectTimeout: .seconds(30)))
        try await withCleanup {
            try await body(server, transport)
        } cleanup: {
            await transport.shutdown()
            await server.stop()
        }
    }

    static func resolver(
        _ api: HTTPDNSResolver.API,
        _ url: String,
        transport: HTTPDNSTransport,
        allowNonPublic: Bool = false,
        logger: Logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }),
        now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }
    ) throws -> HTTPDNSResolver {
        try HTTPDNSResolver(
            configuration: .init(
                api: api, endpoints: [try HTTPDNSEndpoint(url)], allowNonPublicAddresses: allowNonPublic),
            transport: transport,
            logger: logger,
            now: now
        )
    }

    static func ips(_ resolution: Resolution) -> Set<String> { Set(resolution.addresses.map(\.ip.description)) }

    // MARK: Hostile DoH servers

    @Test("a DoH answer that echoes the question with its letters in another case is accepted (0x20 randomisation)")
    func questionInAnotherCase() async throws {
        try await Self.withServer({ request in
            var query = CraftedWire.query(of: request)
            for index in 12..<(query.count - 4) where (97...122).contains(query[index]) { query[index] -= 32 }
            return .respond(
                status: 200, contentType: "application/dns-message",
                body: CraftedWire.response(to: query, a: [[192, 0, 2, 1]]))
        }) { server, transport in
            let doh = try Self.resolver(
                .dnsMessage(), server.url + "/dns-query", transport: transport, allowNonPublic: true)
            let answer = try await doh.resolve(try HostName("mixed.test"), family: .ipv4)
            #expect(answer.addresses.map(\.ip.description) == ["192.0.2.1"])
        }
    }

    @Test(
        "hostile DoH answers give typed errors",
        .timeLimit(.minutes(1)),
        arguments: [
            ("garbage", HTTPDNSError.Code.badResponse), ("truncated", .badResponse),
            ("wrong question", .questionMismatch),
            ("wrong id", .questionMismatch), ("servfail", .serverFailure), ("oversized", .responseTooLarge),
            ("oversized chunked", .responseTooLarge), ("stall", .timeout), ("5xx", .httpStatus),
            ("html", .httpStatus), ("hang up", .connectionLost), ("query echoed", .badResponse),
            ("tc", .badResponse), ("wrong type", .questionMismatch), ("other case", .questionMismatch),
        ]
    )
    func hostile(behaviour: String, code: HTTPDNSError.Code) async throws {
        let handler: @Sendable (LocalHTTPServer.Request) -> LocalHTTPServer.Reply = { request in
            let query = CraftedWire.query(of: request)
            func wire(_ body: [UInt8]) -> LocalHTTPServer.Reply {
                .respond(status: 200, contentType: "application/dns-message", body: body)
            }
            let good = CraftedWire.response(to: query, a: [[192, 0, 2, 1]])
            switch behaviour {
            case "garbage": return wire(Array("this is not a DNS message".utf8))
            case "truncated": return wire(Array(good.prefix(20)))
            case "wrong question":
                let other = (try? DNSWireMessage.query(for: HostName("evil.test"), type: .a)) ?? []
                return wire(CraftedWire.response(to: other, a: [[192, 0, 2, 66]]))
            case "wrong id": return wire(CraftedWire.response(to: query, a: [[192, 0, 2, 1]], id: 0x1234))
            case "wrong type", "other case":
                // The same name asked for AAAA (type 28, the query's last four bytes are type and class); or the
                // same question in upper case but for AAAA: both are another question, whatever the case.
                var other = query
                other[other.count - 3] = 28
                if behaviour == "other case" {
                    for index in 12..<(other.count - 4) where (97...122).contains(other[index]) { other[index] -= 32 }
                }
                return wire(CraftedWire.response(to: other, a: [[192, 0, 2, 1]]))
            case "servfail": return wire(CraftedWire.response(to: query, rcode: 2))
            case "oversized": return wire([UInt8](repeating: 0, count: 100_000))
            case "oversized chunked":
                return .respond(
                    status: 200, contentType: "application/dns-message", body: [UInt8](repeating: 0, count: 100_000),
                    declareLength: false)
            case "stall": return .stall
            case "5xx": return .respond(status: 503, contentType: "text/plain", body: Array("busy".utf8))
            case "html": return .respond(status: 200, contentType: "text/html", body: good)
            case "hang up": return .hangUp
            case "query echoed": return wire(query)
            case "tc":
                var truncated = good
                truncated[2] |= 0x02
                return wire(truncated)
            default: return .text("", status: 500)
            }
        }
        // The stalling case must hit the time limit; every other case must not, even on a loaded machine (the whole
        // suite runs at once on 2 cores), so it gets a limit far beyond what an answer takes.
        let timeout = behaviour == "stall" ? Duration.seconds(2) : TestTiming.scaled(.seconds(30))
        try await Self.withServer(timeout: timeout, handler) { server, transport in
            for method in HTTPDNSResolver.API.DoHMethod.allCases {
                let doh = try Self.resolver(
                    .dnsMessage(method: method), server.url + "/dns-query", transport: transport)
                let error = await expectDNSError(code) {
                    try await doh.resolve(try HostName("multi.test"), family: .ipv4)
                }
                #expect(error?.host == "multi.test")
                #expect(error?.servers.isEmpty == false)
            }
        }
    }

    @Test("a well-formed crafted answer parses, which shows the hostile cases fail for their own reason")
    func craftedControl() async throws {
        try await Self.withServer({ request in
            .respond(
                status: 200, contentType: "application/dns-message",
                body: CraftedWire.response(
                    to: CraftedWire.query(of: request), a: [[192, 0, 2, 1], [192, 0, 2, 2]], ttl: 77))
        }) { server, transport in
            let doh = try Self.resolver(.dnsMessage(method: .post), server.url, transport: transport)
            let answer = try await doh.resolve(try HostName("multi.test"), family: .ipv4)
            #expect(answer.addresses.map { "\($0.ip) \($0.ttl)" } == ["192.0.2.1 77", "192.0.2.2 77"])
        }
    }

    // MARK: JSON DNS API

    @Test("the JSON API: addresses, TTLs along a CNAME chain, NXDOMAIN, no data")
    func json() async throws {
        try await Self.withServer(FakeHTTPDNS.dnsJSON()) { server, transport in
            let json = try Self.resolver(.dnsJSON, server.url + "/resolve", transport: transport)
            let any = try await json.resolve(try HostName("multi.test"), family: .any)
            #expect(Self.ips(any) == Set(TestZone.multiV4 + TestZone.multiV6))
            #expect(any.addresses.allSatisfy { $0.ttl == 300 && $0.source.name == "doh-json" })
            let alias = try await json.resolve(try HostName("alias.test"), family: .ipv6)
            #expect(Self.ips(alias) == Set(TestZone.multiV6))
            #expect(alias.addresses.allSatisfy { $0.ttl == 60 }, "the CNAME's TTL caps the chain")
            await expectDNSError(.notFound) { try await json.resolve(try HostName("nope.test"), family: .any) }
            await expectDNSError(.noData) { try await json.resolve(try HostName("v4only.test"), family: .ipv6) }
            await expectDNSError(.privateAddress) {
                try await json.resolve(try HostName("private.test"), family: .ipv4)
            }
        }
    }

    @Test(
        "JSON answers that do not fit the schema are badResponse or questionMismatch",
        arguments: [
            ("{}", HTTPDNSError.Code.badResponse),
            ("[1,2]", .badResponse),
            ("{\"Status\":\"0\"}", .badResponse),
            (
                "{\"Status\":0,\"Answer\":[{\"name\":\"multi.test.\",\"type\":1,\"TTL\":5,\"data\":\"not-an-ip\"}]}",
                .badResponse
            ),
            (
                "{\"Status\":0,\"Answer\":[{\"name\":\"multi.test.\",\"type\":1,\"TTL\":-5,\"data\":\"192.0.2.1\"}]}",
                .badResponse
            ),
            ("{\"Status\":0,\"Question\":[{\"name\":\"evil.test.\",\"type\":1}]}", .questionMismatch),
            (
                "{\"Status\":0,\"Answer\":[{\"name\":\"other.test.\",\"type\":1,\"TTL\":5,\"data\":\"192.0.2.1\"}]}",
                .noData
            ),
            ("{\"Status\":2}", .serverFailure),
            ("{\"Status\":0,\"TC\":true}", .badResponse),
            (String(repeating: "[", count: 100_000), .badResponse),
        ])
    func jsonMalformed(body: String, code: HTTPDNSError.Code) throws {
        #expect(throws: HTTPDNSError.self) {
            try DoHJSONAnswer.addresses(in: Array(body.utf8), for: HostName("multi.test"), type: .a, source: "t")
        }
        do {
            _ = try DoHJSONAnswer.addresses(in: Array(body.utf8), for: HostName("multi.test"), type: .a, source: "t")
        } catch {
            #expect(error.code == code, "\(error)")
        }
    }

    // MARK: Alibaba-style HTTPDNS

    @Test("the MD5 signature matches the documented test vector")
    func signatureVector() {
        #expect(
            AlibabaHTTPDNS.signature(host: "www.aliyun.com", secret: "IAmASecret", expiry: 1_534_316_400)
                == "60c71e98b6d7fcbb366243e224eab457"
        )
        let suffix = AlibabaHTTPDNS.suffix(
            account: "100000", host: try! HostName("www.aliyun.com"), family: .ipv4,
            signing: (HTTPDNSSecret("IAmASecret"), 1_534_316_400))
        #expect(suffix == "/100000/sign_d?host=www.aliyun.com&t=1534316400&s=60c71e98b6d7fcbb366243e224eab457")
    }

    @Test("Alibaba-style unsigned and signed lookups, both families, empty ips as no data")
    func alibaba() async throws {
        try await Self.withServer(FakeHTTPDNS.alibaba(account: "139450", secret: "s3cr3t-key")) { server, transport in
            let unsigned = try Self.resolver(.alibaba(account: "139450"), server.url, transport: transport)
            let v4 = try await unsigned.resolve(try HostName("multi.test"), family: .ipv4)
            #expect(Self.ips(v4) == Set(TestZone.multiV4))
            #expect(v4.addresses.allSatisfy { $0.ttl == 300 && $0.source.name == "alibaba" })

            let signed = try Self.resolver(
                .alibaba(account: "139450", secret: HTTPDNSSecret("s3cr3t-key")), server.url, transport: transport)
            let any = try await signed.resolve(try HostName("multi.test"), family: .any)
            #expect(Self.ips(any) == Set(TestZone.multiV4 + TestZone.multiV6))
            let v6 = try await signed.resolve(try HostName("v6only.test"), family: .ipv6)
            #expect(v6.addresses.map { "\($0.ip) \($0.ttl)" } == ["2001:db8::10 45"])
            await expectDNSError(.noData) { try await signed.resolve(try HostName("v6only.test"), family: .ipv4) }
            await expectDNSError(.noData) { try await signed.resolve(try HostName("nope.test"), family: .any) }
            await expectDNSError(.privateAddress) {
                try await signed.resolve(try HostName("private.test"), family: .ipv4)
            }
        }
    }

    @Test("Alibaba-style signature errors are typed, and the secret never reaches the logs")
    func alibabaSignatureErrors() async throws {
        try await Self.withServer(FakeHTTPDNS.alibaba(account: "139450", secret: "s3cr3t-key")) { server, transport in
            let store = LogStore()
            let logger = Logger(label: "test", factory: { _ in RecordingLogHandler(store: store) })
            let wrong = try Self.resolver(
                .alibaba(account: "139450", secret: HTTPDNSSecret("not-the-secret")), server.url,
                transport: transport, logger: logger)
            await expectDNSError(.invalidSignature) {
                try await wrong.resolve(try HostName("multi.test"), family: .ipv4)
            }

            // A clock an hour behind makes the signature expire before it is sent.
            let late = try Self.resolver(
                .alibaba(account: "139450", secret: HTTPDNSSecret("s3cr3t-key"), signatureLifetime: .seconds(60)),
                server.url, transport: transport, logger: logger,
                now: { Int64(Date().timeIntervalSince1970) - 3600 })
            await expectDNSError(.signatureExpired) {
                try await late.resolve(try HostName("multi.test"), family: .ipv4)
            }

            let otherAccount = try Self.resolver(
                .alibaba(account: "999"), server.url, transport: transport, logger: logger)
            let error = await expectDNSError(.httpStatus) {
                try await otherAccount.resolve(try HostName("multi.test"), family: .ipv4)
            }
            #expect(error?.message.contains("InvalidAccount") == true)

            #expect(store.lines.withLock { !$0.isEmpty }, "failures are logged at debug level")
            let secretSeen = store.lines.withLock {
                $0.contains { $0.contains("not-the-secret") || $0.contains("s3cr3t-key") }
            }
            #expect(!secretSeen)
            #expect("\(HTTPDNSSecret("s3cr3t-key"))" == "<redacted>")
            #expect(String(reflecting: HTTPDNSSecret("s3cr3t-key")) == "<redacted>")
            // Reflection never reaches the value, neither on the secret nor on a configuration holding it.
            var dumped = ""
            dump(HTTPDNSSecret("s3cr3t-key"), to: &dumped)
            dump(HTTPDNSResolver.API.alibaba(account: "139450", secret: HTTPDNSSecret("s3cr3t-key")), to: &dumped)
            #expect(!dumped.contains("s3cr3t-key"), "\(dumped)")
            #expect(dumped.contains("<redacted>"))
            #expect(Mirror(reflecting: HTTPDNSSecret("s3cr3t-key")).children.isEmpty)
        }
    }

    // MARK: Tencent DNSPod-style HTTPDNS

    @Test("Tencent-style plain and AES lookups for each family")
    func tencent() async throws {
        try await Self.withServer(FakeHTTPDNS.tencent()) { server, transport in
            let plain = try Self.resolver(.tencent(), server.url, transport: transport)
            let any = try await plain.resolve(try HostName("multi.test"), family: .any)
            #expect(Self.ips(any) == Set(TestZone.multiV4 + TestZone.multiV6))
            #expect(any.addresses.allSatisfy { $0.ttl == 300 && $0.source.name == "tencent" })
            let v6 = try await plain.resolve(try HostName("v6only.test"), family: .ipv6)
            #expect(v6.addresses.map { "\($0.ip) \($0.ttl)" } == ["2001:db8::10 45"])
            let v6any = try await plain.resolve(try HostName("v6only.test"), family: .any)
            #expect(Self.ips(v6any) == ["2001:db8::10"])
            await expectDNSError(.noData) { try await plain.resolve(try HostName("nope.test"), family: .ipv4) }
            await expectDNSError(.noData) { try await plain.resolve(try HostName("nope.test"), family: .any) }
        }
        let key = "0123456789abcdef"
        try await Self.withServer(FakeHTTPDNS.tencent(account: "8800", key: key)) { server, transport in
            let aes = try Self.resolver(
                .tencent(account: "8800", key: HTTPDNSSecret(key)), server.url, transport: transport)
            let any = try await aes.resolve(try HostName("multi.test"), family: .any)
            #expect(Self.ips(any) == Set(TestZone.multiV4 + TestZone.multiV6))
            let wrongKey = try Self.resolver(
                .tencent(account: "8800", key: HTTPDNSSecret("fedcba9876543210")), server.url, transport: transport)
            // The server cannot decrypt the name and answers with an HTTP error; about once in 256 tries (random IV)
            // the wrong key still yields valid padding, the server answers, and the client cannot decrypt the answer.
            do {
                _ = try await wrongKey.resolve(try HostName("multi.test"), family: .ipv4)
                Issue.record("a wrong key resolved")
            } catch let error as HTTPDNSError {
                #expect([HTTPDNSError.Code.httpStatus, .decryptionFailed].contains(error.code), "\(error)")
            }
        }
    }

    @Test(
        "Tencent-style text answers",
        arguments: [
            ("192.0.2.1;192.0.2.2,60", AddressFamily.ipv4, ["192.0.2.1 60", "192.0.2.2 60"]),
            ("192.0.2.1,60|203.0.113.9", .ipv4, ["192.0.2.1 60"]),
            ("2001:db8::1,30", .ipv6, ["2001:db8::1 30"]),
            ("192.0.2.1,60-2001:db8::1;2001:db8::2,30", .any, ["192.0.2.1 60", "2001:db8::1 30", "2001:db8::2 30"]),
            ("0-2001:db8::1,30", .any, ["2001:db8::1 30"]),
            ("192.0.2.1,60-0", .any, ["192.0.2.1 60"]),
            ("  192.0.2.1,60\n", .ipv4, ["192.0.2.1 60"]),
        ])
    func tencentText(text: String, family: AddressFamily, expected: [String]) throws {
        let addresses = try TencentHTTPDNS.addresses(
            status: 200, body: Array(text.utf8), for: HostName("a.test"), family: family, key: nil, source: "t")
        #expect(addresses.map { "\($0.ip) \($0.ttl)" } == expected)
    }

    @Test(
        "Tencent-style malformed or empty answers",
        arguments: [
            ("", HTTPDNSError.Code.noData), ("0", .noData), ("0|203.0.113.1", .noData), ("0-0", .badResponse),
            ("192.0.2.1", .badResponse),
            ("192.0.2.1,abc", .badResponse), ("2001:db8::1,60", .badResponse), ("x;y,5", .badResponse),
            ("1.2.3.4,5-6.7.8.9,5-1", .badResponse), ("<html>busy</html>", .badResponse),
        ])
    func tencentMalformed(text: String, code: HTTPDNSError.Code) {
        do {
            _ = try TencentHTTPDNS.addresses(
                status: 200, body: Array(text.utf8), for: try HostName("a.test"), family: .ipv4, key: nil, source: "t")
            Issue.record("expected \(code)")
        } catch {
            #expect(error.code == code, "\(error)")
        }
    }

    @Test("AES answers round-trip; a wrong key never decrypts, a corrupt body is decryptionFailed")
    func tencentAES() throws {
        let key = SymmetricKeyFixture.key("0123456789abcdef")
        let sealed = try TencentHTTPDNS.encrypt(Array("192.0.2.1,60".utf8), key: key)
        #expect(sealed.count == 32)
        #expect(try TencentHTTPDNS.decrypt(sealed, key: key) == Array("192.0.2.1,60".utf8))
        // CBC has no integrity check: a wrong key fails on the padding most of the time, and otherwise yields
        // garbage that the text parser rejects; it never yields the plaintext.
        let wrong = try? TencentHTTPDNS.decrypt(sealed, key: SymmetricKeyFixture.key("fedcba9876543210"))
        #expect(wrong != Array("192.0.2.1,60".utf8))
        #expect(throws: HTTPDNSError.self) { try TencentHTTPDNS.decrypt(Array(sealed.prefix(20)), key: key) }
        do {
            _ = try TencentHTTPDNS.addresses(
                status: 200, body: Array("zz".utf8), for: try HostName("a.test"), family: .ipv4, key: key, source: "t")
            Issue.record("expected decryptionFailed")
        } catch {
            #expect(error.code == .decryptionFailed)
        }
    }

    // MARK: Configuration

    @Test(
        "endpoints and providers reject bad configuration",
        arguments: [
            "ftp://dns.example/x", "https://user:pw@dns.example/", "https://dns.example/q?x=1", "https:///path",
            "https://bad..name/", "https://dns.example:99999/",
        ])
    func badEndpoints(url: String) {
        #expect(throws: HTTPDNSError.self) { try HTTPDNSEndpoint(url) }
    }

    @Test("endpoint URLs normalise, and bootstrap IPs need a host name")
    func endpoints() async throws {
        #expect(try HTTPDNSEndpoint("dns.example/dns-query/").url == "https://dns.example/dns-query")
        #expect(try HTTPDNSEndpoint("HTTP://DNS.example:80").url == "http://dns.example")
        #expect(try HTTPDNSEndpoint("https://[2001:db8::53]:8443/q").url == "https://[2001:db8::53]:8443/q")
        #expect(throws: HTTPDNSError.self) {
            try HTTPDNSEndpoint("https://192.0.2.53/", bootstrapAddresses: [IPAddress("192.0.2.1")!])
        }
        let transport = try HTTPDNSTransport()
        try await withCleanup { () async throws in
            let endpoint = try HTTPDNSEndpoint("https://dns.example")
            #expect(throws: HTTPDNSError.self) {
                try HTTPDNSResolver(
                    configuration: .init(api: .alibaba(account: "../x"), endpoints: [endpoint]), transport: transport)
            }
            #expect(throws: HTTPDNSError.self) {
                try HTTPDNSResolver(
                    configuration: .init(api: .tencent(key: HTTPDNSSecret("0123456789abcdef")), endpoints: [endpoint]),
                    transport: transport)
            }
            #expect(throws: HTTPDNSError.self) {
                try HTTPDNSResolver(
                    configuration: .init(
                        api: .tencent(account: "1", key: HTTPDNSSecret("short")), endpoints: [endpoint]),
                    transport: transport)
            }
            #expect(throws: HTTPDNSError.self) {
                try HTTPDNSResolver(configuration: .init(api: .dnsMessage(), endpoints: []), transport: transport)
            }
            #expect(throws: HTTPDNSError.self) {
                try HTTPDNSTransport(configuration: .init(additionalTrustRoots: ["/nonexistent.pem"]))
            }
        } cleanup: {
            await transport.shutdown()
        }
    }

    @Test(
        "address scopes for the private-address guard",
        arguments: [
            ("10.1.2.3", AddressScope.privateNetwork), ("172.16.0.1", .privateNetwork), ("172.32.0.1", .global),
            ("192.168.1.1", .privateNetwork), ("100.64.0.1", .privateNetwork), ("127.0.0.1", .loopback),
            ("169.254.1.1", .linkLocal), ("0.0.0.0", .unspecified), ("224.0.0.1", .multicast),
            ("255.255.255.255", .multicast), ("192.0.2.1", .global), ("8.8.8.8", .global), ("::1", .loopback),
            ("::", .unspecified), ("fd00::1", .privateNetwork), ("fe80::1", .linkLocal), ("ff02::1", .multicast),
            ("::ffff:10.0.0.1", .privateNetwork), ("::ffff:192.0.2.1", .global), ("2001:db8::1", .global),
        ])
    func scopes(text: String, scope: AddressScope) throws {
        #expect(try #require(IPAddress(text)).scope == scope)
    }

    @Test("base64url without padding")
    func base64URL() {
        #expect(HTTPDNSResolver.base64URL([0xfb, 0xff]) == "-_8")
        #expect(HTTPDNSResolver.base64URL([0, 0, 1]) == "AAAB")
        #expect(HTTPDNSResolver.base64URL([]) == "")
        var rng = SeededGenerator(state: 4648)
        for length in 0..<64 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let expected = Data(bytes).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            #expect(HTTPDNSResolver.base64URL(bytes) == expected, "length \(length)")
        }
    }

    @Test("content types compare by media type")
    func mediaTypes() {
        #expect(HTTPDNSResolver.mediaType(" Application/DNS-Message ; charset=x") == "application/dns-message")
        #expect(HTTPDNSResolver.mediaType("application/dns-message") == "application/dns-message")
        #expect(HTTPDNSResolver.mediaType(nil) == nil)
        #expect(HTTPDNSResolver.mediaType("") == "")
    }
}

/// Keys for the AES tests.
enum SymmetricKeyFixture {
    static func key(_ text: String) -> SymmetricKey { SymmetricKey(data: Array(text.utf8)) }
}
