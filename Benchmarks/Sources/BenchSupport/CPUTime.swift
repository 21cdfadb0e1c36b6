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
        /// Other processes (the servers `Benchmarks/run.sh` started), read from `/proc/PID/stat`; a process that
        /// cannot be read counts as 0.
        case processes([Int32])
    }

    /// The CPU time of `who` so far, in microseconds.
    public static func microseconds(_ who: Who) -> Double {
        var usage = rusage()
        switch who {
        case .process: _ = getrusage(Int32(RUSAGE_SELF.rawValue), &usage)
        case .children: _ = getrusage(Int32(RUSAGE_CHILDREN.rawValue), &usage)
        case .processes(let pids): return pids.reduce(0) { $0 + procStat($1) }
        }
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

    /// User plus system time of one process from `/proc/PID/stat` (fields 14 and 15, in clock ticks), in
    /// microseconds.
    private static func procStat(_ pid: Int32) -> Double {
        guard let file = fopen("/proc/\(pid)/stat", "r") else { return 0 }
        defer { fclose(file) }
        var bytes = [UInt8](repeating: 0, count: 1024)
        let count = fread(&bytes, 1, bytes.count, file)
        let text = String(decoding: bytes[..<count], as: UTF8.self)
        // The command name (field 2) is in parentheses and may hold spaces: count fields after its closing one.
        guard let close = text.lastIndex(of: ")") else { return 0 }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // fields[0] is field 3 (the state), so field N is fields[N - 3].
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) * 1e6 / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}
