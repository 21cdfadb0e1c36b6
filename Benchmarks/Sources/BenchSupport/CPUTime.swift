import Glibc

/// CPU time (user and system, every thread) spent so far, read with `getrusage`.
///
/// Throughput on a shared 2-core machine swings with the scheduling of the other processes (the server under test,
/// the load generator, neighbours of the virtual machine); the CPU a side spends per request swings far less, so the
/// benchmarks report it beside the rate.
public enum CPUTime {
    /// Whose CPU time to read.
    public enum Who: Sendable {
        /// This process, all of its threads.
        case process
        /// The children this process has waited for (`h2load`, run and waited for by a benchmark).
        case children
    }

    /// The CPU time of `who` so far, in microseconds.
    public static func microseconds(_ who: Who) -> Double {
        var usage = rusage()
        _ = getrusage(who == .process ? Int32(RUSAGE_SELF.rawValue) : Int32(RUSAGE_CHILDREN.rawValue), &usage)
        let user = Double(usage.ru_utime.tv_sec) * 1e6 + Double(usage.ru_utime.tv_usec)
        let system = Double(usage.ru_stime.tv_sec) * 1e6 + Double(usage.ru_stime.tv_usec)
        return user + system
    }

    /// The CPU microseconds `who` spent in `body`, with `body`'s result.
    public static func measure<T>(_ who: Who, _ body: () async throws -> T) async rethrows -> (T, cpu: Double) {
        let before = microseconds(who)
        let result = try await body()
        return (result, microseconds(who) - before)
    }
}
