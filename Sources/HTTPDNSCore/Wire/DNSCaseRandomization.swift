/// DNS 0x20 (draft-vixie-dnsext-dns0x20): the ASCII letters of a query's name sent in a random mix of cases, and
/// an answer taken only when its question echoes that mix byte for byte. Every letter is one more bit an off-path
/// attacker must guess besides the query ID and the source port, so a forged answer that guessed the ID and port
/// (c-ares 1.18 sends every query from one port while any is pending) is still told apart.
///
/// Servers keep the case of the question they answer (dnsmasq, unbound, PowerDNS, BIND and Knot all do); one that
/// folds it would have every answer refused, which ``echoesQuestion(_:of:questionEnd:)`` reports as a mismatch.
package enum DNSCaseRandomization {
    /// `message` with each ASCII letter of its question's name in a random case, and the offset just past the
    /// question (name, type, class); `nil` for a message without exactly one question that can be walked (a
    /// compressed name, say: a query has none).
    package static func randomized(_ message: [UInt8]) -> (message: [UInt8], questionEnd: Int)? {
        var generator = SystemRandomNumberGenerator()
        return randomized(message, using: &generator)
    }

    /// As ``randomized(_:)``, with the random bits from `generator` (tests pass a seeded one).
    package static func randomized<Generator: RandomNumberGenerator>(
        _ message: [UInt8], using generator: inout Generator
    ) -> (message: [UInt8], questionEnd: Int)? {
        guard message.count > 12, message[4] == 0, message[5] == 1 else { return nil }
        var out = message
        var bits = generator.next()
        var used = 0
        var offset = 12
        while true {
            guard offset < out.count else { return nil }
            let length = Int(out[offset])
            if length == 0 { break }
            guard length & 0xC0 == 0, offset + 1 + length <= out.count else { return nil }
            for index in offset + 1...offset + length {
                let folded = out[index] | 0x20
                guard folded >= UInt8(ascii: "a"), folded <= UInt8(ascii: "z") else { continue }
                if used == 64 {
                    bits = generator.next()
                    used = 0
                }
                out[index] = bits & 1 == 0 ? folded : folded & ~0x20
                bits >>= 1
                used += 1
            }
            offset += 1 + length
        }
        let questionEnd = offset + 1 + 4
        guard questionEnd <= out.count else { return nil }
        return (out, questionEnd)
    }

    /// Whether `answer` carries exactly the question of `query` (its bytes `12..<questionEnd`), case included.
    package static func echoesQuestion(_ answer: [UInt8], of query: [UInt8], questionEnd: Int) -> Bool {
        guard answer.count >= questionEnd, query.count >= questionEnd, answer[4] == 0, answer[5] == 1 else {
            return false
        }
        return answer[12..<questionEnd].elementsEqual(query[12..<questionEnd])
    }
}
