import HTTPDNS

/// Per-client token buckets: each client may make `burst` requests at once and `perSecond` more every second.
///
/// Clients are keyed by network, not by address (an IPv4 /32, an IPv6 /64, which one host usually owns). The table
/// holds at most ``maximumClients`` buckets: when it is full, the buckets that have filled up again (clients that
/// went quiet) are dropped, and if none has, the new client shares one overflow bucket, so a flood of source
/// addresses cannot grow memory.
final class RateLimiter: Sendable {
    /// A rate and a burst; a rate of 0 turns limiting off.
    struct Limits: Sendable, Hashable {
        var perSecond: Double
        var burst: Double

        var isEnabled: Bool { perSecond > 0 }
    }

    private struct Bucket {
        var tokens: Double
        var updated: ContinuousClock.Instant
    }

    private struct State {
        var limits: Limits
        var buckets: [ClientNetwork: Bucket] = [:]
    }

    /// The most clients tracked one by one.
    let maximumClients: Int
    private let state: Locked<State>

    init(limits: Limits, maximumClients: Int = 100_000) {
        self.maximumClients = maximumClients
        self.state = Locked(State(limits: limits))
    }

    /// Replaces the limits (a settings reload); buckets keep their tokens, capped to the new burst.
    func update(_ limits: Limits) {
        state.withLock { state in
            state.limits = limits
            if !limits.isEnabled { state.buckets = [:] }
        }
    }

    /// Takes one token for `client`.
    /// - Returns: `nil` when the request may go ahead, else how long until the next token (for `Retry-After`).
    func admit(_ client: IPAddress?, now: ContinuousClock.Instant = .now) -> Duration? {
        state.withLock { state -> Duration? in
            let limits = state.limits
            guard limits.isEnabled else { return nil }
            var key = ClientNetwork(client)
            if state.buckets[key] == nil, state.buckets.count >= maximumClients {
                Self.dropFull(&state, now: now)
                if state.buckets.count >= maximumClients { key = .shared }
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
        state.buckets = state.buckets.filter { key, bucket in
            key == .shared
                || bucket.tokens + (now - bucket.updated).fractionalSeconds * limits.perSecond < limits.burst
        }
    }
}
