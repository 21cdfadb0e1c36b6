package import HTTPDNS

/// Answers of other record types (HTTPS/SVCB, MX, TXT, CNAME chains, …) relayed from upstream, kept while their
/// records' TTLs run, so a popular name of another type costs one upstream query per TTL, not one per client.
///
/// A kept answer is served with every TTL lowered by the seconds it has been kept, and the client's ID. Only
/// NOERROR and NXDOMAIN answers with at least one record (so a TTL: the records', or the SOA's for a negative
/// answer, RFC 2308) and no EDNS options (a cookie belongs to one client, RFC 7873) are kept, at most
/// ``capacity`` of them (past it, the one kept longest makes room: one entry, never all). The key is the question as the client wrote it
/// with ASCII case folded, its RD and CD flags and its DO bit: what can change the answer after the client's subnet
/// option is stripped.
package final class ForwardedAnswerCache: Sendable {
    private struct Entry {
        var answer: [UInt8]
        /// Where each record's TTL sits in `answer`, and its value when kept.
        var ttls: [(offset: Int, ttl: UInt32)]
        var kept: ContinuousClock.Instant
        /// The smallest TTL: the entry is served until that many seconds have passed.
        var lifetime: UInt32
    }

    /// The most answers kept.
    let capacity: Int
    /// The largest answer kept: with ``capacity``, at most 16 MiB are held.
    static let maximumAnswerBytes = 4_096
    private struct State {
        var entries: [[UInt8]: Entry] = [:]
        /// Keys in the order they were kept, from `head` on (a key kept again appears twice: the older copy removes
        /// nothing, or the newer entry a little early).
        var order: [[UInt8]] = []
        var head = 0
    }

    private let state = Locked(State())

    /// Answers kept now.
    var count: Int { state.withLock { $0.entries.count } }

    /// Keys in the eviction order now (expired ones included), at most about twice ``capacity``.
    var orderCount: Int { state.withLock { $0.order.count - $0.head } }

    package init(capacity: Int = 4_096) {
        self.capacity = max(capacity, 1)
    }

    /// The kept answer to `query` (the message as relayed), with the query's ID and the TTLs left, and the smallest
    /// of them; `nil` when none is kept or it has expired.
    /// `network`: the client network an answer was kept for (one the upstream scoped by EDNS Client Subnet).
    package func answer(to query: [UInt8], network: IPNetwork? = nil, now: ContinuousClock.Instant)
        -> (answer: [UInt8], ttl: UInt32)?
    {
        guard let key = Self.key(query, network: network) else { return nil }
        let found = state.withLock { state -> Entry? in
            guard let entry = state.entries[key] else { return nil }
            guard now - entry.kept < .seconds(Int64(entry.lifetime)) else {
                state.entries[key] = nil
                return nil
            }
            return entry
        }
        guard let entry = found else { return nil }
        let age = UInt32(clamping: (now - entry.kept).components.seconds)
        var answer = entry.answer
        answer[0] = query[0]
        answer[1] = query[1]
        // The question as this client wrote it (the same bytes but for ASCII case: resolvers that randomise the
        // case of their questions check it).
        if let nameEnd = DNSMessageWalk.skipName(query, from: 12), nameEnd <= answer.count {
            answer.replaceSubrange(12..<nameEnd, with: query[12..<nameEnd])
        }
        for (offset, ttl) in entry.ttls {
            let left = ttl > age ? ttl - age : 0
            answer[offset] = UInt8(left >> 24)
            answer[offset + 1] = UInt8(left >> 16 & 0xFF)
            answer[offset + 2] = UInt8(left >> 8 & 0xFF)
            answer[offset + 3] = UInt8(left & 0xFF)
        }
        return (answer, entry.lifetime > age ? entry.lifetime - age : 0)
    }

    /// Keeps `answer`, the upstream's answer to `query`, if it may be kept.
    package func keep(_ answer: [UInt8], to query: [UInt8], network: IPNetwork? = nil, now: ContinuousClock.Instant) {
        guard let key = Self.key(query, network: network), answer.count >= 12, answer.count <= Self.maximumAnswerBytes,
            answer[2] & 0x02 == 0
        else { return }
        let code = answer[3] & 0x0F
        guard code == 0 || code == 3, let ttls = Self.recordTTLs(answer), let lifetime = ttls.map(\.ttl).min(),
            lifetime > 0
        else { return }
        state.withLock { state in
            if state.entries[key] == nil {
                while state.entries.count >= capacity, state.head < state.order.count {
                    state.entries[state.order[state.head]] = nil
                    state.head += 1
                }
                if state.head > capacity {
                    state.order.removeFirst(state.head)
                    state.head = 0
                }
                state.order.append(key)
                // Keys of entries that expired (and left on a lookup) stay in the order until they reach its front;
                // a name kept, expired and kept again many times would grow it: past twice the capacity, the order
                // is rebuilt from the entries held, oldest first, each once.
                if state.order.count - state.head > 2 * capacity {
                    var seen = Set<[UInt8]>()
                    let newestFirst = state.order[state.head...].reversed().filter { key in
                        state.entries[key] != nil && seen.insert(key).inserted
                    }
                    state.order = Array(newestFirst.reversed())
                    state.head = 0
                }
            }
            state.entries[key] = Entry(answer: answer, ttls: ttls, kept: now, lifetime: lifetime)
        }
    }

    /// Removes every answer whose question names a name `matches` says (lower case, no trailing dot), for every
    /// type and network; returns how many. O(answers kept): for an operator's flush, not for lookups.
    package func remove(where matches: (String) -> Bool) -> Int {
        state.withLock { state in
            let keys = state.entries.keys.filter { Self.questionName(inKey: $0).map(matches) ?? false }
            guard !keys.isEmpty else { return 0 }
            for key in keys { state.entries[key] = nil }
            state.order = state.order[state.head...].filter { state.entries[$0] != nil }
            state.head = 0
            return keys.count
        }
    }

    /// The name a key's question asks for, lower case and without the trailing dot (empty for the root; `nil` for a
    /// key that cannot be read: a question holds its name uncompressed).
    static func questionName(inKey key: [UInt8]) -> String? {
        var labels: [String] = []
        var position = 0
        while position < key.count {
            let length = Int(key[position])
            if length == 0 { return labels.joined(separator: ".") }
            guard length < 64, position + 1 + length <= key.count else { return nil }
            labels.append(String(decoding: key[position + 1..<position + 1 + length], as: UTF8.self))
            position += 1 + length
        }
        return nil
    }

    /// The key of a query: its question with ASCII letters lower-cased, then its RD and CD flags and its DO bit,
    /// then `network` (its address bytes and prefix length) when the answer holds for that network only.
    package static func key(_ query: [UInt8], network: IPNetwork? = nil) -> [UInt8]? {
        guard query.count >= 12, query[4] == 0, query[5] == 1,
            let nameEnd = DNSMessageWalk.skipName(query, from: 12), nameEnd + 4 <= query.count
        else { return nil }
        // A question's name is written in full (a pointer there can only point into the header or at itself): one
        // that is not is not kept, so every kept answer can be found by its name (an operator's flush).
        guard questionName(inKey: Array(query[12..<nameEnd])) != nil else { return nil }
        var key = query[12..<nameEnd + 4].map { (65...90).contains($0) ? $0 | 0x20 : $0 }
        key.append(query[2] & 0x01)  // RD
        key.append(query[3] & 0x10)  // CD
        // DO (DNSSEC OK): the top bit of the OPT record's flags.
        key.append(DNSMessageWalk.optRecord(query).map { query[$0 + 6] & 0x80 } ?? 0)
        if let network { key += network.address.bytes + [UInt8(network.prefixLength)] }
        return key
    }

    /// The TTL of every record of `answer` but OPT, with where it sits; `nil` for a message that cannot be walked,
    /// one without records, or one whose OPT carries options.
    package static func recordTTLs(_ answer: [UInt8]) -> [(offset: Int, ttl: UInt32)]? {
        var ttls: [(offset: Int, ttl: UInt32)] = []
        var optionsFound = false
        let walked = DNSMessageWalk.forEachRecord(answer) { start in
            if answer[start] == 0, answer[start + 1] == 41 {
                optionsFound = answer[start + 8] != 0 || answer[start + 9] != 0
                return !optionsFound
            }
            let ttl = answer[(start + 4)..<(start + 8)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            // RFC 2181 §8: a TTL with the top bit set is read as 0.
            ttls.append((start + 4, ttl & 0x8000_0000 == 0 ? ttl : 0))
            return true
        }
        return walked && !optionsFound && !ttls.isEmpty ? ttls : nil
    }
}
