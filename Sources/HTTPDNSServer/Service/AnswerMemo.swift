import HTTPDNS

/// Encoded RFC 8484 answers kept for as long as the full path would give the same bytes: one table per event loop,
/// used only on that loop (no lock), so a repeated query costs a table probe instead of a name parse, a cache lookup
/// and an encoding.
///
/// An entry is keyed by the query message without its ID (so the question, flags and options are all part of the
/// key, and the question section of the kept answer matches the client's byte for byte) and is used only while
///
/// - the resolver's and the service's generation are what they were when the answer was made (a change of the
///   overrides, the configuration or the whole cache ends every entry at once), and its name's counter in the cache
///   (`HostCache.names`) too (a store or a score of that name ends its entries only: a busy cache stores thousands of
///   names a second, and each store used to end every loop's whole table), and
/// - the answer is steady: until its TTL in whole seconds would tick down, a ranking penalty decays, a refresh or a
///   probe round falls due (``HostResolver/cachedRankedSteadily(_:family:port:)``), so never past one second.
///
/// The answer then differs from the full path's only in its ID, which is the client's. Rate limits, metrics and
/// the access log still see every request.
///
/// A query's EDNS Client Subnet address is not part of its key. Only answers that are the same for every network are
/// kept (an answer kept by network, or ordered by a network's reports, never is), so queries that differ only in the
/// address they state share one entry; the client's own option is echoed (RFC 7871 §7.2.2) by writing its address
/// bytes over the kept answer's, which end it (``DNSAnswerMessage`` writes the option last, with scope 0 for such an
/// answer). Without this, a workload's share of ECS queries kept one entry per name and network and missed.
package final class AnswerMemo {
    struct Entry {
        var response: ServiceResponse
        /// The queried name, for the access log.
        var name: String?
        var until: ContinuousClock.Instant
        /// The name's counter in the cache (`NameVersions`) and what it read before the lookup.
        var stamp: NameStamp?
        /// When it was kept, to tell its place in ``ring`` from a later entry's of the same key.
        var sequence: UInt64
        /// The response ends with the query's ECS address (echoed): a later query's address goes there.
        var echoesSubnet: Bool
    }

    /// Where a name's changes are counted (`NameVersions`) and what the counter read before the lookup.
    package struct NameStamp: Sendable, Hashable {
        package var slot: Int
        package var version: UInt64

        package init(slot: Int, version: UInt64) {
            self.slot = slot
            self.version = version
        }
    }

    /// A query message as a key: every byte but the ID (the first two) and the address of its ECS option, compared
    /// and hashed in place, so a lookup copies nothing.
    struct Key: Hashable {
        var message: [UInt8]
        /// The ECS option's address bytes (empty: none), left out; its family and source prefix length are in.
        var subnet: Range<Int>

        init(message: [UInt8]) {
            self.message = message
            subnet = AnswerMemo.subnetAddress(in: message)
        }

        static func == (lhs: Key, rhs: Key) -> Bool {
            guard lhs.message.count == rhs.message.count, lhs.subnet == rhs.subnet else { return false }
            let (start, end) = (lhs.subnet.lowerBound, lhs.subnet.upperBound)
            guard start > 2 else { return lhs.message[2...].elementsEqual(rhs.message[2...]) }
            return lhs.message[2..<start].elementsEqual(rhs.message[2..<start])
                && lhs.message[end...].elementsEqual(rhs.message[end...])
        }

        func hash(into hasher: inout Hasher) {
            let (start, end) = (subnet.lowerBound, subnet.upperBound)
            message.withUnsafeBytes { bytes in
                guard start > 2 else { return hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: bytes[2...])) }
                hasher.combine(start)
                hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: bytes[2..<start]))
                hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: bytes[end...]))
            }
        }
    }

    /// Where the address of `message`'s ECS option lies (the bytes after its family and prefix lengths), or an empty
    /// range when it has none (or one that cannot be read: such a query is answered FORMERR and never kept).
    static func subnetAddress(in message: [UInt8]) -> Range<Int> {
        // Most queries carry no additional record at all: nothing to walk.
        guard message.count >= 12, message[10] | message[11] != 0,
            let options = DNSMessageWalk.optOptions(message)
        else { return 0..<0 }
        var offset = options.lowerBound
        while offset + 4 <= options.upperBound {
            let code = UInt16(message[offset]) << 8 | UInt16(message[offset + 1])
            let length = Int(message[offset + 2]) << 8 | Int(message[offset + 3])
            let data = offset + 4
            guard data + length <= options.upperBound else { break }
            if code == EDNSClientSubnet.optionCode {
                // Only an option the full path takes (no bits past the prefix, no IPv4-mapped IPv6 and the rest of
                // RFC 7871's rules): a kept answer must never answer what the full path calls FORMERR.
                guard (try? EDNSClientSubnet.read(message[data..<data + length])) != nil else { break }
                return data + 4..<data + length
            }
            offset = data + length
        }
        return 0..<0
    }

    /// The most entries a table holds; past it, the one kept longest ago goes (a ring of keys: O(1)).
    let capacity: Int
    /// The longest query kept (a query is some 30–100 bytes, 128 or 468 with EDNS padding; a client may send up to
    /// the body limit): with ``capacity`` it bounds a table to a few MiB.
    static let maximumQueryBytes = 512
    private var entries: [Key: Entry] = [:]
    /// The keys in the order they were kept, with their sequence, ``capacity`` places: a new entry takes the place
    /// of the oldest, whose entry goes unless the key was kept again since.
    private var ring: [(key: Key, sequence: UInt64)?]
    private var next = 0
    private var sequence: UInt64 = 0
    /// The generation every entry was made at. A newer one empties the table at once: its entries can never be used
    /// again (the generation only grows); it changes only with the overrides, the configuration or the whole cache.
    private var generation: UInt64 = 0

    package init(capacity: Int = 4096) {
        self.capacity = max(capacity, 1)
        ring = Array(repeating: nil, count: self.capacity)
    }

    var count: Int { entries.count }

    /// The kept answer to `message` (a whole query, ID included), with the message's ID, if it is still good:
    /// `versions` reads a name's counter now.
    package func answer(
        to message: [UInt8], generation: UInt64, now: ContinuousClock.Instant,
        versions: (Int) -> UInt64 = { _ in 0 }
    ) -> (ServiceResponse, String?)? {
        guard message.count >= 12, moveOn(to: generation) else { return nil }
        let key = Key(message: message)
        guard let entry = entries[key] else { return nil }
        guard now < entry.until, entry.response.body.count >= 2,
            entry.stamp.map({ versions($0.slot) == $0.version }) ?? true
        else {
            entries[key] = nil
            return nil
        }
        var response = entry.response
        response.body[0] = message[0]
        response.body[1] = message[1]
        if entry.echoesSubnet {
            let echo = response.body.count - key.subnet.count
            response.body.replaceSubrange(echo..., with: message[key.subnet])
        }
        return (response, entry.name)
    }

    /// Keeps `response`, the answer to `message` made at `generation` (and the name's counter at `stamp`), for
    /// `steadyFor` from `now`. `echoesSubnet`: the response ends with the query's ECS option, echoed (the answer
    /// must be the same for every network, as every answer with a `steadyFor` is).
    package func keep(
        _ response: ServiceResponse, to message: [UInt8], name: String?, generation: UInt64, steadyFor: Duration,
        now: ContinuousClock.Instant, stamp: NameStamp? = nil, echoesSubnet: Bool = false
    ) {
        guard message.count >= 12, message.count <= Self.maximumQueryBytes, steadyFor > .zero,
            moveOn(to: generation)
        else { return }
        let key = Key(message: message)
        // An echo is written over on every use: it must be where it is looked for, the query's address itself (a
        // /0 has no address bytes: nothing to write).
        let echoesSubnet = echoesSubnet && !key.subnet.isEmpty
        if echoesSubnet {
            guard response.body.count >= 12 + key.subnet.count,
                response.body.suffix(key.subnet.count).elementsEqual(message[key.subnet])
            else { return }
        }
        if let oldest = ring[next], entries[oldest.key]?.sequence == oldest.sequence { entries[oldest.key] = nil }
        sequence += 1
        ring[next] = (key, sequence)
        next = next + 1 == capacity ? 0 : next + 1
        entries[key] = Entry(
            response: response, name: name, until: now + steadyFor, stamp: stamp, sequence: sequence,
            echoesSubnet: echoesSubnet)
    }

    /// Empties the table when `generation` is newer than its entries'; `false` when it is older (an answer made
    /// before a change that a later request already saw: neither kept nor looked up).
    private func moveOn(to generation: UInt64) -> Bool {
        if generation == self.generation { return true }
        guard generation > self.generation else { return false }
        entries.removeAll(keepingCapacity: true)
        for index in ring.indices { ring[index] = nil }
        self.generation = generation
        return true
    }
}
