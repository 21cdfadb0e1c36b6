import Crypto
import Foundation
import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients
import HTTPDNS
import HTTPDNSSettings

/// Entry points for coverage-guided fuzzing (`Tests/Fuzz`, `scripts/fuzz.sh`): every parser of untrusted input,
/// fed raw bytes. Each must return or throw its typed error for any input; a crash, a hang or an answer that breaks
/// the parser's promises (the wrong family, too many addresses) is a bug, reported by trapping.
enum FuzzTargets {
    /// The targets, by name.
    static let names = [
        "doh-wire", "answer-walk", "doh-json", "alibaba", "tencent", "tencent-aes", "settings", "hosts", "cache",
        "record-text", "svcb",
    ]

    private static let name = try! HostName("multi.test")
    private static let key = SymmetricKey(data: Array("0123456789abcdef".utf8))

    /// Feeds `bytes` to the target called `target`; `false` for an unknown name.
    static func run(_ target: String, _ bytes: [UInt8]) -> Bool {
        switch target {
        case "doh-wire":
            let type: DNSRecordType = bytes.first.map { $0 & 1 == 0 } ?? true ? .a : .aaaa
            if let addresses = try? DNSWireMessage.addresses(in: bytes, for: name, type: type, source: "fuzz") {
                check(addresses, family: type == .a ? .ipv4 : .ipv6)
            }
        case "answer-walk":
            // The Swift walk against c-ares on the same bytes: refused by both, or read the same by both.
            let type: DNSRecordType = bytes.first.map { $0 & 1 == 0 } ?? true ? .a : .aaaa
            bytes.withUnsafeBufferPointer { message in
                let walked = DNSAnswerWalk.addresses(
                    in: message, type: type, source: "fuzz", limit: DNSWireMessage.maximumAddresses)
                let reference = CAresReference.walkEquivalent(of: message, type: type, source: "fuzz")
                precondition(walked == reference, "the Swift walk and c-ares read an answer differently")
            }
        case "doh-json":
            let type: DNSRecordType = bytes.first.map { $0 & 1 == 0 } ?? true ? .a : .aaaa
            if let addresses = try? DoHJSONAnswer.addresses(in: bytes, for: name, type: type, source: "fuzz") {
                check(addresses, family: type == .a ? .ipv4 : .ipv6)
            }
        case "alibaba":
            for family in [AddressFamily.ipv4, .ipv6, .any] {
                if let addresses = try? AlibabaHTTPDNS.addresses(
                    status: 200, body: bytes, for: name, family: family, source: "fuzz")
                {
                    check(addresses, family: family)
                }
            }
        case "tencent", "tencent-aes":
            let key = target == "tencent-aes" ? Self.key : nil
            for family in [AddressFamily.ipv4, .ipv6, .any] {
                if let addresses = try? TencentHTTPDNS.addresses(
                    status: 200, body: bytes, for: name, family: family, key: key, source: "fuzz")
                {
                    check(addresses, family: family)
                }
            }
        case "settings":
            let file = SettingsFile.parse(bytes, path: "/fuzz/hostsctl.json", environment: [:])
            precondition(file.settings != nil || !file.errors.isEmpty, "settings without a value must say why")
        case "hosts":
            let file = HostsFile(parsing: bytes, file: "fuzz")
            precondition(file.entries.allSatisfy { !$0.patterns.isEmpty }, "an entry without a name")
        case "record-text":
            // `hostsctl resolve --type` shows what upstreams answer: never more records than the header counts, and
            // nothing but printable ASCII.
            guard let answer = DNSRecordText.answer(bytes) else { return true }
            precondition(answer.records.count <= Int(bytes[6]) << 8 | Int(bytes[7]), "more records than answers")
            for record in answer.records {
                precondition(
                    (record.name + record.data).unicodeScalars.allSatisfy { (0x20...0x7E).contains($0.value) },
                    "a record shown with a byte that is not printable ASCII")
            }
        case "svcb":
            // SVCB/HTTPS record data: what reads is written so that it reads back the same.
            guard let binding = try? ServiceBinding(rdata: bytes[...]) else { return true }
            precondition(
                (try? ServiceBinding(rdata: binding.rdata[...])) == binding, "an SVCB record does not read back")
        case "cache":
            guard let file = try? JSONDecoder().decode(CacheFile.self, from: Data(bytes)) else { return true }
            var core = HostCacheCore(configuration: .default)
            _ = core.load(
                file, now: CacheInstant(nanoseconds: 1_000_000_000_000),
                at: .init(wall: 1_800_000_000, boot: 1000, bootID: "fuzz"))
            _ = core.exported(
                now: CacheInstant(nanoseconds: 1_000_000_000_000),
                saved: .init(wall: 1_800_000_000, boot: 1000, bootID: "fuzz"))
        default:
            return false
        }
        return true
    }

    private static func check(_ addresses: [ResolvedAddress], family: AddressFamily) {
        precondition(!addresses.isEmpty, "an answer without addresses")
        precondition(addresses.count <= DNSWireMessage.maximumAddresses, "more addresses than the parser allows")
        precondition(
            addresses.allSatisfy { family == .any || $0.ip.family == family }, "an address of the wrong family")
        precondition(addresses.allSatisfy { $0.ttl <= ResolvedAddress.maximumTTL }, "a TTL above the maximum")
    }
}
