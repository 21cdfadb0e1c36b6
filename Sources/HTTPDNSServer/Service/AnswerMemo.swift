/// Encoded RFC 8484 answers kept for as long as the full path would give the same bytes: one table per event loop,
/// used only on that loop (no lock), so a repeated query costs a table probe instead of a name parse, a cache lookup
/// and an encoding.
///
/// An entry is keyed by the query message without its ID (so the question, flags and options are all part of the
/// key, and the question section of the kept answer matches the client's byte for byte) and is used only while
///
/// - the resolver's and the service's generation are what they were when the answer was made (any change of the
///   cache, the scores, the overrides or the configuration ends every entry at once), and
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

    /// The most entries a table holds; past it, expired entries go, and if none has, every entry.
    let capacity: Int
    /// The longest query kept (a query is some 30–100 bytes, 128 or 468 with EDNS padding; a client may send up to
    /// the body limit): with ``capacity`` it bounds a table to a few MiB.
    static let maximumQueryBytes = 512
    private var entries: [Key: Entry] = [:]
    /// The generation every entry was made at. A newer one empties the table at once: its entries can never be used
    /// again (the generation only grows), and on a busy cache it changes with every store, so a table left to fill
    /// would be scanned for the expired at each insert once full (a twentieth of serve's time in a workload profile).
    private var generation: UInt64 = 0

    package init(capacity: Int = 4096) {
        self.capacity = max(capacity, 1)
    }

    var count: Int { entries.count }

    /// The kept answer to `message` (a whole query, ID included), with the message's ID, if it is still good.
    package func answer(to message: [UInt8], generation: UInt64, now: ContinuousClock.Instant) -> (
        ServiceResponse, String?
    )? {
        guard message.count >= 12, moveOn(to: generation) else { return nil }
        let key = Key(message: message)
        guard let entry = entries[key] else { return nil }
        guard now < entry.until, entry.response.body.count >= 2 else {
            entries[key] = nil
            return nil
        }
        var response = entry.response
        response.body[0] = message[0]
        response.body[1] = message[1]
        return (response, entry.name)
    }

    /// Keeps `response`, the answer to `message` made at `generation`, for `steadyFor` from `now`.
    package func keep(
        _ response: ServiceResponse, to message: [UInt8], name: String?, generation: UInt64, steadyFor: Duration,
        now: ContinuousClock.Instant
    ) {
        guard message.count >= 12, message.count <= Self.maximumQueryBytes, steadyFor > .zero,
            moveOn(to: generation)
        else { return }
        if entries.count >= capacity {
            entries = entries.filter { $0.value.until > now }
            if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
        }
        entries[Key(message: message)] = Entry(response: response, name: name, until: now + steadyFor)
    }

    /// Empties the table when `generation` is newer than its entries'; `false` when it is older (an answer made
    /// before a change that a later request already saw: neither kept nor looked up).
    private func moveOn(to generation: UInt64) -> Bool {
        if generation == self.generation { return true }
        guard generation > self.generation else { return false }
        entries.removeAll(keepingCapacity: true)
        self.generation = generation
        return true
    }
}
