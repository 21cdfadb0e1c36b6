import Foundation
import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients

/// How measured connect latencies and failures turn into a score. Lower scores are better; a score is an
/// expected connect time in milliseconds plus a failure penalty that halves every ``penaltyHalfLife``.
///
/// Only comparable measurements are mixed: the connect average takes TCP connect times (background probes and
/// connection races); the time to the first response byte of real requests, which includes the server's own work,
/// is kept apart and only breaks ties. After a failure an address also backs off: it ranks behind every address
/// that is not backing off until ``failureBackoff`` (doubling with each further failure in a row, up to
/// ``maximumFailureBackoff``) has passed or it answers again.
struct ScoringPolicy: Sendable, Hashable {
    /// The latency assumed for an address that has not been measured yet, in milliseconds.
    var unmeasuredMilliseconds: Double
    /// The weight of a new latency sample in the moving average (0 < weight ≤ 1).
    var smoothing: Double
    /// The penalty one failed connect adds, in milliseconds.
    var failurePenaltyMilliseconds: Double
    /// The time in which a penalty halves, so that a recovered address comes back.
    var penaltyHalfLife: Duration
    /// The largest penalty an address can carry, in milliseconds.
    var maximumPenaltyMilliseconds: Double
    /// How long an address backs off after its first failure in a row; each further failure doubles it.
    var failureBackoff: Duration
    /// The longest back-off.
    var maximumFailureBackoff: Duration

    /// Creates a policy.
    init(
        unmeasuredMilliseconds: Double = 250,
        smoothing: Double = 0.3,
        failurePenaltyMilliseconds: Double = 10_000,
        penaltyHalfLife: Duration = .seconds(30),
        maximumPenaltyMilliseconds: Double = 100_000,
        failureBackoff: Duration = .seconds(5),
        maximumFailureBackoff: Duration = .seconds(300)
    ) {
        self.unmeasuredMilliseconds = unmeasuredMilliseconds
        self.smoothing = min(max(smoothing, 0.01), 1)
        self.failurePenaltyMilliseconds = failurePenaltyMilliseconds
        self.penaltyHalfLife = penaltyHalfLife
        self.maximumPenaltyMilliseconds = maximumPenaltyMilliseconds
        self.failureBackoff = max(failureBackoff, .zero)
        self.maximumFailureBackoff = max(maximumFailureBackoff, self.failureBackoff)
    }

    /// 250 ms for unmeasured addresses, weight 0.3, 10 s per failure halving every 30 s, back-off from 5 s to 5 min.
    static let `default` = ScoringPolicy()

    /// The back-off after `failures` failures in a row.
    func backoff(afterFailuresInARow failures: Int) -> Duration {
        guard failures > 0, failureBackoff > .zero else { return .zero }
        let doublings = min(failures - 1, 20)
        let seconds = failureBackoff.fractionalSeconds * Double(1 << doublings)
        return min(.seconds(fractional: seconds), maximumFailureBackoff)
    }
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
    /// The moving average of the time to the first response byte of real requests, in milliseconds.
    var firstByteMilliseconds: Double?
    /// Failures since the last success.
    var failuresInARow: Int = 0
    /// Until when the address backs off (ranks behind the addresses that do not).
    var backoffUntil: CacheInstant?

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
    var isMeasured: Bool { latencyMilliseconds != nil || failures > 0 || firstByteMilliseconds != nil }

    /// Whether the address is backing off at `now`.
    func isBackingOff(at now: CacheInstant) -> Bool {
        backoffUntil.map { now < $0 } ?? false
    }

    /// A successful connect that took `latency`: the average moves toward it, the penalty halves and any back-off
    /// ends.
    mutating func recordSuccess(latency: Duration, at now: CacheInstant, policy: ScoringPolicy) {
        latencyMilliseconds = Self.average(latencyMilliseconds, latency, policy: policy)
        answered(at: now, policy: policy)
    }

    /// A request to the address got its first response byte after `latency`: kept apart from connect times; the
    /// address answered, so the penalty halves and any back-off ends.
    mutating func recordFirstByte(latency: Duration, at now: CacheInstant, policy: ScoringPolicy) {
        firstByteMilliseconds = Self.average(firstByteMilliseconds, latency, policy: policy)
        answered(at: now, policy: policy)
    }

    /// A failed connect: the penalty grows by one failure's worth, up to the maximum, and the address backs off.
    mutating func recordFailure(at now: CacheInstant, policy: ScoringPolicy) {
        penalty = min(
            penalty(at: now, policy: policy) + policy.failurePenaltyMilliseconds, policy.maximumPenaltyMilliseconds)
        penaltyAt = now
        failures = failures.addingReportingOverflow(1).overflow ? failures : failures + 1
        failuresInARow = min(failuresInARow + 1, 1_000)
        let backoff = policy.backoff(afterFailuresInARow: failuresInARow)
        backoffUntil = backoff > .zero ? now + backoff : nil
    }

    private mutating func answered(at now: CacheInstant, policy: ScoringPolicy) {
        penalty = penalty(at: now, policy: policy) / 2
        penaltyAt = now
        successes = successes.addingReportingOverflow(1).overflow ? successes : successes + 1
        failuresInARow = 0
        backoffUntil = nil
    }

    private static func average(_ current: Double?, _ sample: Duration, policy: ScoringPolicy) -> Double {
        let sample = max(sample.fractionalMilliseconds, 0)
        guard let current else { return sample }
        return current + policy.smoothing * (sample - current)
    }
}
