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

    /// A query message as a key: every byte but the ID (the first two), compared and hashed in place, so a lookup
    /// copies nothing.
    struct Key: Hashable {
        var message: [UInt8]

        static func == (lhs: Key, rhs: Key) -> Bool {
            lhs.message.count == rhs.message.count && lhs.message[2...].elementsEqual(rhs.message[2...])
        }

        func hash(into hasher: inout Hasher) {
            message.withUnsafeBytes { hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: $0[2...])) }
        }
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
        return (response, entry.name)
    }

    /// Keeps `response`, the answer to `message` made at `generation` (and the name's counter at `stamp`), for
    /// `steadyFor` from `now`.
    package func keep(
        _ response: ServiceResponse, to message: [UInt8], name: String?, generation: UInt64, steadyFor: Duration,
        now: ContinuousClock.Instant, stamp: NameStamp? = nil
    ) {
        guard message.count >= 12, message.count <= Self.maximumQueryBytes, steadyFor > .zero,
            moveOn(to: generation)
        else { return }
        let key = Key(message: message)
        if let oldest = ring[next], entries[oldest.key]?.sequence == oldest.sequence { entries[oldest.key] = nil }
        sequence += 1
        ring[next] = (key, sequence)
        next = next + 1 == capacity ? 0 : next + 1
        entries[key] = Entry(response: response, name: name, until: now + steadyFor, stamp: stamp, sequence: sequence)
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
