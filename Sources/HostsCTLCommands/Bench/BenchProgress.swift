import Foundation
import Glibc
import HTTPDNS

/// The live progress line of `hostsctl bench` on standard error: a bar, the count and the current rate of the
/// source being measured, redrawn ten times a second and erased when the source is done.
struct BenchProgress: Sendable {
    /// Whether a bar should be drawn: only when both standard output and standard error are terminals.
    static var isTerminal: Bool { isatty(STDOUT_FILENO) == 1 && isatty(STDERR_FILENO) == 1 }

    /// Draws the bar for `source` while `body` runs.
    static func show<T: Sendable>(
        source: String,
        length: BenchPlan.Length,
        counter: BenchCounter,
        _ body: () async -> T
    ) async -> T {
        let clock = ContinuousClock()
        let start = clock.now
        let drawer = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(100))
                let done = counter.current
                let elapsed = (clock.now - start).fractionalSeconds
                let fraction: Double
                let count: String
                switch length {
                case .queries(let total):
                    fraction = Double(done) / Double(max(total, 1))
                    count = "\(done)/\(total)"
                case .duration(let duration):
                    fraction = elapsed / max(duration.fractionalSeconds, 0.001)
                    count = "\(done)"
                }
                let rate = elapsed > 0 ? Int(Double(done) / elapsed) : 0
                write("\r\u{1B}[2K" + line(source: source, fraction: fraction, count: count, rate: rate))
            }
        }
        let result = await body()
        drawer.cancel()
        _ = await drawer.value
        write("\r\u{1B}[2K")
        return result
    }

    /// `cares          [########------------]  40%  8000/20000  91234 queries/s`
    static func line(source: String, fraction: Double, count: String, rate: Int) -> String {
        let width = 30
        let clamped = min(max(fraction, 0), 1)
        let filled = Int((clamped * Double(width)).rounded(.down))
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
        let name = source.count < 14 ? source + String(repeating: " ", count: 14 - source.count) : source
        return "\(name) [\(bar)] \(String(format: "%3d%%", Int(clamped * 100)))  \(count)  \(rate) queries/s"
    }

    private static func write(_ text: String) {
        FileHandle.standardError.write(Data(text.utf8))
    }
}
