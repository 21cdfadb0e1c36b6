import Foundation
import Testing
import TestSupport

@_spi(Benchmarks) @testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore

@Suite("Hosts file parsing")
struct HostsFileTests {
    static func parse(_ text: String) -> HostsFile { HostsFile(parsing: Array(text.utf8), file: "hosts") }

    @Test("addresses, several names, comments, CRLF, tabs, IPv6 and wildcards")
    func goodLines() throws {
        let file = Self.parse(
            "# comment line\r\n"
                + "192.0.2.10\tapi.example.com  API.Example.COM. api # trailing comment\r\n"
                + "\n   \t  \n"
                + "2001:DB8::10 api.example.com\n"
                + "198.51.100.7 *.cdn.example.com\n"
                + "192.0.2.11 api.example.com"
        )
        #expect(file.diagnostics.isEmpty)
        #expect(file.entries.count == 4)
        #expect(file.entries.map(\.line) == [2, 5, 6, 7])
        let table = file.table
        let api = try #require(table.lookup(try HostName("api.example.com")))
        #expect(api.addresses.map(\.description) == ["192.0.2.10", "2001:db8::10", "192.0.2.11"])
        #expect(table.lookup(try HostName("API")) != nil)
        #expect(table.lookup(try HostName("x.cdn.example.com"))?.addresses.map(\.description) == ["198.51.100.7"])
        #expect(table.count == 3)
    }

    @Test(
        "bad lines are reported with line and column and skipped",
        arguments: [
            ("300.1.1.1 a.test", 1, "not an IPv4 or IPv6 address"),
            ("fe80::1%eth0 a.test", 1, "zone identifiers"),
            ("192.0.2.1", 1, "no host name"),
            ("192.0.2.1 a..test", 11, "empty label"),
            ("192.0.2.1 ok.test *bad.test", 19, "invalid wildcard"),
            ("192.0.2.1 a.*.test", 11, "invalid wildcard"),
            ("192.0.2.1 *.", 11, "empty"),
            ("192.0.2.1 a\u{0}b.test", 12, "NUL byte"),
            ("192.0.2.1 a\u{1}b", 12, "control character"),
            ("192.0.2.1 bücher.test", 12, "punycode"),
            ("192.0.2.1 " + String(repeating: "a", count: 64) + ".test", 11, "longer than 63"),
            ("example.com 192.0.2.1", 1, "not an IPv4"),
        ]
    )
    func badLines(line: String, column: Int, message: String) {
        let file = Self.parse("192.0.2.99 first.test\n" + line + "\n192.0.2.98 last.test\n")
        let diagnostic = file.diagnostics.first
        #expect(diagnostic?.line == 2)
        #expect(diagnostic?.column == column)
        #expect(diagnostic?.message.contains(message) == true, "\(String(describing: diagnostic))")
        #expect(diagnostic?.description.hasPrefix("hosts:2:\(column): error: ") == true)
        // The good lines around it still count.
        #expect(file.entries.first?.line == 1)
        #expect(file.entries.last?.line == 3)
    }

    @Test("a line with some bad names keeps the good ones")
    func partialLine() throws {
        let file = Self.parse("192.0.2.1 good.test bad..test also.test\n")
        #expect(file.diagnostics.count == 1)
        #expect(file.entries.first?.patterns.map(\.description) == ["good.test", "also.test"])
    }

    @Test("invalid UTF-8 is reported, not crashed on")
    func invalidUTF8() {
        var bytes = Array("192.0.2.1 a".utf8)
        bytes += [0xC3, 0x28, 0xFF]
        bytes += Array(".test\n192.0.2.2 ok.test\n# \u{FF}\u{FE} comment bytes are ignored: ".utf8) + [0xFF, 0x0A]
        let file = HostsFile(parsing: bytes, file: "hosts")
        #expect(file.diagnostics.count == 1)
        #expect(file.diagnostics.first?.message == "invalid UTF-8")
        #expect(file.diagnostics.first?.column == 12)
        #expect(file.entries.map(\.line) == [2])
    }

    @Test("a very long line is rejected without stopping the rest")
    func longLine() {
        let long = "192.0.2.1 " + String(repeating: "a.", count: HostsFile.maximumLineLength) + "test"
        let file = Self.parse("192.0.2.2 before.test\n\(long)\n192.0.2.3 after.test\n")
        #expect(file.diagnostics.count == 1)
        #expect(file.diagnostics.first?.line == 2)
        #expect(file.diagnostics.first?.message.contains("at most \(HostsFile.maximumLineLength)") == true)
        #expect(file.entries.map(\.line) == [1, 3])
    }

    @Test("binary garbage gives diagnostics, not a crash")
    func garbage() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let bytes = (0..<Int.random(in: 0..<400, using: &generator)).map { _ in
                UInt8.random(in: 0...255, using: &generator)
            }
            let file = HostsFile(parsing: bytes)
            #expect(file.entries.allSatisfy { !$0.patterns.isEmpty })
        }
    }

    // 200,000 lines, not a million: in a debug build a million took one of CI's two cores for two minutes, which
    // starved the tests running beside it. The same code paths run; only the count differs.
    @Test("200,000 lines parse, and the last one wins nothing special")
    func manyLines() async throws {
        try await onOwnThread {
            var text = ""
            text.reserveCapacity(6_000_000)
            for index in 0..<200_000 {
                text += "10.\(index >> 16 & 255).\(index >> 8 & 255).\(index & 255) h\(index).test\n"
            }
            let file = Self.parse(text)
            #expect(file.diagnostics.isEmpty)
            #expect(file.entries.count == 200_000)
            let table = file.table
            #expect(table.count == 200_000)
            let last = try HostName("h199999.test")
            #expect(table.lookup(last)?.addresses.first?.description == "10.3.13.63")
        }
    }

    @Test("reading a missing file or a directory is a clear error")
    func unreadable() {
        #expect(throws: HTTPDNSError.self) { try HostsFile(contentsOf: "/nonexistent/hosts") }
        do {
            _ = try HostsFile(contentsOf: "/tmp")
            Issue.record("a directory must not parse")
        } catch {
            #expect(error.code == .invalidConfiguration && error.diagnostics.isEmpty)
            #expect(error.message.contains("not a regular file"))
        }
    }
}

@Suite("Override precedence")
struct OverridePrecedenceTests {
    static let table = HostsFileTests.parse(
        """
        192.0.2.1 *.example.com
        192.0.2.2 *.api.example.com
        192.0.2.3 exact.api.example.com
        192.0.2.4 example.com
        """
    ).table

    @Test(
        "exact beats wildcard, longer suffix beats shorter, a wildcard does not match its own suffix",
        arguments: [
            ("exact.api.example.com", "192.0.2.3", "exact.api.example.com"),
            ("other.api.example.com", "192.0.2.2", "*.api.example.com"),
            ("deep.other.api.example.com", "192.0.2.2", "*.api.example.com"),
            ("api.example.com", "192.0.2.1", "*.example.com"),
            ("www.example.com", "192.0.2.1", "*.example.com"),
            ("example.com", "192.0.2.4", "example.com"),
            ("WWW.Example.COM.", "192.0.2.1", "*.example.com"),
        ]
    )
    func precedence(name: String, address: String, pattern: String) throws {
        let match = try #require(Self.table.lookup(try HostName(name)))
        #expect(match.addresses.map(\.description) == [address])
        #expect(match.pattern.description == pattern)
    }

    @Test("names outside every pattern are not overridden", arguments: ["example.org", "com", "badexample.com"])
    func misses(name: String) throws {
        #expect(Self.table.lookup(try HostName(name)) == nil)
    }
}

@Suite("Run-time overrides")
struct HostOverridesTests {
    @Test("set and remove take effect at once and beat the file")
    func setRemove() throws {
        let overrides = HostOverrides(file: HostsFileTests.parse("192.0.2.1 api.test\n"), ttl: 30)
        let name = try HostName("api.test")
        #expect(overrides.resolve(name, family: .any)?.addresses.map(\.ip.description) == ["192.0.2.1"])
        overrides.set([IPAddress("2001:db8::5")!, IPAddress("192.0.2.5")!], for: try HostPattern("api.test"))
        let answer = try #require(overrides.resolve(name, family: .any))
        #expect(answer.addresses.map(\.ip.description) == ["192.0.2.5", "2001:db8::5"], "IPv4 first")
        #expect(answer.addresses.allSatisfy { $0.source == .override && $0.ttl == 30 })
        overrides.remove(try HostPattern("api.test"))
        #expect(overrides.resolve(name, family: .any)?.addresses.map(\.ip.description) == ["192.0.2.1"])
    }

    @Test("a family with no overridden address falls through")
    func familyFallThrough() throws {
        let overrides = HostOverrides(file: HostsFileTests.parse("192.0.2.1 v4.test\n"))
        #expect(overrides.resolve(try HostName("v4.test"), family: .ipv6) == nil)
        #expect(overrides.resolve(try HostName("v4.test"), family: .ipv4) != nil)
    }

    @Test("reloading the file keeps run-time overrides")
    func reload() throws {
        let overrides = HostOverrides(file: HostsFileTests.parse("192.0.2.1 a.test\n"))
        overrides.set([IPAddress("192.0.2.9")!], for: try HostPattern("*.runtime.test"))
        overrides.replaceFileTable(HostsFileTests.parse("192.0.2.2 b.test\n").table)
        #expect(overrides.lookup(try HostName("a.test")) == nil)
        #expect(overrides.lookup(try HostName("b.test")) != nil)
        #expect(overrides.lookup(try HostName("x.runtime.test"))?.addresses.first?.description == "192.0.2.9")
    }

    @Test("concurrent changes and lookups are safe and every lookup sees a whole value")
    func concurrency() async throws {
        let overrides = HostOverrides()
        let pattern = try HostPattern("busy.test")
        let name = try HostName("busy.test")
        let pairs = (0..<50).map { [IPAddress(ipv4: 192, 0, 2, UInt8($0)), IPAddress(ipv4: 198, 51, 100, UInt8($0))] }
        let consistent = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                for _ in 0..<20 { for pair in pairs { overrides.set(pair, for: pattern) } }
                return true
            }
            for _ in 0..<4 {
                group.addTask {
                    var ok = true
                    for _ in 0..<5_000 {
                        if let match = overrides.lookup(name) {
                            // Both addresses of one pair, never a mix of two writes.
                            ok =
                                ok && match.addresses.count == 2
                                && match.addresses[0].bytes[3] == match.addresses[1].bytes[3]
                        }
                    }
                    return ok
                }
            }
            var all = true
            for await ok in group { all = all && ok }
            return all
        }
        #expect(consistent)
    }
}
