import Testing
import TestSupport

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore

/// A deterministic generator (SplitMix64) so a failing input can be reproduced from its seed.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Bounded fuzzing of every HTTP DNS parser: mutated valid inputs and random ones. A parser must either return
/// well-formed addresses or throw an ``HTTPDNSError``; a crash, a hang or a wrong-family address fails the test.
@Suite("parser fuzzing")
struct ParserFuzzTests {
    static let iterations = 4000

    static func mutate(_ input: [UInt8], using rng: inout SeededGenerator, alphabet: [UInt8]? = nil) -> [UInt8] {
        var bytes = input
        func randomByte() -> UInt8 { alphabet?.randomElement(using: &rng) ?? UInt8.random(in: 0...255, using: &rng) }
        for _ in 0..<Int.random(in: 1...4, using: &rng) {
            switch Int.random(in: 0..<5, using: &rng) {
            case 0 where !bytes.isEmpty: bytes[Int.random(in: 0..<bytes.count, using: &rng)] = randomByte()
            case 1 where !bytes.isEmpty: bytes.removeLast(Int.random(in: 1...bytes.count, using: &rng))
            case 2: bytes.insert(randomByte(), at: Int.random(in: 0...bytes.count, using: &rng))
            case 3 where bytes.count > 1:
                let index = Int.random(in: 0..<bytes.count, using: &rng)
                bytes.remove(at: index)
            default: bytes = (0..<Int.random(in: 0..<64, using: &rng)).map { _ in randomByte() }
            }
        }
        return bytes
    }

    static func check(_ addresses: [ResolvedAddress], family: AddressFamily) {
        #expect(!addresses.isEmpty)
        #expect(addresses.count <= DNSWireMessage.maximumAddresses)
        #expect(addresses.allSatisfy { family == .any || $0.ip.family == family })
        #expect(addresses.allSatisfy { $0.ttl <= ResolvedAddress.maximumTTL })
    }

    @Test("DNS wire answers (c-ares parsers behind the header and question checks)")
    func wire() async throws {
        try await onOwnThread {
            var rng = SeededGenerator(state: 8484)
            let name = try HostName("multi.test")
            let query = DNSWireMessage.query(for: name, type: .a)
            let seeds = [
                CraftedWire.response(to: query, a: [[192, 0, 2, 1], [192, 0, 2, 2]]),
                CraftedWire.response(to: query, rcode: 3),
                CraftedWire.response(to: query),
            ]
            var successes = 0
            for iteration in 0..<Self.iterations {
                let input = Self.mutate(seeds[iteration % seeds.count], using: &rng)
                do throws(HTTPDNSError) {
                    let addresses = try DNSWireMessage.addresses(in: input, for: name, type: .a, source: "fuzz")
                    Self.check(addresses, family: .ipv4)
                    #expect(input[2] & 0x80 != 0, "a message without QR must not parse")
                    successes += 1
                } catch {
                    #expect(error.host == "multi.test")
                }
            }
            #expect(successes > 0, "the mutations must leave some inputs valid, or the fuzzer tests nothing")
        }
    }

    @Test("JSON DNS answers")
    func json() async throws {
        try await onOwnThread {
            var rng = SeededGenerator(state: 2_0000)
            let name = try HostName("alias.test")
            let seed = Array(
                """
                {"Status":0,"TC":false,"Question":[{"name":"alias.test.","type":1}],"Answer":[\
                {"name":"alias.test.","type":5,"TTL":60,"data":"multi.test."},\
                {"name":"multi.test.","type":1,"TTL":300,"data":"192.0.2.1"}]}
                """.utf8)
            let alphabet = Array("{}[]\":,0123456789.-eE abcdefnulltrueStatusAnswerTTLdatanametype\\".utf8)
            for _ in 0..<Self.iterations {
                let input = Self.mutate(seed, using: &rng, alphabet: alphabet)
                do throws(HTTPDNSError) {
                    Self.check(
                        try DoHJSONAnswer.addresses(in: input, for: name, type: .a, source: "fuzz"), family: .ipv4)
                } catch {
                    #expect(error.host == "alias.test")
                }
            }
        }
    }

    @Test("Alibaba-style JSON answers")
    func alibaba() async throws {
        try await onOwnThread {
            var rng = SeededGenerator(state: 1_534_316_400)
            let name = try HostName("multi.test")
            let seed = Array(
                #"{"host":"multi.test","ips":["192.0.2.1","192.0.2.2"],"ipsv6":["2001:db8::1"],"ttl":300,"origin_ttl":600}"#
                    .utf8)
            let alphabet = Array("{}[]\":,0123456789.abcdef: hostipsv6ttl-".utf8)
            for iteration in 0..<Self.iterations {
                let input = Self.mutate(seed, using: &rng, alphabet: alphabet)
                let family: AddressFamily = [.ipv4, .ipv6, .any][iteration % 3]
                do throws(HTTPDNSError) {
                    let addresses = try AlibabaHTTPDNS.addresses(
                        status: 200, body: input, for: name, family: family, source: "fuzz")
                    Self.check(addresses, family: family)
                } catch {
                    #expect(error.host == "multi.test")
                }
            }
        }
    }

    @Test("Tencent-style text answers")
    func tencent() async throws {
        try await onOwnThread {
            var rng = SeededGenerator(state: 119_029_029_029)
            let name = try HostName("multi.test")
            let seed = Array("192.0.2.1;192.0.2.2,300-2001:db8::1;2001:db8::2,300|203.0.113.1".utf8)
            let alphabet = Array("0123456789abcdef.:;,-| \n".utf8)
            for iteration in 0..<Self.iterations {
                let input = Self.mutate(seed, using: &rng, alphabet: alphabet)
                let family: AddressFamily = [.ipv4, .ipv6, .any][iteration % 3]
                do throws(HTTPDNSError) {
                    let addresses = try TencentHTTPDNS.addresses(
                        status: 200, body: input, for: name, family: family, key: nil, source: "fuzz")
                    Self.check(addresses, family: family)
                } catch {
                    #expect(error.host == "multi.test")
                }
            }
        }
    }
}
