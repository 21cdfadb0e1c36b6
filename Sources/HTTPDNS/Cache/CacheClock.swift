import Foundation
import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients

/// The clocks the cache and the host resolver read: a monotonic one for expiry and rate limits, and the wall clock
/// for the persisted file (monotonic instants mean nothing after a restart).
///
/// Tests inject a clock they move by hand, so TTL expiry and staleness need no sleeping.
package struct CacheClock: Sendable {
    /// The current monotonic time in nanoseconds from an arbitrary origin.
    package var monotonicNanoseconds: @Sendable () -> Int64
    /// The current wall-clock time in seconds since 1970.
    package var wallSeconds: @Sendable () -> Double

    /// Creates a clock from its two readings.
    package init(
        monotonicNanoseconds: @escaping @Sendable () -> Int64,
        wallSeconds: @escaping @Sendable () -> Double
    ) {
        self.monotonicNanoseconds = monotonicNanoseconds
        self.wallSeconds = wallSeconds
    }

    /// The system's clocks: `CLOCK_MONOTONIC_COARSE` and the wall clock. The coarse clock is read without a
    /// system call or a TSC read (a few nanoseconds on every lookup instead of tens) and ticks every few
    /// milliseconds, far finer than TTLs in seconds need.
    package static let system = CacheClock(
        monotonicNanoseconds: { coarseMonotonicNanoseconds() },
        wallSeconds: { Date().timeIntervalSince1970 }
    )

    /// The current monotonic instant.
    package func now() -> CacheInstant { CacheInstant(nanoseconds: monotonicNanoseconds()) }
}

/// `CLOCK_MONOTONIC_COARSE` in nanoseconds.
private func coarseMonotonicNanoseconds() -> Int64 {
    TimeSpecWords.now(CLOCK_MONOTONIC_COARSE).totalNanoseconds
}

/// A monotonic instant as plain nanoseconds. The cache stores instants in every entry; this fixed-layout type
/// keeps those entries trivially copyable (ContinuousClock.Instant is resilient, so every copy of a struct holding
/// one goes through value witnesses).
package struct CacheInstant: Comparable, Hashable, Sendable {
    package var nanoseconds: Int64

    /// The instant `nanoseconds` after the clock's zero.
    package init(nanoseconds: Int64) {
        self.nanoseconds = nanoseconds
    }

    package static func < (lhs: CacheInstant, rhs: CacheInstant) -> Bool { lhs.nanoseconds < rhs.nanoseconds }

    package static func + (lhs: CacheInstant, rhs: Duration) -> CacheInstant {
        CacheInstant(nanoseconds: lhs.nanoseconds &+ rhs.wholeNanoseconds)
    }

    package static func - (lhs: CacheInstant, rhs: Duration) -> CacheInstant {
        CacheInstant(nanoseconds: lhs.nanoseconds &- rhs.wholeNanoseconds)
    }

    package static func - (lhs: CacheInstant, rhs: CacheInstant) -> Duration {
        .nanoseconds(lhs.nanoseconds &- rhs.nanoseconds)
    }
}
