import Foundation
import TestSupport
import Testing

@testable import HTTPDNSCore
@testable import HostsCTLCommands

/// `hostsctl resolve --type`, `-x` and `--short` as dig's users expect them: every type shown as kdig shows it
/// (PowerDNS serving HTTPS in ServiceMode and AliasMode, SVCB with `dohpath`, MX, CAA, SRV, TXT, a CNAME chain), the
/// chain of a pipeline answer, PTR records of an address, and the record reader never trusting what it reads.
@Suite("hostsctl resolve: record types, -x, --short")
struct RecordTypesTests {
    /// kdig's `+short` data and ours compared as text: kdig leaves `alpn` unquoted and prints `dohpath` as `key7`,
    /// the only differences between two correct presentations here.
    static func normalized(_ text: String) -> [String] {
        text.split(separator: "\n").map {
            $0.replacingOccurrences(of: "\"", with: "").replacingOccurrences(of: "dohpath=", with: "key7=")
                .trimmingCharacters(in: .whitespaces)
        }
    }

    @Test(
        "every type as kdig shows it: HTTPS (every common key, and AliasMode), SVCB with dohpath, MX, CAA, SRV, TXT, A through a CNAME chain"
    )
    func asKdigShowsThem() async throws {
        let pdns = try await PowerDNS.start()
        defer { pdns.stop() }
        let cases = [
            ("HTTPS", "svc"), ("HTTPS", "pool"), ("SVCB", "doh"), ("MX", "mail"), ("CAA", "caa"), ("SRV", "_sip._tcp"),
            ("TXT", "words"), ("A", "chain"), ("CNAME", "chain"),
        ]
        for (type, label) in cases {
            let name = "\(label).ecs.test"
            let kdig = try await HostsCTLProcess.run(
                executable: "/usr/bin/kdig",
                ["@127.0.0.1", "-p", "\(pdns.address.port)", "+short", "+timeout=10", "+retry=0", type, name])
            let ours = try await HostsCTLProcess.run([
                "resolve", "--server", "\(pdns.address)", "--no-cache", "--type", type, "--short", name,
            ])
            #expect(ours.status == 0, "\(type) \(name): \(ours.standardError)")
            #expect(!kdig.standardOutput.isEmpty, "\(type) \(name): kdig saw nothing")
            #expect(
                Self.normalized(ours.standardOutput) == Self.normalized(kdig.standardOutput),
                "\(type) \(name): ours \(ours.standardOutput) kdig \(kdig.standardOutput)")
        }
        // The table: every record, the chain, the status and where the answer came from.
        let table = try await HostsCTLProcess.run([
            "resolve", "--server", "\(pdns.address)", "--no-cache", "-t", "HTTPS", "svc.ecs.test",
        ])
        #expect(table.standardOutput.contains("svc.ecs.test HTTPS"), "\(table.standardOutput)")
        #expect(table.standardOutput.contains("  300  HTTPS  1 target.ecs.test. mandatory=alpn,port alpn=\"h2,h3\""))
        #expect(table.standardOutput.contains("status NOERROR, from cares"))
        // A through the pipeline: the addresses it ranks, after the chain c-ares's servers gave.
        let chained = try await HostsCTLProcess.run([
            "resolve", "--server", "\(pdns.address)", "--no-cache", "--type", "A", "--json", "chain.ecs.test",
        ])
        let parsed = try #require(
            try JSONSerialization.jsonObject(with: Data(chained.standardOutput.utf8)) as? [[String: Any]])
        #expect(parsed[0]["chain"] as? [String] == ["chain.ecs.test.", "alias.ecs.test.", "z.ecs.test."])
        let records = try #require(parsed[0]["records"] as? [[String: Any]])
        #expect(records.map { $0["type"] as? String } == ["CNAME", "CNAME", "A"])
        #expect(records.last?["name"] as? String == "z.ecs.test." && records.last?["data"] as? String == "192.0.2.109")
        #expect(parsed[0]["source"] as? String == "cares")
        // A name without the type: NOERROR with nothing, exit 1; a name that does not exist: NXDOMAIN, exit 1.
        let empty = try await HostsCTLProcess.run([
            "resolve", "--server", "\(pdns.address)", "--no-cache", "-t", "MX", "flat.ecs.test",
        ])
        #expect(empty.status == 1 && empty.standardOutput.contains("status NOERROR (no MX records)"), "\(empty)")
        let missing = try await HostsCTLProcess.run([
            "resolve", "--server", "\(pdns.address)", "--no-cache", "-t", "TXT", "nothing.ecs.test",
        ])
        #expect(missing.status == 1 && missing.standardOutput.contains("status NXDOMAIN"), "\(missing)")
    }

    @Test(
        "-x asks for PTR records; --short prints addresses alone; overrides answer --type A; bad combinations exit 64")
    func reverseAndShort() async throws {
        try await DNSMasq.with(
            records: TestZone.records + [
                "ptr-record=10.2.0.192.in-addr.arpa,v4only.test",
                "ptr-record=1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa,multi.test",
            ]
        ) { server in
            let reverse = try await HostsCTLProcess.run([
                "resolve", "--server", "\(server.address)", "--no-cache", "-x", "192.0.2.10", "-x", "2001:db8::1",
                "--short",
            ])
            #expect(reverse.status == 0, "\(reverse)")
            #expect(reverse.standardOutput == "v4only.test.\nmulti.test.\n", "\(reverse.standardOutput)")
            let table = try await HostsCTLProcess.run([
                "resolve", "--server", "\(server.address)", "--no-cache", "-x", "192.0.2.10",
            ])
            #expect(
                table.standardOutput.contains("192.0.2.10 (10.2.0.192.in-addr.arpa) PTR"), "\(table.standardOutput)")
            let short = try await HostsCTLProcess.run([
                "resolve", "--server", "\(server.address)", "--no-cache", "--short", "multi.test",
            ])
            #expect(
                Set(short.standardOutput.split(separator: "\n").map(String.init))
                    == Set(TestZone.multiV4 + TestZone.multiV6))
            let overridden = try TemporaryFiles.file("192.0.2.77 multi.test\n", name: "hosts")
            let override = try await HostsCTLProcess.run([
                "resolve", "--server", "\(server.address)", "--no-cache", "--hosts", overridden, "-t", "A",
                "multi.test",
            ])
            #expect(override.standardOutput.contains("A     192.0.2.77"), "\(override.standardOutput)")
            #expect(override.standardOutput.contains("from override"), "\(override.standardOutput)")
        }
        for arguments in [
            ["-t", "NOPE", "a.test"], ["-t", "TXT", "--source", "httpdns", "a.test"], ["-x", "not-an-address"],
            ["-x", "192.0.2.1", "-t", "TXT"], ["-t", "A", "--family", "ipv6", "a.test"],
            ["--short", "--json", "a.test"],
            ["-t", "MX", "--probe", "a.test"], ["-x", "192.0.2.1", "a.test"],
        ] {
            let output = try await HostsCTLProcess.run(["resolve"] + arguments)
            #expect(output.status == 64, "\(arguments): \(output)")
        }
    }

    @Test("types by name and number; reverse names; every record kind read from the wire as dig writes it")
    func presentation() throws {
        #expect(DNSRecordText.typeCode("https") == 65 && DNSRecordText.typeCode("TYPE65") == 65)
        #expect(DNSRecordText.typeCode("28") == 28 && DNSRecordText.typeCode("nope") == nil)
        #expect(DNSRecordText.typeName(65) == "HTTPS" && DNSRecordText.typeName(65_280) == "TYPE65280")
        #expect(DNSRecordText.reverseName(IPAddress("192.0.2.1")!) == "1.2.0.192.in-addr.arpa")
        #expect(
            DNSRecordText.reverseName(IPAddress("2001:db8::1")!)
                == "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa")
        /// A response holding one answer record of `type` with `data`, owned by `a.test`.
        func answer(_ type: UInt16, _ data: [UInt8]) -> [UInt8] {
            let owner: [UInt8] = [1, 97, 4, 116, 101, 115, 116, 0]
            return [0, 0, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0] + owner + [UInt8(type >> 8), UInt8(type & 0xFF), 0, 1]
                + [0xC0, 12, UInt8(type >> 8), UInt8(type & 0xFF), 0, 1, 0, 0, 0x0E, 0x10]
                + [UInt8(data.count >> 8), UInt8(data.count & 0xFF)] + data
        }
        func text(_ type: UInt16, _ data: [UInt8]) -> String? {
            DNSRecordText.answer(answer(type, data))?.records.first?.data
        }
        #expect(DNSRecordText.answer(answer(1, [192, 0, 2, 1]))?.records.first?.name == "a.test.")
        #expect(DNSRecordText.answer(answer(1, [192, 0, 2, 1]))?.records.first?.ttl == 3600)
        #expect(text(1, [192, 0, 2, 1]) == "192.0.2.1")
        // A pointer to the owner: `a.test.`.
        #expect(text(5, [0xC0, 12]) == "a.test.")
        #expect(text(15, [0, 10, 0xC0, 12]) == "10 a.test.")
        #expect(text(16, [5] + Array("a \"b\"".utf8) + [2, 0x5C, 0x07]) == #""a \"b\"" "\\\007""#)
        #expect(text(33, [0, 1, 0, 2, 0x01, 0xBB, 0xC0, 12]) == "1 2 443 a.test.")
        #expect(text(257, [128, 5] + Array("issue".utf8) + Array("ca.test".utf8)) == #"128 issue "ca.test""#)
        let soa: [UInt8] =
            [0xC0, 12, 0xC0, 12] + [0, 0, 0, 1, 0, 0, 0x0E, 0x10, 0, 0, 2, 0x58, 0, 1, 0x51, 0x80, 0, 0, 0, 60]
        #expect(text(6, soa) == "a.test. a.test. 1 3600 600 86400 60")
        // HTTPS: priority 1, target ".", mandatory=alpn, alpn="h2,h3", no-default-alpn, port=443, ipv4hint, ech,
        // ipv6hint, dohpath, an unknown key; then the same with keys out of order (shown in the generic form).
        var params: [UInt8] = [0, 0, 0, 2, 0, 1]
        params += [0, 1, 0, 6, 2] + Array("h2".utf8) + [2] + Array("h3".utf8)
        params += [0, 2, 0, 0] + [0, 3, 0, 2, 1, 0xBB] + [0, 4, 0, 4, 192, 0, 2, 1] + [0, 5, 0, 3, 1, 2, 3]
        params += [0, 6, 0, 16, 0x20, 0x01, 0x0D, 0xB8] + [UInt8](repeating: 0, count: 11) + [1]
        params += [0, 7, 0, 8] + Array("/q{?dns}".utf8) + [0xFF, 0x00, 0, 2] + Array("x\"".utf8)
        #expect(
            text(65, [0, 1, 0] + params)
                == #"1 . mandatory=alpn alpn="h2,h3" no-default-alpn port=443 ipv4hint=192.0.2.1 ech=AQID ipv6hint=2001:db8::1 dohpath="/q{?dns}" key65280="x\"""#
        )
        let disordered: [UInt8] = [0, 1, 0] + [0, 3, 0, 2, 1, 0xBB] + [0, 1, 0, 3, 2] + Array("h2".utf8)
        #expect(text(65, disordered) == "\\# \(disordered.count) " + DNSRecordText.hex(disordered[...]))
        // RFC 9460 §2.2: the target is never compressed.
        #expect(text(65, [0, 0, 0xC0, 12]) == "\\# 4 0000C00C")
        #expect(text(65, [0, 0, 1, 97, 0]) == "0 a.")
        // Data that does not read as its type: the generic form.
        #expect(text(1, [1, 2, 3]) == "\\# 3 010203")
        #expect(text(15, [0, 10, 0xC0]) == "\\# 3 000AC0")
        #expect(text(64_000, []) == "\\# 0")
    }

    @Test(
        "the record reader never trusts what it reads: truncated, looping and random messages give nil or text, never a crash"
    )
    func hostileMessages() {
        // A name pointing at itself.
        let loop: [UInt8] = [
            0, 0, 0x81, 0x80, 0, 0, 0, 1, 0, 0, 0, 0, 0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 1, 0, 4, 1, 2, 3, 4,
        ]
        #expect(DNSRecordText.answer(loop) == nil)
        #expect(DNSRecordText.answer([0, 0, 0x81]) == nil)
        #expect(DNSRecordText.answer([0, 0, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0]) == nil, "a query is no answer")
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            let length = Int.random(in: 12...300, using: &generator)
            var message = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            message[2] |= 0x80
            (message[4], message[6]) = (0, 0)
            if let answer = DNSRecordText.answer(message) {
                #expect(answer.records.count <= Int(message[7]))
            }
        }
    }
}
