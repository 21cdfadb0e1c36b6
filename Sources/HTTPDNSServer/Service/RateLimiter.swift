import HTTPDNS
import Synchronization

/// Per-client token buckets: each client may make `burst` requests at once and `perSecond` more every second.
///
/// Clients are keyed by network (``ClientPrefixes``: an IPv4 address, an IPv6 /56 by default), not by address, and
/// by whether their source address is verified: a UDP query's source can be forged, so UDP queries have buckets of
/// their own, and queries forged in a client's name empty only its UDP bucket, never the one its TCP, DNS-over-TLS
/// and HTTPS requests draw on (those sources completed a handshake). The table holds at most ``maximumClients`` buckets. When it is full, buckets that have filled up again (clients that
/// went quiet) are dropped, in one sweep at most once a second; if none has, the new client takes the place of an
/// arbitrary one. A flood of source networks therefore cannot grow memory, costs O(1) a request, and never makes
/// another client share a bucket (a client whose bucket was dropped starts again with a full one, so the flood can
/// only make limits more lenient, never refuse a well-behaved client).
final class RateLimiter: Sendable {
    /// A rate and a burst; a rate of 0 turns limiting off.
    struct Limits: Sendable, Hashable {
        var perSecond: Double
        var burst: Double
        var prefixes = ClientPrefixes()

        var isEnabled: Bool { perSecond > 0 }
    }

    private struct Bucket {
        var tokens: Double
        var updated: ContinuousClock.Instant
    }

    private struct Key: Hashable {
        var network: ClientNetwork
        var unverified: Bool
    }

    private struct State {
        var limits: Limits
        var buckets: [Key: Bucket] = [:]
        var lastSweep: ContinuousClock.Instant?
    }

    /// The most clients tracked one by one.
    let maximumClients: Int
    private let state: Locked<State>
    /// Whether limiting is on, readable without the lock: with it off (the default) a request costs one atomic load.
    private let enabled: Atomic<Bool>

    init(limits: Limits, maximumClients: Int = 100_000) {
        self.maximumClients = max(maximumClients, 1)
        self.state = Locked(State(limits: limits))
        self.enabled = Atomic(limits.isEnabled)
    }

    /// Replaces the limits (a settings reload); buckets keep their tokens, capped to the new burst.
    func update(_ limits: Limits) {
        state.withLock { state in
            if !limits.isEnabled || limits.prefixes != state.limits.prefixes { state.buckets = [:] }
            state.limits = limits
            enabled.store(limits.isEnabled, ordering: .relaxed)
        }
    }

    /// Takes one token for `client`; `unverified` for a source that may be forged (UDP).
    /// - Returns: `nil` when the request may go ahead, else how long until the next token (for `Retry-After`).
    func admit(_ client: IPAddress?, unverified: Bool = false, now: ContinuousClock.Instant? = nil) -> Duration? {
        guard enabled.load(ordering: .relaxed) else { return nil }
        let now = now ?? .now
        return state.withLock { state -> Duration? in
            let limits = state.limits
            guard limits.isEnabled else { return nil }
            let key = Key(network: ClientNetwork(client, prefixes: limits.prefixes), unverified: unverified)
            if state.buckets[key] == nil, state.buckets.count >= maximumClients {
                if state.lastSweep.map({ now - $0 >= .seconds(1) }) ?? true {
                    state.lastSweep = now
                    Self.dropFull(&state, now: now)
                }
                if state.buckets.count >= maximumClients { state.buckets.remove(at: state.buckets.startIndex) }
            }
            var bucket = state.buckets[key] ?? Bucket(tokens: limits.burst, updated: now)
            let elapsed = (now - bucket.updated).fractionalSeconds
            bucket.tokens = min(limits.burst, bucket.tokens + elapsed * limits.perSecond)
            bucket.updated = now
            defer { state.buckets[key] = bucket }
            guard bucket.tokens >= 1 else {
                return .milliseconds(Int(((1 - bucket.tokens) / limits.perSecond * 1000).rounded(.up)))
            }
            bucket.tokens -= 1
            return nil
        }
    }

    /// How many clients have a bucket.
    var trackedClients: Int { state.withLock { $0.buckets.count } }

    private static func dropFull(_ state: inout State, now: ContinuousClock.Instant) {
        let limits = state.limits
        state.buckets = state.buckets.filter { _, bucket in
            bucket.tokens + (now - bucket.updated).fractionalSeconds * limits.perSecond < limits.burst
        }
    }
}
