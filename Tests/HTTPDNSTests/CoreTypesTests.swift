import Testing

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore

@Suite("Host names")
struct HostNameTests {
    @Test(
        "valid names are normalised",
        arguments: [
            ("Example.COM", "example.com"),
            ("api.example.com.", "api.example.com"),
            ("a", "a"),
            ("_dmarc.example.com", "_dmarc.example.com"),
            ("xn--bcher-kva.example", "xn--bcher-kva.example"),
            (String(repeating: "a", count: 63) + ".com", String(repeating: "a", count: 63) + ".com"),
        ]
    )
    func valid(input: String, expected: String) throws {
        #expect(try HostName(input).name == expected)
    }

    @Test(
        "malformed names are rejected with badName",
        arguments: [
            "", ".", "..", "a..b", ".a", "a.b..", String(repeating: "a", count: 64) + ".com",
            Array(repeating: String(repeating: "a", count: 63), count: 4).joined(separator: "."),
            "a b", "a\tb", "a\0b", "a\u{7F}b", "bücher.example", "a/b", "a:b", "a@b", "*.example.com", "a,b",
        ]
    )
    func invalid(input: String) {
        #expect {
            try HostName(input)
        } throws: { error in
            (error as? HTTPDNSError)?.code == .badName
        }
    }

    @Test("a 253-byte name is the longest accepted")
    func lengthLimit() throws {
        let label = String(repeating: "a", count: 62)
        let name253 = [label + "a", label + "a", label + "a", String(repeating: "b", count: 61)].joined(separator: ".")
        #expect(name253.utf8.count == 253)
        #expect(try HostName(name253).name == name253)
        #expect(throws: HTTPDNSError.self) { try HostName(name253 + "c") }
    }

    @Test("error messages escape control characters")
    func printableMessages() {
        do {
            _ = try HostName("evil\u{1B}[31m")
            Issue.record("expected an error")
        } catch {
            #expect(!error.message.contains("\u{1B}"))
            #expect(error.host?.contains("\\u{1b}") == true)
        }
    }

    @Test("localhost and names under .localhost are recognised")
    func localhost() throws {
        #expect(try HostName("localhost").isLocalhost)
        #expect(try HostName("api.LOCALHOST.").isLocalhost)
        #expect(try !HostName("localhost.example").isLocalhost)
    }
}

@Suite("IP addresses")
struct IPAddressTests {
    @Test(
        "literals round-trip to their canonical form",
        arguments: [
            ("192.0.2.1", "192.0.2.1", AddressFamily.ipv4),
            ("0.0.0.0", "0.0.0.0", .ipv4),
            ("255.255.255.255", "255.255.255.255", .ipv4),
            ("2001:DB8:0:0:0:0:0:1", "2001:db8::1", .ipv6),
            ("[2001:db8::1]", "2001:db8::1", .ipv6),
            ("::1", "::1", .ipv6),
            ("::ffff:192.0.2.1", "::ffff:192.0.2.1", .ipv6),
        ]
    )
    func roundTrip(input: String, canonical: String, family: AddressFamily) throws {
        let ip = try #require(IPAddress(input))
        #expect(ip.description == canonical)
        #expect(ip.family == family)
        #expect(IPAddress(bytes: ip.bytes) == ip)
    }

    @Test(
        "non-literals are rejected",
        arguments: [
            "", "1.2.3", "1.2.3.4.5", "256.1.1.1", "01.2.3.4", "1.2.3.4 ", "example.com", "fe80::1%eth0",
            "[1.2.3.4]", "[::1", "::1]", ":::", "1::2::3",
        ]
    )
    func invalid(input: String) {
        #expect(IPAddress(input) == nil)
    }

    @Test("IPv6 URL hosts are bracketed")
    func urlHost() throws {
        #expect(try #require(IPAddress("2001:db8::1")).urlHost == "[2001:db8::1]")
        #expect(IPAddress(ipv4: 10, 0, 0, 1).urlHost == "10.0.0.1")
    }

    @Test("IPv4 sorts before IPv6, then numerically")
    func ordering() throws {
        let list = try ["2001:db8::2", "10.0.0.2", "2001:db8::1", "9.255.0.0"].map { try #require(IPAddress($0)) }
        #expect(list.sorted().map(\.description) == ["9.255.0.0", "10.0.0.2", "2001:db8::1", "2001:db8::2"])
    }
}

@Suite("Server addresses")
struct ServerAddressTests {
    @Test(
        "IP[:PORT] and [IPv6]:PORT forms parse",
        arguments: [
            ("127.0.0.1", "127.0.0.1:53"),
            ("127.0.0.1:5353", "127.0.0.1:5353"),
            ("::1", "[::1]:53"),
            ("[::1]", "[::1]:53"),
            ("[2001:db8::1]:853", "[2001:db8::1]:853"),
        ]
    )
    func valid(input: String, expected: String) throws {
        #expect(try ServerAddress(parsing: input).description == expected)
    }

    @Test(
        "bad server strings give invalidServer",
        arguments: [
            "", "dns.example", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:x", "[::1]x",
            "[::1]:", "[::1", "1.2.3.4:5:6",
        ]
    )
    func invalid(input: String) {
        #expect {
            try ServerAddress(parsing: input)
        } throws: { error in
            (error as? HTTPDNSError)?.code == .invalidServer
        }
    }
}
