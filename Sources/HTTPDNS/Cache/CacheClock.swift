import Foundation
import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients
import Synchronization

/// The clocks the cache and the host resolver read: a monotonic one for expiry and rate limits, and the wall clock
/// and the boot clock for the persisted file (monotonic instants mean nothing after a restart).
///
/// Expiry never follows the wall clock while running, so stepping it (NTP, a user, a VM restored) neither keeps
/// answers alive nor kills them. The persisted file records the wall time, the boot's identity and the boot clock
/// at saving, so that a later load measures the time that passed with the boot clock when the machine has not
/// restarted, whatever the wall clock did in between (``CacheFile``).
///
/// Tests inject a clock they move by hand, so TTL expiry, staleness and clock steps need no sleeping.
package struct CacheClock: Sendable {
    /// The current monotonic time in nanoseconds from an arbitrary origin.
    var monotonicNanoseconds: @Sendable () -> Int64
    /// The current wall-clock time in seconds since 1970.
    var wallSeconds: @Sendable () -> Double
    /// The time since boot in seconds, suspended time included (`CLOCK_BOOTTIME`): steps of the wall clock do not
    /// move it, and it only restarts with the machine.
    var bootSeconds: @Sendable () -> Double
    /// This boot's identity (`/proc/sys/kernel/random/boot_id`), which tells whether ``bootSeconds`` of a saved file
    /// can be compared with now; `nil` where the system has none.
    var bootID: String?

    /// Creates a clock from its readings.
    init(
        monotonicNanoseconds: @escaping @Sendable () -> Int64,
        wallSeconds: @escaping @Sendable () -> Double,
        bootSeconds: @escaping @Sendable () -> Double = { 0 },
        bootID: String? = nil
    ) {
        self.monotonicNanoseconds = monotonicNanoseconds
        self.wallSeconds = wallSeconds
        self.bootSeconds = bootSeconds
        self.bootID = bootID
    }

    /// The system's clocks: ``SuspendAwareMonotonic`` for expiry, the wall clock, `CLOCK_BOOTTIME` and the boot id.
    package static let system = CacheClock(
        monotonicNanoseconds: { SuspendAwareMonotonic.now() },
        wallSeconds: { Date().timeIntervalSince1970 },
        bootSeconds: { Double(TimeSpecWords.now(CLOCK_BOOTTIME).totalNanoseconds) / 1e9 },
        bootID: currentBootID
    )

    /// The boot id, read once.
    private static let currentBootID: String? = {
        guard let text = try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8) else {
            return nil
        }
        let id = text.trimmingCharacters(in: .whitespacesAndNewlines)
        return id.isEmpty || id.utf8.count > 64 ? nil : id
    }()

    /// The current monotonic instant.
    func now() -> CacheInstant { CacheInstant(nanoseconds: monotonicNanoseconds()) }

    /// Now, by the clocks that outlive the process (for the persisted file).
    package func moment() -> CacheFile.Moment {
        CacheFile.Moment(wall: wallSeconds(), boot: bootSeconds(), bootID: bootID)
    }
}

/// `CLOCK_MONOTONIC_COARSE` plus the time the machine spent suspended, so that an answer cached before a laptop
/// slept for an hour is not served as fresh after it wakes (`CLOCK_MONOTONIC` stops during suspend).
///
/// The coarse clock is read without a system call or a TSC read (a few nanoseconds on every lookup instead of tens,
/// measured 2.7 against 21 ns for `CLOCK_BOOTTIME`) and ticks every few milliseconds, far finer than TTLs in seconds
/// need. The suspended time (`CLOCK_BOOTTIME` − `CLOCK_MONOTONIC`) is read again once a second of running time has
/// passed, so a woken process catches up within a second.
enum SuspendAwareMonotonic {
    /// The suspended time last read, in nanoseconds; it only grows.
    private static let suspended = Atomic<Int64>(0)
    /// The coarse reading when ``suspended`` was last read.
    private static let checkedAt = Atomic<Int64>(Int64.min / 2)

    /// The current reading in nanoseconds.
    static func now() -> Int64 {
        let coarse = TimeSpecWords.now(CLOCK_MONOTONIC_COARSE).totalNanoseconds
        if coarse &- checkedAt.load(ordering: .relaxed) >= 1_000_000_000 {
            checkedAt.store(coarse, ordering: .relaxed)
            let offset =
                TimeSpecWords.now(CLOCK_BOOTTIME).totalNanoseconds
                &- TimeSpecWords.now(CLOCK_MONOTONIC).totalNanoseconds
            // Two threads may read at once: keep the larger, so the offset never goes back.
            _ = suspended.max(offset, ordering: .relaxed)
        }
        return coarse &+ suspended.load(ordering: .relaxed)
    }
}

/// A monotonic instant as plain nanoseconds. The cache stores instants in every entry; this fixed-layout type
/// keeps those entries trivially copyable (ContinuousClock.Instant is resilient, so every copy of a struct holding
/// one goes through value witnesses).
package struct CacheInstant: Comparable, Hashable, Sendable {
    var nanoseconds: Int64

    /// The instant `nanoseconds` after the clock's zero.
    package init(nanoseconds: Int64) {
        self.nanoseconds = nanoseconds
    }

    package static func < (lhs: CacheInstant, rhs: CacheInstant) -> Bool { lhs.nanoseconds < rhs.nanoseconds }

    static func + (lhs: CacheInstant, rhs: Duration) -> CacheInstant {
        CacheInstant(nanoseconds: lhs.nanoseconds &+ rhs.wholeNanoseconds)
    }

    static func - (lhs: CacheInstant, rhs: Duration) -> CacheInstant {
        CacheInstant(nanoseconds: lhs.nanoseconds &- rhs.wholeNanoseconds)
    }

    static func - (lhs: CacheInstant, rhs: CacheInstant) -> Duration {
        .nanoseconds(lhs.nanoseconds &- rhs.nanoseconds)
    }
}
