#if canImport(Glibc)
    package import Glibc
#elseif canImport(Musl)
    package import Musl
#elseif canImport(Darwin)
    package import Darwin
#endif

/// The package's conversions between `Duration`, plain numbers and the C library's `timespec`, in one place.
extension Duration {
    /// The duration in (fractional) milliseconds.
    package var fractionalMilliseconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) * 1000 + Double(attoseconds) / 1e15
    }

    /// The duration in (fractional) seconds.
    package var fractionalSeconds: Double { fractionalMilliseconds / 1000 }

    /// The duration in whole nanoseconds, saturating at the limits of Int64.
    package var wholeNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (product, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        let (sum, overflow2) = product.addingReportingOverflow(attoseconds / 1_000_000_000)
        return overflow2 ? .max : sum
    }

    /// The duration in whole milliseconds, rounded up (a timeout is never shortened), saturating at Int64's limits.
    package var roundedUpMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        let (product, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        if overflow { return seconds < 0 ? .min : .max }
        let (sum, overflow2) = product.addingReportingOverflow(
            (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
        return overflow2 ? .max : sum
    }

    /// A duration of `seconds` (fractional) seconds.
    package static func seconds(fractional seconds: Double) -> Duration {
        .nanoseconds(Int64((seconds * 1e9).rounded()))
    }
}

/// A `timespec` read as its two words (seconds, then nanoseconds, both `long`). Its members are not reachable by
/// name in every build configuration (release builds attribute Glibc's `timespec` to another C module under
/// MemberImportVisibility), so the package never names them and never builds one itself.
package struct TimeSpecWords: Sendable, Hashable {
    package var seconds: Int
    package var nanoseconds: Int

    init(seconds: Int, nanoseconds: Int) {
        self.seconds = seconds
        self.nanoseconds = nanoseconds
    }

    package init(_ value: timespec) {
        self.seconds = withUnsafeBytes(of: value) { $0.load(as: Int.self) }
        self.nanoseconds = withUnsafeBytes(of: value) { $0.load(fromByteOffset: MemoryLayout<Int>.size, as: Int.self) }
    }

    /// `clock_gettime(clock)`.
    package static func now(_ clock: clockid_t) -> TimeSpecWords {
        var words: (Int, Int) = (0, 0)
        withUnsafeMutableBytes(of: &words) { raw in
            _ = clock_gettime(clock, raw.baseAddress!.assumingMemoryBound(to: timespec.self))
        }
        return TimeSpecWords(seconds: words.0, nanoseconds: words.1)
    }

    /// The instant in nanoseconds (wrapping, which a monotonic clock never reaches).
    package var totalNanoseconds: Int64 { Int64(seconds) &* 1_000_000_000 &+ Int64(nanoseconds) }
}
