import Foundation
import Glibc
import Logging
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore
@testable import HTTPDNSServer

/// Plain DNS (UDP and TCP) and DNS over TLS from the same service: kdig over each, pipelining and out-of-order
/// answers over TCP, truncation and the amplification bound over UDP, what malformed and hostile senders get.
@Suite("HTTP DNS server: plain DNS and DNS over TLS")
struct DNSTransportTests {
    static let logger = Logger(label: "dns-transport-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    /// A server with HTTP, plain DNS and DoT on port 0: `fast.test` is 127.0.0.5, `big.test` has 40 addresses, and
    /// `slow.test` comes from an upstream that answers after `slowDelay`.
    struct Served {
        let certificates: TestCertificates
        let resolver: HostResolver
        let server: HTTPDNSServer
        var dnsPort: Int { server.dnsPort ?? 0 }
        var dotPort: Int { server.dotPort ?? 0 }

        static func start(
            configuration: HTTPDNSService.Configuration = .init(maximumAnswers: 64),
            writeTimeout: Duration = .seconds(10)
        ) async throws -> Served {
            let certificates = try TestCertificates()
            let leaf = try certificates.leaf(for: "dot.test", ip: "127.0.0.1")
            let overrides = HostOverrides()
            overrides.set([IPAddress(ipv4: 127, 0, 0, 5)], for: try HostPattern("fast.test"))
            overrides.set((1...40).map { IPAddress(ipv4: 192, 0, 2, UInt8($0)) }, for: try HostPattern("big.test"))
            // What dnsdist's health check asks for (a SERVFAIL would mark the server down).
            overrides.set([IPAddress(ipv4: 192, 0, 2, 1)], for: try HostPattern("multi.test"))
            overrides.set([IPAddress(ipv4: 192, 0, 2, 99)], for: try HostPattern(DNSTransportTests.longName))
            let resolver = HostResolver(upstreams: [], overrides: overrides, cache: HostCache(), prober: nil)
            let service = HTTPDNSService(resolver: resolver, configuration: configuration, logger: logger)
            let any = try #require(IPAddress("127.0.0.1"))
            let server = try await HTTPDNSServer.start(
                service: service,
                configuration: .init(
                    port: 0, certificatePath: leaf.certificatePath, privateKeyPath: leaf.keyPath,
                    idleTimeout: .seconds(5), handshakeTimeout: TestTiming.scaled(.seconds(3)),
                    requestHeadTimeout: TestTiming.scaled(.seconds(2)),
                    writeTimeout: writeTimeout,
                    dnsListen: ServerAddress(ip: any, port: 0), dotListen: ServerAddress(ip: any, port: 0)),
                logger: logger)
            return Served(certificates: certificates, resolver: resolver, server: server)
        }

        func stop() async {
            await server.shutdown(grace: .milliseconds(100))
            await resolver.shutdown()
            certificates.remove()
        }
    }

    static func query(_ name: String, type: UInt16 = 1, id: UInt16, edns: UInt16? = nil) -> [UInt8] {
        var message = ServedNamesTests.message(
            labels: name.split(separator: ".").map(String.init), type: type,
            additional: edns.map { [0, 0, 41, UInt8($0 >> 8), UInt8($0 & 0xFF), 0, 0, 0, 0, 0, 0] } ?? [])
        message[0] = UInt8(id >> 8)
        message[1] = UInt8(id & 0xFF)
        return message
    }

    /// The answer's A records (the ID and the question's case set aside).
    static func addresses(_ answer: [UInt8], _ name: String) throws -> [String] {
        var body = answer
        if body.count >= 2 { (body[0], body[1]) = (0, 0) }
        return try DNSWireMessage.addresses(in: body, for: try HostName(name), type: .a, source: "test")
            .map(\.ip.description)
    }

    /// One UDP exchange from a socket of its own, bound to `source` (a loopback address: the client's network);
    /// `nil` when nothing comes back within `wait`.
    static func udp(
        _ port: Int, _ datagram: [UInt8], from source: String = "127.0.0.1",
        wait: Duration = TestTiming.scaled(.seconds(3))
    ) async throws -> [UInt8]? {
        try await offThePool {
            let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            precondition(fd >= 0)
            defer { close(fd) }
            var timeout = timeval(
                tv_sec: Int(wait.components.seconds), tv_usec: Int(wait.components.attoseconds / 1_000_000_000_000))
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr(source)
            let bound = withUnsafePointer(to: &local) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            precondition(bound == 0, "cannot bind \(source)")
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let sent = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, datagram, datagram.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            precondition(sent == datagram.count)
            var buffer = [UInt8](repeating: 0, count: 65_536)
            let count = recv(fd, &buffer, buffer.count, 0)
            return count > 0 ? Array(buffer[0..<count]) : nil
        }
    }

    @Test("kdig gets the address over UDP, TCP and TLS (certificate checked for the server's name)")
    func kdigOverEachTransport() async throws {
        let served = try await Served.start()
        let transports: [(String, [String])] = [
            ("udp", ["-p", "\(served.dnsPort)", "+notcp"]),
            ("tcp", ["-p", "\(served.dnsPort)", "+tcp"]),
            (
                "tls",
                [
                    "-p", "\(served.dotPort)", "+tls-ca=\(served.certificates.caPath)", "+tls-hostname=dot.test",
                ]
            ),
        ]
        for (name, options) in transports {
            let (status, output) = try await InteropTests.run(
                "/usr/bin/kdig", ["@127.0.0.1"] + options + ["+timeout=20", "+retry=1", "fast.test", "A"])
            #expect(status == 0, "\(name): \(output)")
            #expect(output.contains("127.0.0.5") && output.contains("NOERROR"), "kdig over \(name): \(output)")
        }
        // A certificate for another name is refused by the client: nothing is weakened.
        let (_, wrongName) = try await InteropTests.run(
            "/usr/bin/kdig",
            [
                "@127.0.0.1", "-p", "\(served.dotPort)", "+tls-ca=\(served.certificates.caPath)",
                "+tls-hostname=other.test", "+timeout=5", "+retry=0", "fast.test", "A",
            ])
        #expect(!wrongName.contains("127.0.0.5"), "\(wrongName)")
        await served.stop()
    }

    @Test(
        "kdig's DNS cookies: the server answers a client cookie with a server cookie, and kdig sending both back is answered past a UDP rate limit of one query"
    )
    func kdigCookies() async throws {
        let served = try await Served.start(
            configuration: .init(maximumAnswers: 64, udpRateLimitPerSecond: 0.01, udpRateLimitBurst: 1))
        let client = "0102030405060708"
        let (status, first) = try await InteropTests.run(
            "/usr/bin/kdig",
            [
                "@127.0.0.1", "-p", "\(served.dnsPort)", "+notcp", "+cookie=\(client)", "+timeout=5", "+retry=0",
                "fast.test",
            ])
        #expect(status == 0 && first.contains("127.0.0.5"), "\(first)")
        // kdig prints the cookie it got back: the client cookie and a 16-byte server cookie, in hex.
        let lines = first.split(separator: "\n").map(String.init)
        let line = try #require(lines.first { $0.contains("COOKIE:") }, "\(first)")
        let words = line.split(separator: " ").map(String.init)
        let cookie = try #require(words.first { $0.count == 48 }, "\(line)")
        #expect(cookie.lowercased().hasPrefix(client))
        // Over its one-query UDP allowance, with the cookie: verified, so answered each time.
        for _ in 0..<3 {
            let (again, output) = try await InteropTests.run(
                "/usr/bin/kdig",
                [
                    "@127.0.0.1", "-p", "\(served.dnsPort)", "+notcp", "+cookie=\(cookie)", "+timeout=2", "+retry=0",
                    "fast.test",
                ])
            #expect(again == 0 && output.contains("127.0.0.5"), "\(output)")
        }
        // Without a cookie the same client is over its rate: nothing, or a TC answer one time in two.
        let (_, plain) = try await InteropTests.run(
            "/usr/bin/kdig",
            [
                "@127.0.0.1", "-p", "\(served.dnsPort)", "+notcp", "+nocookie", "+timeout=1", "+retry=0", "+ignore",
                "fast.test",
            ])
        #expect(!plain.contains("127.0.0.5"), "\(plain)")
        await served.stop()
    }

    @Test("stubby, a real DNS-over-TLS stub, resolves through the DoT listener with the certificate checked")
    func stubby() async throws {
        let served = try await Served.start()
        // stubby takes its port for UDP and TCP: one that is taken for TCP makes it exit, and another is tried.
        var started: (port: UInt16, process: ChildProcess)?
        for _ in 0..<5 where started == nil {
            let port = try FreePort.udp()
            let config = TemporaryFiles.path("stubby.yml")
            try """
            resolution_type: GETDNS_RESOLUTION_STUB
            dns_transport_list:
              - GETDNS_TRANSPORT_TLS
            tls_authentication: GETDNS_AUTHENTICATION_REQUIRED
            tls_query_padding_blocksize: 128
            edns_client_subnet_private: 1
            idle_timeout: 10000
            timeout: 5000
            listen_addresses:
              - 127.0.0.1@\(port)
            tls_ca_file: "\(served.certificates.caPath)"
            upstream_recursive_servers:
              - address_data: 127.0.0.1
                tls_port: \(served.dotPort)
                tls_auth_name: "dot.test"

            """.write(toFile: config, atomically: true, encoding: .utf8)
            let process = try ChildProcess(
                path: "/usr/bin/stubby", arguments: ["-C", config], logPath: TemporaryFiles.path("stubby.log"))
            try await Task.sleep(for: .milliseconds(300))
            if process.isRunning { started = (port, process) } else { process.stop() }
        }
        let (port, stubby) = try #require(started, "stubby did not start")
        defer { stubby.stop() }
        var output = ""
        for _ in 0..<Int(20 * TestTiming.scale) where !output.contains("127.0.0.5") {
            output = try await InteropTests.run(
                "/usr/bin/kdig", ["@127.0.0.1", "-p", "\(port)", "+notcp", "+timeout=2", "+retry=0", "fast.test", "A"]
            ).output
            if !output.contains("127.0.0.5") { try await Task.sleep(for: .milliseconds(250)) }
        }
        #expect(output.contains("127.0.0.5"), "kdig through stubby: \(output)")
        await served.stop()
    }

    @Test("dnsdist forwards to the plain DNS listener and relays its answers")
    func dnsdistForwards() async throws {
        let served = try await Served.start()
        let any = try #require(IPAddress("127.0.0.1"))
        let dnsdist = try await DNSDist.start(backend: ServerAddress(ip: any, port: UInt16(served.dnsPort)))
        defer { dnsdist.stop() }
        for transport in ["+notcp", "+tcp"] {
            let (status, output) = try await InteropTests.run(
                "/usr/bin/kdig",
                ["@127.0.0.1", "-p", "\(dnsdist.dnsPort)", transport, "+timeout=10", "+retry=1", "fast.test", "A"])
            #expect(status == 0 && output.contains("127.0.0.5"), "kdig through dnsdist \(transport): \(output)")
        }
        await served.stop()
    }

    @Test("TCP: queries pipelined in one write are each answered, with their own IDs, on one connection")
    func tcpPipelining() async throws {
        let served = try await Served.start()
        let ids: [UInt16] = [0x1111, 0x2222, 0x3333, 0x4444]
        let burst = ids.flatMap { id in
            let message = Self.query(id == 0x3333 ? "big.test" : "fast.test", id: id)
            return [UInt8(message.count >> 8), UInt8(message.count & 0xFF)] + message
        }
        let answers = try await offThePool { () throws -> [[UInt8]] in
            let fd = try LoopbackTCP.connect(port: served.dnsPort, receiveTimeout: TestTiming.scaled(.seconds(10)))
            defer { close(fd) }
            _ = burst.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            var received: [UInt8] = []
            var answers: [[UInt8]] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while answers.count < ids.count {
                let count = recv(fd, &buffer, buffer.count, 0)
                if count <= 0 { break }
                received += buffer[0..<count]
                while received.count >= 2, received.count >= 2 + (Int(received[0]) << 8 | Int(received[1])) {
                    let length = Int(received[0]) << 8 | Int(received[1])
                    answers.append(Array(received[2..<2 + length]))
                    received.removeFirst(2 + length)
                }
            }
            return answers
        }
        #expect(Set(answers.map { UInt16($0[0]) << 8 | UInt16($0[1]) }) == Set(ids))
        for answer in answers {
            let id = UInt16(answer[0]) << 8 | UInt16(answer[1])
            if id == 0x3333 {
                #expect(try Self.addresses(answer, "big.test").count == 40, "over TCP the whole answer, no TC")
                #expect(answer[2] & 0x02 == 0)
            } else {
                #expect(try Self.addresses(answer, "fast.test") == ["127.0.0.5"])
            }
        }
        await served.stop()
    }

    /// A name of 200 bytes: with EDNS its query is 228 bytes.
    static let longName =
        (0..<3).map { String(repeating: Character(UnicodeScalar(UInt8(ascii: "a") + $0)), count: 63) }
        .joined(separator: ".") + ".test"

    @Test("UDP: a query longer than 128 bytes is read whole (the listener's vector reads gave each datagram 128)")
    func udpLongQuery() async throws {
        let served = try await Served.start()
        let query = Self.query(Self.longName, id: 11, edns: 1232)
        #expect(query.count > 200)
        let answer = try #require(try await Self.udp(served.dnsPort, query))
        #expect(answer[3] & 0x0F == 0, "NOERROR, not FORMERR")
        #expect(try Self.addresses(answer, Self.longName) == ["192.0.2.99"])
        await served.stop()
    }

    @Test("UDP: an answer over 512 bytes, the client's EDNS size or ten times the query goes out truncated")
    func udpTruncation() async throws {
        let served = try await Served.start()
        // 40 A records are 12 + 14 + 40 × 16 = 666 bytes.
        let plain = try #require(try await Self.udp(served.dnsPort, Self.query("big.test", id: 7)))
        #expect(plain[2] & 0x02 != 0, "TC")
        #expect(plain[6] == 0 && plain[7] == 0, "no answers in a truncated reply")
        #expect(plain.count <= 29 * DNSTransportWire.amplificationFactor)
        // EDNS 4096 lifts the 512-byte limit but not the amplification bound (a 40-byte query: 400 bytes).
        let edns = try #require(try await Self.udp(served.dnsPort, Self.query("big.test", id: 8, edns: 4096)))
        #expect(edns[2] & 0x02 != 0, "still over 10 × the query")
        // A small answer is whole; without EDNS in the query there is none in the answer.
        let small = try #require(try await Self.udp(served.dnsPort, Self.query("fast.test", id: 9)))
        #expect(small[2] & 0x02 == 0)
        #expect(try Self.addresses(small, "fast.test") == ["127.0.0.5"])
        #expect(Array(small.prefix(2)) == [0, 9])
        #expect(small[10] == 0 && small[11] == 0)
        // With EDNS the answer carries an OPT record: version 0, 1,232 bytes, no options, last.
        let withEDNS = try #require(try await Self.udp(served.dnsPort, Self.query("fast.test", id: 10, edns: 4096)))
        #expect(withEDNS[10] == 0 && withEDNS[11] == 1)
        #expect(Array(withEDNS.suffix(11)) == [0, 0, 41, 0x04, 0xD0, 0, 0, 0, 0, 0, 0])
        #expect(try Self.addresses(withEDNS, "fast.test") == ["127.0.0.5"])
        await served.stop()
    }

    @Test(
        "UDP: responses and short datagrams get nothing; a malformed query FORMERR; a rate-limited client nothing but a TC answer every second query (response-rate limiting); its TCP allowance is untouched"
    )
    func udpHostileInput() async throws {
        let served = try await Served.start(configuration: .init(rateLimitPerSecond: 0.001, rateLimitBurst: 3))
        var response = Self.query("fast.test", id: 1)
        response[2] |= 0x80
        #expect(try await Self.udp(served.dnsPort, response, wait: .milliseconds(500)) == nil, "never answered")
        #expect(try await Self.udp(served.dnsPort, [1, 2, 3, 4, 5], wait: .milliseconds(500)) == nil)
        // A header with no question: FORMERR with the ID echoed (from the same client: one of the burst of 3).
        let formerr = try #require(
            try await Self.udp(served.dnsPort, [0xAB, 0xCD, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0]))
        #expect(Array(formerr.prefix(2)) == [0xAB, 0xCD] && formerr[2] & 0x80 != 0 && formerr[3] & 0x0F == 1)
        // The rest of the burst, then a flood from a spoofable source gets no answers, but one in two "slips": the
        // question with TC and no records (no larger than the query), so a real client asks again over TCP.
        var answered = 0
        var slipped = 0
        func count(_ answer: [UInt8]?, query: [UInt8]) {
            guard let answer else { return }
            if answer[2] & 0x02 != 0 {
                slipped += 1
                #expect(answer.count <= query.count && answer[7] == 0, "no records in a slipped answer")
            } else {
                answered += 1
            }
        }
        for id in 2..<4 {
            let query = Self.query("fast.test", id: UInt16(id))
            count(try await Self.udp(served.dnsPort, query), query: query)
        }
        // The 4 past the burst at once, each from a socket of its own (so they reach the listener's sockets as
        // different clients' datagrams would), all waited for together: an answer late under a loaded suite must
        // not count as dropped, and the long wait is paid once.
        let flood = (4..<8).map { Self.query("fast.test", id: UInt16($0)) }
        let answers = try await withThrowingTaskGroup(of: [UInt8]?.self) { group in
            for query in flood {
                group.addTask { try await Self.udp(served.dnsPort, query, wait: TestTiming.scaled(.seconds(8))) }
            }
            return try await group.reduce(into: [[UInt8]?]()) { $0.append($1) }
        }
        for answer in answers { count(answer, query: flood[0]) }
        #expect(answered == 2, "3 in the burst, one of them the FORMERR")
        #expect(slipped == 2, "every second of the 4 rate-limited queries slips")
        // UDP has buckets of its own: the same client over TCP (its source verified) still has its whole burst.
        let overTCP = try await offThePool { () throws -> [UInt8] in
            let fd = try LoopbackTCP.connect(port: served.dnsPort, receiveTimeout: TestTiming.scaled(.seconds(10)))
            defer { close(fd) }
            let query = Self.query("fast.test", id: 99)
            let framed = [UInt8(query.count >> 8), UInt8(query.count & 0xFF)] + query
            _ = framed.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = recv(fd, &buffer, buffer.count, 0)
            return count > 2 ? Array(buffer[2..<count]) : []
        }
        #expect(try Self.addresses(overTCP, "fast.test") == ["127.0.0.5"], "TCP answered despite the UDP flood")
        await served.stop()
    }

    @Test(
        "TCP and TLS: a message that stalls half-way, and a TLS handshake never finished, are cut off by their deadlines"
    )
    func stalledMessages() async throws {
        let served = try await Served.start()
        let message = Self.query("fast.test", id: 1)
        let half = [UInt8(message.count >> 8), UInt8(message.count & 0xFF)] + message.prefix(5)
        for (port, bytes) in [(served.dnsPort, half), (served.dotPort, [0x16, 0x03, 0x01])] {
            let closed = try await offThePool { () throws -> Bool in
                let fd = try LoopbackTCP.connect(port: port, receiveTimeout: TestTiming.scaled(.seconds(20)))
                defer { close(fd) }
                _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                var buffer = [UInt8](repeating: 0, count: 512)
                // The server closes (0, or a reset) well before the receive timeout.
                while true {
                    let count = recv(fd, &buffer, buffer.count, 0)
                    if count > 0 { continue }
                    return count == 0 || errno == ECONNRESET
                }
            }
            #expect(closed, "port \(port)")
        }
        await served.stop()
    }

    @Test("TCP: a client that sends without reading is stopped being read, and others are answered meanwhile")
    func tcpNonReader() async throws {
        let served = try await Served.start(writeTimeout: .seconds(1))
        let message = Self.query("big.test", id: 1)
        let frame = [UInt8(message.count >> 8), UInt8(message.count & 0xFF)] + message
        // A 4 KiB receive buffer that is never read, and 20,000 queries (each answer ~680 bytes: 13 MB unread).
        let fd = try LoopbackTCP.connect(
            port: served.dnsPort, receiveTimeout: .seconds(1), receiveBuffer: 4096, sendTimeout: .seconds(3))
        defer { close(fd) }
        let burst = Array([[UInt8]](repeating: frame, count: 20_000).joined())
        let sent = try await offThePool { () -> Int in
            var sent = 0
            while sent < burst.count {
                let written = burst[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if written <= 0 { break }
                sent += written
            }
            return sent
        }
        #expect(sent > 0)
        // Another client is answered while the first one is held (given time: on a loaded machine the held client's
        // burst can keep the shared event loops busy for a few seconds before back-pressure stops reading it).
        let other = try #require(
            try await Self.udp(served.dnsPort, Self.query("fast.test", id: 2), wait: TestTiming.scaled(.seconds(10))))
        #expect(try Self.addresses(other, "fast.test") == ["127.0.0.5"])
        // The non-reader, which has read nothing, is closed: by the bound on queued answers or the write deadline.
        #expect(
            try await waitUntil { served.server.connectionCount == 0 },
            "the non-reading connection was closed")
        await served.stop()
    }

    @Test(
        "TCP framing: messages come out whole and in order whatever the reads, and what was taken is never kept (a stream of reads ending one byte into the next message holds one message at most)"
    )
    func streamFraming() {
        let message = Self.query("fast.test", id: 1)
        let framed = [UInt8(message.count >> 8), UInt8(message.count & 0xFF)] + message
        var framer = DNSStreamFramer()
        var taken = 0
        // 10,000 messages whose reads each end one byte into the next one.
        var stream: [UInt8] = []
        for _ in 0..<10_000 { stream += framed }
        var position = 0
        var largest = 0
        while position < stream.count {
            let end = min(stream.count, position + (position == 0 ? framed.count + 1 : framed.count))
            framer.append(Array(stream[position..<end]))
            position = end
            while case .message(let out) = framer.next() {
                #expect(out == message)
                taken += 1
            }
            largest = max(largest, framer.storageBytes)
        }
        #expect(taken == 10_000)
        #expect(largest < 4 * framed.count, "the framer held \(largest) bytes of storage")
        // A length shorter than a DNS header ends the stream.
        framer.append([0, 5, 1, 2, 3, 4, 5])
        #expect(framer.next() == .invalid)
    }
}
