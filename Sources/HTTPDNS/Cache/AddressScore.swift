import Foundation

/// How measured connect latencies and failures turn into a score. Lower scores are better; a score is an
/// expected connect time in milliseconds plus a failure penalty that halves every ``penaltyHalfLife``.
public struct ScoringPolicy: Sendable, Hashable {
    /// The latency assumed for an address that has not been measured yet, in milliseconds.
    public var unmeasuredMilliseconds: Double
    /// The weight of a new latency sample in the moving average (0 < weight ≤ 1).
    public var smoothing: Double
    /// The penalty one failed connect adds, in milliseconds.
    public var failurePenaltyMilliseconds: Double
    /// The time in which a penalty halves, so that a recovered address comes back.
    public var penaltyHalfLife: Duration
    /// The largest penalty an address can carry, in milliseconds.
    public var maximumPenaltyMilliseconds: Double

    /// Creates a policy.
    public init(
        unmeasuredMilliseconds: Double = 250,
        smoothing: Double = 0.3,
        failurePenaltyMilliseconds: Double = 10_000,
        penaltyHalfLife: Duration = .seconds(30),
        maximumPenaltyMilliseconds: Double = 100_000
    ) {
        self.unmeasuredMilliseconds = unmeasuredMilliseconds
        self.smoothing = min(max(smoothing, 0.01), 1)
        self.failurePenaltyMilliseconds = failurePenaltyMilliseconds
        self.penaltyHalfLife = penaltyHalfLife
        self.maximumPenaltyMilliseconds = maximumPenaltyMilliseconds
    }

    /// 250 ms for unmeasured addresses, weight 0.3, 10 s per failure halving every 30 s.
    public static let `default` = ScoringPolicy()
}

/// What is known about connecting to one address of one host.
struct AddressScore: Sendable, Hashable {
    /// The moving average of connect latencies, in milliseconds; `nil` until the first success.
    var latencyMilliseconds: Double?
    /// The failure penalty as it was at ``penaltyAt``.
    var penalty: Double = 0
    /// When ``penalty`` was last changed.
    var penaltyAt: CacheInstant?
    /// Successful connects seen.
    var successes: Int = 0
    /// Failed connects seen.
    var failures: Int = 0

    /// The penalty at `now`, decayed.
    func penalty(at now: CacheInstant, policy: ScoringPolicy) -> Double {
        guard penalty > 0, let penaltyAt else { return 0 }
        let halfLives = (now - penaltyAt).fractionalSeconds / max(policy.penaltyHalfLife.fractionalSeconds, 0.001)
        let value = penalty * exp2(-max(halfLives, 0))
        return value < 0.5 ? 0 : value
    }

    /// The score at `now`: lower is better.
    func value(at now: CacheInstant, policy: ScoringPolicy) -> Double {
        (latencyMilliseconds ?? policy.unmeasuredMilliseconds) + penalty(at: now, policy: policy)
    }

    /// Whether anything was measured.
    var isMeasured: Bool { latencyMilliseconds != nil || failures > 0 }

    /// A successful connect that took `latency`: the average moves toward it and the penalty halves.
    mutating func recordSuccess(latency: Duration, at now: CacheInstant, policy: ScoringPolicy) {
        let sample = max(latency.fractionalMilliseconds, 0)
        if let average = latencyMilliseconds {
            latencyMilliseconds = average + policy.smoothing * (sample - average)
        } else {
            latencyMilliseconds = sample
        }
        penalty = penalty(at: now, policy: policy) / 2
        penaltyAt = now
        successes += 1
    }

    /// A failed connect: the penalty grows by one failure's worth, up to the maximum.
    mutating func recordFailure(at now: CacheInstant, policy: ScoringPolicy) {
        penalty = min(penalty(at: now, policy: policy) + policy.failurePenaltyMilliseconds, policy.maximumPenaltyMilliseconds)
        penaltyAt = now
        failures += 1
    }
}
