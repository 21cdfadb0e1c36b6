import Testing

@testable import HTTPDNSCAres
@testable import HTTPDNSCore

/// The Swift reading of DNS answers and building of queries, checked against c-ares on the same bytes: the walk
/// refuses exactly the answers c-ares refuses, reads the others as c-ares does, and every query is c-ares's bytes.
@Suite("DNS answers read in Swift, as c-ares reads them")
struct DNSAnswerWalkTests {
    /// An answer to a query for `name` and `type`, with `records` as its answer section (each already encoded).
    static func answer(to name: String, type: DNSRecordType, records: [[UInt8]]) throws -> [UInt8] {
        var message = DNSWireMessage.query(for: try HostName(name), type: type)
        message[2] = 0x81
        message[3] = 0x80
        message[6] = UInt8(records.count >> 8)
        message[7] = UInt8(records.count & 0xFF)
        for record in records { message += record }
        return message
    }

    /// A record owned by the name at `owner` (encoded bytes, or a pointer), of `type` and `class`, with `data`.
    static func record(
        _ owner: [UInt8] = [0xC0, 0x0C], type: UInt16, class recordClass: UInt16 = 1, ttl: UInt32 = 300,
        data: [UInt8]
    ) -> [UInt8] {
        owner + [UInt8(type >> 8), UInt8(type & 0xFF), UInt8(recordClass >> 8), UInt8(recordClass & 0xFF)]
            + withUnsafeBytes(of: ttl.bigEndian, Array.init) + [UInt8(data.count >> 8), UInt8(data.count & 0xFF)]
            + data
    }

    /// `name` as labels.
    static func encoded(_ name: String) -> [UInt8] {
        name.split(separator: ".").flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) } + [0]
    }

    /// The walk's answer and c-ares's, for comparison: `nil` for a refused answer, empty for one without a record
    /// of the type (c-ares's `ARES_ENODATA`).
    static func both(_ message: [UInt8], type: DNSRecordType) -> (walk: [ResolvedAddress]?, cares: [ResolvedAddress]?) {
        message.withUnsafeBufferPointer { bytes in
            let walk = DNSAnswerWalk.addresses(
                in: bytes, type: type, source: "test", limit: DNSWireMessage.maximumAddresses)
            return (walk, CAresReference.walkEquivalent(of: bytes, type: type, source: "test"))
        }
    }

    @Test(
        "answers with CNAME chains, pointers, other classes and types, odd lengths and large TTLs read as c-ares reads them"
    )
    func crafted() throws {
        let cname = Self.encoded("Target.Example.test")
        let v6: [UInt8] = [0x20, 0x01, 0x0d, 0xb8] + Array(repeating: 0, count: 11) + [1]
        let cases: [(String, DNSRecordType, [[UInt8]])] = [
            (
                "multi.test", .a,
                [Self.record(type: 1, data: [192, 0, 2, 1]), Self.record(type: 1, data: [192, 0, 2, 2])]
            ),
            // A CNAME, then the target's address (its owner written out, in another case); a smaller CNAME TTL caps it.
            (
                "alias.test", .a,
                [
                    Self.record(type: 5, ttl: 30, data: cname),
                    Self.record(Self.encoded("TARGET.example.TEST"), type: 1, ttl: 600, data: [192, 0, 2, 7]),
                ]
            ),
            // The address before the CNAME: c-ares's order dependency drops it.
            (
                "alias.test", .a,
                [
                    Self.record(Self.encoded("target.example.test"), type: 1, data: [192, 0, 2, 8]),
                    Self.record(type: 5, data: cname),
                ]
            ),
            // Another class, a wrong length, another type and another owner are skipped.
            (
                "multi.test", .a,
                [
                    Self.record(type: 1, class: 3, data: [192, 0, 2, 1]), Self.record(type: 1, data: [192, 0, 2]),
                    Self.record(type: 16, data: [3, 97, 98, 99]),
                    Self.record(Self.encoded("other.test"), type: 1, data: [192, 0, 2, 9]),
                    Self.record(type: 1, data: [192, 0, 2, 3]),
                ]
            ),
            // TTLs of 2^31 s and more read as 0; the largest below stays.
            (
                "multi.test", .a,
                [
                    Self.record(type: 1, ttl: 0x8000_0000, data: [192, 0, 2, 1]),
                    Self.record(type: 1, ttl: 0x7FFF_FFFF, data: [192, 0, 2, 2]),
                ]
            ),
            ("multi.test", .aaaa, [Self.record(type: 28, data: v6), Self.record(type: 1, data: [192, 0, 2, 1])]),
            // Only the other family, and a CNAME alone: no address.
            ("multi.test", .a, [Self.record(type: 28, data: v6)]),
            ("alias.test", .a, [Self.record(type: 5, data: cname)]),
            ("multi.test", .a, []),
            // More addresses than are kept.
            (
                "many.test", .a,
                (0..<300).map { Self.record(type: 1, data: [10, 0, UInt8($0 >> 8), UInt8($0 & 0xFF)]) }
            ),
        ]
        for (name, type, records) in cases {
            let message = try Self.answer(to: name, type: type, records: records)
            let (walk, cares) = Self.both(message, type: type)
            #expect(walk != nil, "\(name): the walk must decide a well-formed answer with plain names")
            #expect(walk == cares, "\(name) \(type)")
        }
    }

    @Test(
        "loops, bad pointers, truncation and CNAME targets that are not host names ('.', '*', space, UTF-8) are refused"
    )
    func refused() throws {
        func answer(owner: [UInt8]) throws -> [UInt8] {
            try Self.answer(to: "multi.test", type: .a, records: [Self.record(owner, type: 1, data: [1, 2, 3, 4])])
        }
        let loop = try answer(owner: [0xC0, 0x1C])
        let beyond = try answer(owner: [0xC0, 0xFF])
        var truncated = try answer(owner: [0xC0, 0x0C])
        truncated.removeLast(2)
        let targets = try [[3, 97, 32, 98, 0], [3, 97, 46, 98, 0], [1, 42, 0], [2, 0xC3, 0xA9, 0]].map {
            try Self.answer(
                to: "multi.test", type: .a,
                records: [Self.record(type: 5, data: $0), Self.record($0, type: 1, data: [1, 2, 3, 4])])
        }
        for message in [loop, beyond, truncated] + targets {
            let (walk, cares) = Self.both(message, type: .a)
            #expect(walk == nil, "\(message)")
            #expect(cares == nil, "\(message)")
        }
    }

    @Test("owner names with any bytes, and CNAME targets with '/' or '_' in a label, read as c-ares reads them")
    func unusualNames() throws {
        let owners: [[UInt8]] = [
            [3, 97, 46, 98, 0], [3, 97, 47, 98, 0], [1, 42, 0xC0, 0x0C], [3, 97, 32, 98, 0], [3, 97, 0, 98, 0],
            [3, 0xC3, 0xA9, 98, 0],
        ]
        for owner in owners {
            let message = try Self.answer(
                to: "multi.test", type: .a,
                records: [Self.record(owner, type: 1, data: [1, 2, 3, 4]), Self.record(type: 1, data: [5, 6, 7, 8])])
            let (walk, cares) = Self.both(message, type: .a)
            #expect(walk?.count == 1, "\(owner)")
            #expect(walk == cares, "\(owner)")
        }
        // c-ares writes a label of one zero byte as that byte, which ends the name's C string (so such a name can
        // equal the root; found by the answer-walk fuzz target, whose corpus keeps that input); other zero bytes
        // are escaped. Neither owner here is the name asked.
        let zeroLabel: [UInt8] = [1, 0, 5] + Array("multi".utf8) + [4] + Array("test".utf8) + [0]
        let zeroInside: [UInt8] = [5] + Array("multi".utf8) + [7] + Array("test".utf8) + [0, 122, 122, 0]
        for owner in [zeroLabel, zeroInside] {
            let message = try Self.answer(
                to: "multi.test", type: .a,
                records: [Self.record(owner, type: 1, data: [1, 2, 3, 4]), Self.record(type: 1, data: [5, 6, 7, 8])])
            let (walk, cares) = Self.both(message, type: .a)
            #expect(walk?.count == 1, "\(owner)")
            #expect(walk == cares, "\(owner)")
        }
        for target: [UInt8] in [[3, 97, 47, 98, 0], [3, 97, 95, 98, 0], [3, 65, 45, 57, 0]] {
            let message = try Self.answer(
                to: "multi.test", type: .a,
                records: [Self.record(type: 5, data: target), Self.record(target, type: 1, data: [5, 6, 7, 8])])
            let (walk, cares) = Self.both(message, type: .a)
            #expect(walk?.count == 1, "\(target)")
            #expect(walk == cares, "\(target)")
        }
    }

    @Test("mutated answers: the walk refuses what c-ares refuses and reads the rest as c-ares does")
    func mutated() throws {
        var rng = SeededGenerator(state: 1035)
        let cname = Self.encoded("target.example.test")
        let seeds = [
            try Self.answer(
                to: "alias.test", type: .a,
                records: [
                    Self.record(type: 5, ttl: 30, data: cname),
                    Self.record(Self.encoded("target.example.test"), type: 1, data: [192, 0, 2, 7]),
                    Self.record([0xC0, 0x28], type: 1, data: [192, 0, 2, 8]),
                ]),
            try Self.answer(
                to: "multi.test", type: .aaaa, records: [Self.record(type: 28, data: Array(repeating: 1, count: 16))]),
        ]
        var (read, refused) = (0, 0)
        for iteration in 0..<20_000 {
            let input = ParserFuzzTests.mutate(seeds[iteration % seeds.count], using: &rng)
            for type in [DNSRecordType.a, .aaaa] {
                let (walk, cares) = Self.both(input, type: type)
                if walk == nil { refused += 1 } else { read += 1 }
                #expect(walk == cares, "input \(input)")
            }
        }
        #expect(read > 1000 && refused > 1000, "the mutations must leave both kinds of answer, or this tests little")
    }

    @Test("queries are c-ares's bytes")
    func queries() throws {
        let names = [
            "a", "multi.test", "Mixed.Case.Example", "_service._tcp.example.test", "x-y.z9",
            String(repeating: "a", count: 63) + ".test",
            (0..<4).map { _ in String(repeating: "b", count: 62) }.joined(separator: "."),
        ]
        for text in names {
            let name = try HostName(text)
            for type in [DNSRecordType.a, .aaaa] {
                #expect(
                    DNSWireMessage.query(for: name, type: type)
                        == (try CAresReference.query(for: name, type: type)), "\(text)")
            }
        }
    }
}
