import Foundation

/// The clocks the cache and the host resolver read: a monotonic one for expiry and rate limits, and the wall clock
/// for the persisted file (monotonic instants mean nothing after a restart).
///
/// Tests inject a clock they move by hand, so TTL expiry and staleness need no sleeping.
public struct CacheClock: Sendable {
    /// The current monotonic instant.
    public var now: @Sendable () -> ContinuousClock.Instant
    /// The current wall-clock time in seconds since 1970.
    public var wallSeconds: @Sendable () -> Double

    /// Creates a clock from its two readings.
    public init(
        now: @escaping @Sendable () -> ContinuousClock.Instant,
        wallSeconds: @escaping @Sendable () -> Double
    ) {
        self.now = now
        self.wallSeconds = wallSeconds
    }

    /// The system's clocks.
    public static let system = CacheClock(
        now: { ContinuousClock.now },
        wallSeconds: { Date().timeIntervalSince1970 }
    )
}

extension Duration {
    /// The duration in (fractional) milliseconds.
    var fractionalMilliseconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) * 1000 + Double(attoseconds) / 1e15
    }

    /// The duration in (fractional) seconds.
    var fractionalSeconds: Double { fractionalMilliseconds / 1000 }

    /// A duration of `seconds` (fractional) seconds.
    static func seconds(fractional seconds: Double) -> Duration {
        .nanoseconds(Int64((seconds * 1e9).rounded()))
    }
}
