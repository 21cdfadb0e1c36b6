/// An answer to an SVCB or HTTPS query whose ServiceMode records' address hints (`ipv4hint`, `ipv6hint`, RFC 9460
/// §7.3) are made to agree with the A and AAAA answers a server gives the same client: `hostsctl serve` steers a
/// name's addresses (overrides, scores, client networks), and a client that follows the hints must reach what a
/// client that follows A and AAAA reaches.
///
/// The answer is rebuilt with every name written in full, so that no compression pointer can point at bytes that
/// moved: the header (AD cleared, the data is no longer the signed data), the question, the answer section (CNAME and
/// DNAME targets expanded, SVCB/HTTPS data rewritten, RRSIGs over SVCB/HTTPS dropped, other records as they came)
/// and the OPT record; the authority and additional sections are left out (the additional section may carry the
/// target's addresses, RFC 9460 §4.1, which would bypass the steering). An answer holding a record whose data may
/// carry compressed names this does not expand (NS, SOA, MX, PTR, SRV in the answer section) is not rebuilt.
package enum ServiceBindingAnswer {
    /// The addresses one name's hints become, and how long they hold.
    package struct Hints: Sendable, Hashable {
        /// The IPv4 hints, in order (none: no `ipv4hint`).
        package var ipv4: [IPAddress]
        /// The IPv6 hints, in order (none: no `ipv6hint`).
        package var ipv6: [IPAddress]
        /// The TTL of the addresses: the record's TTL becomes at most this.
        package var ttl: UInt32
        /// The addresses come from the server's own overrides, not from the name's owner: the record's `ech` (keys
        /// of the owner's servers, which an override's host does not hold; a client would fail hard) goes.
        package var local: Bool

        package init(ipv4: [IPAddress], ipv6: [IPAddress], ttl: UInt32, local: Bool = false) {
            self.ipv4 = ipv4
            self.ipv6 = ipv6
            self.ttl = ttl
            self.local = local
        }
    }

    /// One record of a message: where its owner name starts, its type, class and TTL, and its data.
    struct RawRecord {
        var owner: Int
        var type: UInt16
        var recordClass: UInt16
        var ttl: UInt32
        var data: Range<Int>
    }

    /// The names the answer's ServiceMode records hint at (each record's target, or its owner for `.`), lower case
    /// without the trailing dot, each once, in order, at most `limit`; empty when it holds none or cannot be read.
    package static func hintedNames(in answer: [UInt8], limit: Int = .max) -> [String] {
        guard let (_, records) = sections(answer) else { return [] }
        var names: [String] = []
        var seen = Set<String>()
        for record in records.answers where record.type == 64 || record.type == 65 {
            guard names.count < limit else { break }
            guard let binding = try? ServiceBinding(rdata: answer[record.data]), !binding.isAlias,
                let name = hintedName(binding, owner: record.owner, in: answer), seen.insert(name).inserted
            else { continue }
            names.append(name)
        }
        return names
    }

    /// Whether the answer section holds an SVCB or HTTPS record (then it goes through ``steering(_:hints:)``).
    package static func holdsBindings(_ answer: [UInt8]) -> Bool {
        sections(answer)?.1.answers.contains { $0.type == 64 || $0.type == 65 } ?? false
    }

    /// The most bytes a rebuilt answer may take: what a stream's two-byte length can carry.
    static let maximumLength = 65_535

    /// `answer` rebuilt with the hints of each ServiceMode record set to those of its name in `hints` (a name not
    /// there, or a family without addresses, loses its hints; `ech` goes with hints that are ``Hints/local``), and
    /// the TTL of each rewritten record set at most theirs, the same for every record of one set (RFC 2181 §5.2);
    /// records that became identical are written once. An SVCB or HTTPS record this cannot read, and any NS, SOA,
    /// MX, PTR or SRV record (whose data may hold compressed names) in the answer section, are left out. `nil` when
    /// the answer cannot be rebuilt (it cannot be walked, a name or CNAME target cannot be read, or the result is
    /// longer than ``maximumLength``): the caller must not send the original, which carries the upstream's hints.
    package static func steering(_ answer: [UInt8], hints: [String: Hints]) -> [UInt8]? {
        guard let (questionEnd, records) = sections(answer) else { return nil }
        /// A name with ASCII letters lower-cased: how owners are compared.
        func folded(_ wire: [UInt8]) -> [UInt8] { wire.map { (65...90).contains($0) ? $0 | 0x20 : $0 } }
        let questionName = folded(Array(answer[12..<questionEnd - 4]))
        var rebuilt: [(owner: [UInt8], type: UInt16, recordClass: UInt16, ttl: UInt32, data: [UInt8])] = []
        // What the rebuilt answer will take at most, followed as it grows: past the bound it stops at once, so a
        // hostile answer of thousands of pointers to one long name never expands in memory.
        var length = questionEnd + 11
        for record in records.answers {
            guard let owner = DNSMessageWalk.expandedName(answer, at: record.owner) else { return nil }
            var ttl = record.ttl
            var data = Array(answer[record.data])
            switch record.type {
            case 46 where data.count >= 2 && [64, 65].contains(Int(data[0]) << 8 | Int(data[1])):
                // A signature over the records rewritten here no longer holds.
                continue
            case 5, 39:
                guard let target = DNSMessageWalk.expandedName(answer, at: record.data.lowerBound),
                    target.end == record.data.upperBound
                else { return nil }
                data = target.wire
            case 64, 65:
                // A record this cannot read is malformed (RFC 9460 §2.2: clients ignore it), and its hints must not
                // reach a lenient client unsteered: it is left out.
                guard var binding = try? ServiceBinding(rdata: answer[record.data]) else { continue }
                if !binding.isAlias, let name = hintedName(binding, owner: record.owner, in: answer) {
                    let steered = hints[name] ?? Hints(ipv4: [], ipv6: [], ttl: .max)
                    binding.ipv4Hints = steered.ipv4
                    binding.ipv6Hints = steered.ipv6
                    if steered.local { binding.ech = nil }
                    ttl = min(ttl, steered.ttl)
                    data = binding.rdata
                }
            case 2, 6, 12, 15, 33:
                continue
            default:
                break
            }
            length += (folded(owner.wire) == questionName ? 2 : owner.wire.count) + 10 + data.count
            guard length <= maximumLength else { return nil }
            rebuilt.append((owner.wire, record.type, record.recordClass, ttl, data))
        }
        // One TTL per set: the smallest of its records'.
        var setTTL: [[UInt8]: UInt32] = [:]
        for record in rebuilt {
            let key = folded(record.owner) + [UInt8(record.type >> 8), UInt8(record.type & 0xFF)]
            setTTL[key] = min(setTTL[key] ?? .max, record.ttl)
        }
        var body: [UInt8] = []
        var written = Set<[UInt8]>()
        var count = 0
        for record in rebuilt {
            let type = [UInt8(record.type >> 8), UInt8(record.type & 0xFF)]
            let owner = folded(record.owner)
            let ttl = setTTL[owner + type] ?? record.ttl
            guard written.insert(owner + type + record.data).inserted else { continue }
            // The question's name is written as a pointer to it; any other in full.
            body += owner == questionName ? [0xC0, 12] : record.owner
            body +=
                type + [
                    UInt8(record.recordClass >> 8), UInt8(record.recordClass & 0xFF), UInt8(ttl >> 24),
                    UInt8(ttl >> 16 & 0xFF), UInt8(ttl >> 8 & 0xFF), UInt8(ttl & 0xFF), UInt8(record.data.count >> 8),
                    UInt8(record.data.count & 0xFF),
                ]
            body += record.data
            count += 1
        }
        let opt = records.additional.first { $0.type == 41 && answer[$0.owner] == 0 }
        var out = Array(answer[0..<questionEnd])
        out[3] &= ~0x20
        (out[6], out[7]) = (UInt8(count >> 8), UInt8(count & 0xFF))
        (out[8], out[9], out[10], out[11]) = (0, 0, 0, opt == nil ? 0 : 1)
        out += body
        if let opt { out += answer[opt.owner..<opt.data.upperBound] }
        return out.count <= maximumLength ? out : nil
    }

    /// The name `binding`'s hints are for: its target, or for `.` the owner of its record.
    static func hintedName(_ binding: ServiceBinding, owner: Int, in message: [UInt8]) -> String? {
        if binding.target != "." { return String(binding.target.dropLast()) }
        return DNSMessageWalk.expandedName(message, at: owner).map { text($0.wire) }
    }

    /// The lower-case dotted form of a name written in full, without the trailing dot.
    static func text(_ wire: [UInt8]) -> String {
        var labels: [String] = []
        var position = 0
        while position < wire.count, wire[position] != 0 {
            let length = Int(wire[position])
            labels.append(
                String(decoding: wire[position + 1..<min(position + 1 + length, wire.count)], as: UTF8.self)
                    .lowercased())
            position += 1 + length
        }
        return labels.joined(separator: ".")
    }

    /// Where the question ends, and the records of the answer and additional sections; `nil` unless the message is
    /// a response with one question that can be walked to its end.
    static func sections(_ message: [UInt8]) -> (questionEnd: Int, (answers: [RawRecord], additional: [RawRecord]))? {
        // The question's name written in full (its labels walked: a label's bytes may be anything).
        guard message.count >= 12, message[2] & 0x80 != 0, message[4] == 0, message[5] == 1,
            let question = DNSMessageWalk.expandedName(message, at: 12), question.end == 12 + question.wire.count,
            question.end + 4 <= message.count
        else { return nil }
        let nameEnd = question.end
        var offset = nameEnd + 4
        func read(_ count: Int) -> [RawRecord]? {
            var records: [RawRecord] = []
            for _ in 0..<count {
                guard let end = DNSMessageWalk.skipName(message, from: offset), end + 10 <= message.count else {
                    return nil
                }
                let length = Int(message[end + 8]) << 8 | Int(message[end + 9])
                guard end + 10 + length <= message.count else { return nil }
                records.append(
                    RawRecord(
                        owner: offset, type: UInt16(message[end]) << 8 | UInt16(message[end + 1]),
                        recordClass: UInt16(message[end + 2]) << 8 | UInt16(message[end + 3]),
                        ttl: message[end + 4..<end + 8].reduce(UInt32(0)) { $0 << 8 | UInt32($1) },
                        data: end + 10..<end + 10 + length))
                offset = end + 10 + length
            }
            return records
        }
        let counts = (6...10).filter { $0 % 2 == 0 }.map { Int(message[$0]) << 8 | Int(message[$0 + 1]) }
        guard let answers = read(counts[0]), read(counts[1]) != nil, let additional = read(counts[2]) else {
            return nil
        }
        return (nameEnd + 4, (answers, additional))
    }
}
