import HTTPDNS

/// The bound on upstream work: requests that wait for an upstream (a cache miss, a forwarded query) at once, in
/// total and per client network: its /24 or /48 whatever the rate limit counts by, so that one site cannot take
/// every place with its many addresses.
///
/// UDP sources can be forged, so UDP requests are counted apart from the same network's verified ones (TCP, DNS
/// over TLS, HTTPS) and may take at most half of the total: queries forged in a network's name, or from many
/// networks at once, never take the places of requests whose source completed a handshake.
///
/// A request is admitted before its lookups start and leaves when its answer is ready or it is cancelled (its
/// client went away). Past either bound the request is answered at once: HTTP 503 with `Retry-After`, SERVFAIL over
/// DNS. So a flood of names no cache holds from one network costs at most its share of upstream queries, and the
/// cached and local answers of every other network never wait behind it (they need no admission at all).
final class UpstreamBudget: Sendable {
    /// The network a client's upstream work is counted by.
    static let prefixes = ClientPrefixes(ipv4: 24, ipv6: 48)

    fileprivate struct Key: Hashable {
        var network: ClientNetwork
        var unverified: Bool
    }

    private struct State {
        var total = 0
        var unverified = 0
        var perNetwork: [Key: Int] = [:]
    }

    private let state = Locked(State())

    /// A place taken; give it back with ``UpstreamBudget/release(_:)`` once.
    struct Ticket: Sendable {
        fileprivate let key: Key
    }

    /// Requests waiting for upstreams now.
    var inFlight: Int { state.withLock { $0.total } }

    /// Takes a place for a request from `client` (`unverified`: its source may be forged, as over UDP); `nil` when
    /// the total, the unverified share of it, or the client network's bound is reached.
    func admit(_ client: IPAddress?, unverified: Bool, total: Int, perNetwork: Int) -> Ticket? {
        let key = Key(network: ClientNetwork(client, prefixes: Self.prefixes), unverified: unverified)
        return state.withLock { state in
            let current = state.perNetwork[key, default: 0]
            guard state.total < total, current < perNetwork else { return nil }
            if unverified {
                guard state.unverified < max(total / 2, 1) else { return nil }
                state.unverified += 1
            }
            state.total += 1
            state.perNetwork[key] = current + 1
            return Ticket(key: key)
        }
    }

    /// Gives a place back.
    func release(_ ticket: Ticket) {
        state.withLock { state in
            state.total -= 1
            if ticket.key.unverified { state.unverified -= 1 }
            let remaining = state.perNetwork[ticket.key, default: 1] - 1
            state.perNetwork[ticket.key] = remaining > 0 ? remaining : nil
        }
    }
}
