import Foundation

/// How much longer than usual time-bound steps of the tests may take: `HTTPDNS_TEST_TIME_SCALE` (default 1).
/// `scripts/sanitize.sh` sets it, since the sanitizers make everything several times slower; timeouts that a test
/// expects to hit stay short.
public enum TestTiming {
    /// The factor.
    public static let scale: Double = {
        let value = ProcessInfo.processInfo.environment["HTTPDNS_TEST_TIME_SCALE"].flatMap(Double.init) ?? 1
        return value.isFinite && value >= 1 ? value : 1
    }()

    /// `duration` stretched by ``scale``.
    public static func scaled(_ duration: Duration) -> Duration { duration * scale }
}
