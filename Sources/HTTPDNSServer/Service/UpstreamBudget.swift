import HTTPDNS

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
/// client went away). Past a bound the request is answered at once: HTTP 503 with `Retry-After`, SERVFAIL over TCP
/// and TLS, TC over UDP. So a flood of names no cache holds from one network costs at most its share of upstream
/// queries, and the cached and local answers of every other network never wait behind it (they need no admission).
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

    private struct State {
        var lookups = Counts()
        var relays = Counts()
        var perNetwork: [Key: Int] = [:]
        /// Places by IPv6 block, kind and verification (a block's key holds the block in place of the network).
        var perBlock: [Key: Int] = [:]

        subscript(kind: Kind) -> Counts {
            get { kind == .lookup ? lookups : relays }
            set { if kind == .lookup { lookups = newValue } else { relays = newValue } }
        }
    }

    private let state = Locked(State())

    /// A place taken; give it back with ``UpstreamBudget/release(_:)`` once.
    struct Ticket: Sendable {
        fileprivate let key: Key
        /// The key of the IPv6 block's count, if the network has one.
        fileprivate let block: Key?
    }

    /// Requests waiting for upstreams now, both kinds.
    var inFlight: Int { state.withLock { $0.lookups.total + $0.relays.total } }

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
        let network = ClientNetwork(client, prefixes: prefixes)
        let key = Key(network: network, unverified: unverified, kind: kind)
        let block = network.aggregate(prefixes).map { Key(network: $0, unverified: unverified, kind: kind) }
        return state.withLock { state in
            let current = state.perNetwork[key, default: 0]
            var counts = state[kind]
            guard counts.total < bounds.total, current < bounds.perNetwork else { return nil }
            let inBlock = block.map { state.perBlock[$0, default: 0] } ?? 0
            guard inBlock < bounds.perNetwork * ClientNetwork.aggregateShare || counts.total < bounds.total / 2 else {
                return nil
            }
            if unverified {
                guard counts.unverified < max(bounds.total / 2, 1) else { return nil }
                counts.unverified += 1
            }
            counts.total += 1
            state[kind] = counts
            state.perNetwork[key] = current + 1
            if let block { state.perBlock[block] = inBlock + 1 }
            return Ticket(key: key, block: block)
        }
    }

    /// Gives a place back.
    func release(_ ticket: Ticket) {
        state.withLock { state in
            state[ticket.key.kind].total -= 1
            if ticket.key.unverified { state[ticket.key.kind].unverified -= 1 }
            let remaining = state.perNetwork[ticket.key, default: 1] - 1
            state.perNetwork[ticket.key] = remaining > 0 ? remaining : nil
            if let block = ticket.block {
                let inBlock = state.perBlock[block, default: 1] - 1
                state.perBlock[block] = inBlock > 0 ? inBlock : nil
            }
        }
    }
}
