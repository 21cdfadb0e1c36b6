import HTTPDNS
import NIOCore

/// The bound on upstream work: requests that wait for an upstream at once, in total and per client network (its
/// /24 or /48, the unit of every bound in docs/security.md), for two kinds of places counted apart: lookups (an A or
/// AAAA cache miss) and relays (a query of another type forwarded as it came). A flood of one kind never takes the
/// places of the other, and a relayed answer still in the relay cache takes no place at all (it is answered before
/// admission).
///
/// Each kind is split into a verified and an unverified share. UDP sources can be forged, so UDP requests (without
/// a valid DNS cookie, RFC 7873) are unverified, counted apart from the same network's verified ones (TCP, DNS over
/// TLS, HTTPS, UDP with a server cookie) and may take at most half of the kind's total: queries forged in a
/// network's name, or from many made-up networks at once, never take the places of requests whose source is known.
/// A UDP query refused a place is answered truncated (TC), so a real client asks again over TCP, in the verified
/// share, instead of getting SERVFAIL.
///
/// Once half of a kind's total is taken, an IPv6 block of sixteen networks' width (a /32 for /48 networks) gets no
/// more places of it past four networks' shares (``ClientNetwork/aggregateShare``): sixteen /48s of one cheap
/// allocation cannot fill a total alone, and a carrier's /32 is not held back while places are plentiful.
///
/// A request is admitted before its lookups start and leaves when its answer is ready or it is cancelled (its
/// client went away). A verified request that finds only its network's share taken (the total has room) waits in
/// that network's queue, in order, for a place of its network to come back, at most `serve.upstreamQueueMs`: a busy
/// network's misses arrive in bursts, and its places turn over in milliseconds, so a heavy legitimate client (a
/// cluster's forwarder is one client network) is answered a little later instead of refused, and still asks the
/// upstream no more than its share at once. A network may have ``queueShare`` shares waiting, at most an eighth of
/// the kind's total (``queueCap(_:)``); all queues together hold the kind's total; once half of that waits, an IPv6
/// block waits with four networks' worth at most. Unverified (UDP) requests never wait. Past a bound, or at the end of
/// the wait, the request is answered at once: HTTP 503 with `Retry-After`, SERVFAIL over TCP and TLS, TC over UDP.
/// So a flood of names no cache holds from one network costs at most its share of upstream queries (plus its
/// waiting ones), and the cached and local answers of every other network never wait behind it (they need no
/// admission).
final class UpstreamBudget: Sendable {
    /// What a place is for.
    enum Kind: Sendable, Hashable {
        /// A lookup of addresses (a cache miss).
        case lookup
        /// A query of another type relayed to the forwarder.
        case relay
    }

    /// The bounds of one kind: in total, and for one client network (verified and unverified counted apart).
    struct Bounds: Sendable, Hashable {
        var total: Int
        var perNetwork: Int
    }

    fileprivate struct Key: Hashable {
        var network: ClientNetwork
        var unverified: Bool
        var kind: Kind
    }

    private struct Counts {
        var total = 0
        var unverified = 0
    }

    /// A request waiting for a place of its network; `grant` takes the place (called outside the lock, on the
    /// thread that gave the place back).
    private struct Waiter {
        var id: Int
        var grant: @Sendable (Ticket) -> Void
        /// The IPv6 block it is counted in, if any.
        var block: Key?
    }

    private struct State {
        var lookups = Counts()
        var relays = Counts()
        var perNetwork: [Key: Int] = [:]
        /// Places by IPv6 block, kind and verification (a block's key holds the block in place of the network).
        var perBlock: [Key: Int] = [:]
        /// The requests waiting for a place, by network (in order), how many wait by kind, and by IPv6 block.
        var queues: [Key: CircularBuffer<Waiter>] = [:]
        var queuedLookups = 0
        var queuedRelays = 0
        var queuedPerBlock: [Key: Int] = [:]
        var nextWaiter = 0

        subscript(kind: Kind) -> Counts {
            get { kind == .lookup ? lookups : relays }
            set { if kind == .lookup { lookups = newValue } else { relays = newValue } }
        }

        func queued(_ kind: Kind) -> Int { kind == .lookup ? queuedLookups : queuedRelays }

        mutating func countQueued(_ key: Key, block: Key?, _ sign: Int) {
            if key.kind == .lookup { queuedLookups += sign } else { queuedRelays += sign }
            if let block {
                let count = queuedPerBlock[block, default: 0] + sign
                queuedPerBlock[block] = count > 0 ? count : nil
            }
        }

        /// Takes the waiter `id` (every one when `nil`: the first) out of `key`'s queue, in place.
        mutating func takeWaiter(_ key: Key, id: Int?) -> Waiter? {
            guard let queue = queues[key],
                let index = id.map({ id in queue.firstIndex { $0.id == id } }) ?? queue.indices.first
            else { return nil }
            let waiter = queues[key]!.remove(at: index)
            if queues[key]!.isEmpty { queues[key] = nil }
            countQueued(key, block: waiter.block, -1)
            return waiter
        }
    }

    private let state = Locked(State())

    /// A place taken; give it back with ``UpstreamBudget/release(_:)`` once.
    struct Ticket: Sendable {
        fileprivate let key: Key
        /// The key of the IPv6 block's count, if the network has one.
        fileprivate let block: Key?
    }

    /// A request waiting in its network's queue; ``UpstreamBudget/withdraw(_:)`` takes it out.
    struct QueuedPlace: Sendable {
        fileprivate let key: Key
        fileprivate let id: Int
    }

    /// How many times its share of places a network may have waiting in its queue.
    static let queueShare = 4

    /// What ``admit(_:unverified:kind:bounds:prefixes:queueing:)`` did.
    enum Admission {
        /// A place is taken.
        case admitted(Ticket)
        /// The network's share is taken: the request waits for one of its places.
        case queued(QueuedPlace)
        /// No place, and no room to wait.
        case refused
    }

    /// Requests waiting for upstreams now, both kinds.
    var inFlight: Int { state.withLock { $0.lookups.total + $0.relays.total } }

    /// Requests waiting for a place of their network now, both kinds.
    var queued: Int { state.withLock { $0.queuedLookups + $0.queuedRelays } }

    /// Requests of `kind` waiting now, and how many of them are unverified.
    func waiting(_ kind: Kind) -> (total: Int, unverified: Int) {
        state.withLock { ($0[kind].total, $0[kind].unverified) }
    }

    /// Takes a place of `kind` for a request from `client` (`unverified`: its source may be forged, as over UDP),
    /// counted by its network cut to `prefixes`; `nil` when the kind's total, the unverified half of it, or the
    /// client network's share is reached.
    func admit(
        _ client: IPAddress?, unverified: Bool, kind: Kind, bounds: Bounds, prefixes: ClientPrefixes = ClientPrefixes()
    ) -> Ticket? {
        guard
            case .admitted(let ticket) = admit(
                client, unverified: unverified, kind: kind, bounds: bounds,
                prefixes: prefixes, queueing: nil)
        else { return nil }
        return ticket
    }

    /// As ``admit(_:unverified:kind:bounds:prefixes:)``; when only the client network's share is taken and
    /// `queueing` is given, a verified request waits in its network's queue (see ``queueCap(_:)``, the type's
    /// bounds) and `queueing` gets the place when one of the network's comes back, unless ``withdraw(_:)`` took the
    /// request out first.
    func admit(
        _ client: IPAddress?, unverified: Bool, kind: Kind, bounds: Bounds, prefixes: ClientPrefixes = ClientPrefixes(),
        queueing: (@Sendable (Ticket) -> Void)?
    ) -> Admission {
        let network = ClientNetwork(client, prefixes: prefixes)
        let key = Key(network: network, unverified: unverified, kind: kind)
        let block = network.aggregate(prefixes).map { Key(network: $0, unverified: unverified, kind: kind) }
        return state.withLock { state in
            let current = state.perNetwork[key, default: 0]
            var counts = state[kind]
            guard counts.total < bounds.total else { return .refused }
            let inBlock = block.map { state.perBlock[$0, default: 0] } ?? 0
            guard inBlock < bounds.perNetwork * ClientNetwork.aggregateShare || counts.total < bounds.total / 2 else {
                return .refused
            }
            if unverified {
                guard counts.unverified < max(bounds.total / 2, 1) else { return .refused }
            }
            guard current < bounds.perNetwork else {
                return Self.enqueue(key, block: block, bounds: bounds, queueing: queueing, &state)
            }
            if unverified { counts.unverified += 1 }
            counts.total += 1
            state[kind] = counts
            state.perNetwork[key] = current + 1
            if let block { state.perBlock[block] = inBlock + 1 }
            return .admitted(Ticket(key: key, block: block))
        }
    }

    private static func enqueue(
        _ key: Key, block: Key?, bounds: Bounds, queueing: (@Sendable (Ticket) -> Void)?, _ state: inout State
    ) -> Admission {
        // Unverified (UDP) requests never wait: a forged source must not hold the room verified ones wait in, and a
        // refused UDP query is answered TC, so a real client asks again over TCP and may wait there.
        let waiting = state.queued(key.kind)
        let cap = queueCap(bounds)
        guard let queueing, !key.unverified, state.queues[key]?.count ?? 0 < cap, waiting < bounds.total else {
            return .refused
        }
        // Once half the room is taken, an IPv6 block waits with at most four networks' worth.
        if let block, waiting >= bounds.total / 2,
            state.queuedPerBlock[block, default: 0] >= cap * ClientNetwork.aggregateShare
        {
            return .refused
        }
        let id = state.nextWaiter
        state.nextWaiter &+= 1
        state.queues[key, default: CircularBuffer()].append(Waiter(id: id, grant: queueing, block: block))
        state.countQueued(key, block: block, 1)
        return .queued(QueuedPlace(key: key, id: id))
    }

    /// How many requests one network may have waiting: ``queueShare`` times its share of places, and never more
    /// than an eighth of the kind's total, so that eight networks at least are needed to fill the room.
    static func queueCap(_ bounds: Bounds) -> Int {
        max(min(bounds.perNetwork * queueShare, bounds.total / 8), 1)
    }

    /// Takes a waiting request out of its queue; `false` when it is not there (it was given a place already).
    func withdraw(_ place: QueuedPlace) -> Bool {
        state.withLock { $0.takeWaiter(place.key, id: place.id) != nil }
    }

    /// Gives a place back: to the first request waiting in its network's queue, if any (the counts stay), else to
    /// the budget.
    func release(_ ticket: Ticket) {
        let next = state.withLock { state -> Waiter? in
            if let first = state.takeWaiter(ticket.key, id: nil) { return first }
            state[ticket.key.kind].total -= 1
            if ticket.key.unverified { state[ticket.key.kind].unverified -= 1 }
            let remaining = state.perNetwork[ticket.key, default: 1] - 1
            state.perNetwork[ticket.key] = remaining > 0 ? remaining : nil
            if let block = ticket.block {
                let inBlock = state.perBlock[block, default: 1] - 1
                state.perBlock[block] = inBlock > 0 ? inBlock : nil
            }
            return nil
        }
        next?.grant(ticket)
    }
}
