import Testing

@testable import HTTPDNSCore

/// SVCB and HTTPS record data (RFC 9460, RFC 9461): read as the RFC's rules say, written so that it reads back equal,
/// unknown keys kept as they came, and every rule that makes a record malformed refused with its reason.
@Suite("SVCB/HTTPS record data")
struct ServiceBindingTests {
    /// A parameter's bytes: key, length, value.
    static func parameter(_ key: UInt16, _ value: [UInt8]) -> [UInt8] {
        [UInt8(key >> 8), UInt8(key & 0xFF), UInt8(value.count >> 8), UInt8(value.count & 0xFF)] + value
    }

    @Test("every key of RFC 9460 and RFC 9461 read into its typed view; written back byte for byte")
    func roundTrip() throws {
        let target: [UInt8] = [3] + Array("svc".utf8) + [4] + Array("TEST".utf8) + [0]
        let data: [UInt8] =
            [0, 1] + target + Self.parameter(0, [0, 1, 0, 3])
            + Self.parameter(1, [2] + Array("h2".utf8) + [2] + Array("h3".utf8))
            + Self.parameter(2, []) + Self.parameter(3, [0x20, 0xFB]) + Self.parameter(4, [192, 0, 2, 1, 192, 0, 2, 2])
            + Self.parameter(5, [0, 4, 1, 2, 3, 4])
            + Self.parameter(6, [0x20, 0x01, 0x0D, 0xB8] + [UInt8](repeating: 0, count: 11) + [1])
            + Self.parameter(7, Array("/dns-query{?dns}".utf8)) + Self.parameter(8, [])
            + Self.parameter(65_000, [0xFF, 0x00])
        let binding = try ServiceBinding(rdata: data[...])
        #expect(binding.priority == 1 && !binding.isAlias && binding.target == "svc.test.")
        #expect(binding.mandatory == [1, 3])
        #expect(binding.alpn == ["h2", "h3"] && binding.port == 8443)
        #expect(binding.ipv4Hints.map(\.description) == ["192.0.2.1", "192.0.2.2"])
        #expect(binding.ipv6Hints.map(\.description) == ["2001:db8::1"])
        #expect(binding.ech == [0, 4, 1, 2, 3, 4] && binding.dohPath == "/dns-query{?dns}")
        #expect(binding.parameters[65_000] == [0xFF, 0x00], "an unknown key kept as it came")
        // The target is written lower case, as it was read.
        var expected = data
        expected.replaceSubrange(2..<2 + target.count, with: [3] + Array("svc".utf8) + [4] + Array("test".utf8) + [0])
        #expect(binding.rdata == expected)
        #expect(try ServiceBinding(rdata: binding.rdata[...]) == binding)
    }

    @Test("hints replaced, the rest kept: what serve does to steer a record")
    func replaceHints() throws {
        var binding = ServiceBinding(priority: 1)
        binding.alpn = ["h2"]
        binding.port = 443
        binding.ipv4Hints = [IPAddress("192.0.2.9")!]
        binding.ipv6Hints = [IPAddress("2001:db8::9")!, IPAddress("2001:db8::8")!]
        let read = try ServiceBinding(rdata: binding.rdata[...])
        #expect(read.ipv6Hints.map(\.description) == ["2001:db8::9", "2001:db8::8"])
        binding.ipv4Hints = []
        #expect(try ServiceBinding(rdata: binding.rdata[...]).parameters[ServiceBinding.Key.ipv4Hint] == nil)
        #expect(try ServiceBinding(rdata: ServiceBinding(priority: 0, target: "pool.test.").rdata[...]).isAlias)
        // Hints a mandatory list names, removed: the list follows, and the record reads back.
        var strict = ServiceBinding(priority: 1, parameters: [0: [0, 3, 0, 4], 3: [1, 0xBB], 4: [192, 0, 2, 1]])
        strict.ipv4Hints = []
        #expect(strict.mandatory == [3])
        #expect(try ServiceBinding(rdata: strict.rdata[...]) == strict)
        var only = ServiceBinding(priority: 1, parameters: [0: [0, 6], 6: Array(IPAddress("2001:db8::1")!.bytes)])
        only.ipv6Hints = []
        #expect(only.parameters.isEmpty, "a mandatory list left empty goes")
    }

    @Test(
        "malformed: keys out of order or repeated, values of the wrong shape, mandatory broken, a compressed target, data cut short",
        arguments: [
            (
                "out of order",
                [0, 1, 0] + ServiceBindingTests.parameter(3, [1, 0xBB])
                    + ServiceBindingTests.parameter(1, [2, 104, 50])
            ),
            (
                "repeated",
                [0, 1, 0] + ServiceBindingTests.parameter(3, [1, 0xBB]) + ServiceBindingTests.parameter(3, [1, 0xBB])
            ),
            ("short port", [0, 1, 0] + ServiceBindingTests.parameter(3, [1])),
            ("empty alpn id", [0, 1, 0] + ServiceBindingTests.parameter(1, [0])),
            ("cut alpn id", [0, 1, 0] + ServiceBindingTests.parameter(1, [5, 104])),
            ("ipv4hint of 5 bytes", [0, 1, 0] + ServiceBindingTests.parameter(4, [1, 2, 3, 4, 5])),
            ("ipv6hint of 4 bytes", [0, 1, 0] + ServiceBindingTests.parameter(6, [1, 2, 3, 4])),
            ("no-default-alpn with a value", [0, 1, 0] + ServiceBindingTests.parameter(2, [1])),
            ("no-default-alpn without alpn", [0, 1, 0] + ServiceBindingTests.parameter(2, [])),
            ("mandatory names itself", [0, 1, 0] + ServiceBindingTests.parameter(0, [0, 0])),
            ("mandatory key absent", [0, 1, 0] + ServiceBindingTests.parameter(0, [0, 3])),
            (
                "mandatory unsorted",
                [0, 1, 0] + ServiceBindingTests.parameter(0, [0, 3, 0, 1])
                    + ServiceBindingTests.parameter(1, [2, 104, 50]) + ServiceBindingTests.parameter(3, [1, 0xBB])
            ),
            ("dohpath without dns", [0, 1, 0] + ServiceBindingTests.parameter(7, Array("/q".utf8))),
            ("compressed target", [0, 1, 0xC0, 12]),
            ("cut target", [0, 1, 5, 97]),
            ("cut parameter", [0, 1, 0, 0, 3, 0]),
            ("cut value", [0, 1, 0, 0, 3, 0, 2, 1]),
            ("too short", [0, 1]),
            ("a dot inside a target label", [0, 1, 3, 97, 46, 98, 0]),
            ("a control byte in the target", [0, 1, 1, 7, 0]),
        ] as [(String, [UInt8])])
    func malformed(_ label: String, _ data: [UInt8]) {
        #expect(throws: ServiceBinding.Malformed.self, "\(label)") { try ServiceBinding(rdata: data[...]) }
    }
}
