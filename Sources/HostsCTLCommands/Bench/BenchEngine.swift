import HTTPDNS
import Synchronization

/// One source under measurement: how to resolve a host with it, and the executor its workers should prefer.
struct BenchTarget: Sendable {
    /// The name printed in the report (`cares`, `system`, a provider's name, `pipeline-warm`, …).
    var name: String
    /// Where the workers run; c-ares's own thread keeps each round trip free of thread hops.
    var executor: (any TaskExecutor)?
    /// Resolves one host once.
    var resolve: @Sendable (HostName, AddressFamily) async throws -> Void
    /// Runs before the warmup, untimed (e.g. fills the cache of `pipeline-warm`).
    var prepare: (@Sendable ([HostName], AddressFamily) async -> Void)?
    /// Releases what the target holds.
    var close: @Sendable () async -> Void
}

/// How much load to generate per source.
struct BenchPlan: Sendable, Hashable {
    /// When a source's run ends.
    enum Length: Sendable, Hashable {
        /// After this many queries.
        case queries(Int)
        /// After this long; queries in flight at the end are still counted.
        case duration(Duration)
    }

    var length: Length
    /// Queries kept in flight, each by its own worker that sends the next query when the last one ends.
    var concurrency: Int
    /// The untimed run before the measurement, if any.
    var warmup: Length?
    var family: AddressFamily
    /// Asked in turn, round-robin over all workers.
    var hosts: [HostName]
}

/// What one source did in `hostsctl bench`: counts, errors by code, elapsed time and the latency of every
/// successful query.
public struct BenchResult: Sendable {
    /// The source's name (`cares`, `system`, a provider's name, `pipeline-warm`, …).
    public var source: String
    /// Queries finished, answered or failed.
    public var queries: Int
    /// Queries answered with addresses.
    public var ok: Int
    /// Failed queries by `HTTPDNSError.Code` name.
    public var errors: [String: Int]
    /// From the first measured query sent to the last one finished: nothing before it (making the resolver,
    /// preparing, the warm-up, starting the workers) and nothing after it (collecting the tallies) is counted.
    var elapsed: Duration
    /// What came before the measured run: making the source, preparing it and the warm-up queries.
    var setup: Duration = .zero
    /// Latencies of the successful queries in milliseconds, sorted ascending.
    var latenciesMs: [Double]

    /// Queries (answered or failed) per second of the run.
    public var queriesPerSecond: Double {
        let seconds = elapsed.fractionalSeconds
        return seconds > 0 ? Double(queries) / seconds : 0
    }

    /// The share of queries that succeeded, 0 to 1.
    var successRate: Double { queries > 0 ? Double(ok) / Double(queries) : 0 }

    /// The latency below which a `fraction` of the successful queries fall (nearest rank); `nil` without any.
    public func percentile(_ fraction: Double) -> Double? {
        guard !latenciesMs.isEmpty else { return nil }
        let rank = Int((fraction * Double(latenciesMs.count)).rounded(.up))
        return latenciesMs[min(max(rank, 1), latenciesMs.count) - 1]
    }

    /// The slowest successful query, in milliseconds.
    var maximum: Double? { latenciesMs.last }
}

/// Counts finished queries for the progress display.
final class BenchCounter: Sendable {
    private let value = Atomic<Int>(0)

    func add(_ count: Int = 1) { value.add(count, ordering: .relaxed) }
    var current: Int { value.load(ordering: .relaxed) }
    /// Takes the next ticket: 0, 1, 2, … across all callers.
    func next() -> Int { value.add(1, ordering: .relaxed).oldValue }
}

/// Generates load against one target at a time: `concurrency` long-lived workers, each awaiting one query at a
/// time, on the target's preferred executor. Each worker keeps its own tallies, merged at the end, so the only
/// shared write per query is one relaxed atomic add (the ticket that picks the host and ends a counted run).
enum BenchEngine {
    /// Runs `plan` against `target`; `progress` counts finished measured queries as they happen.
    static func run(_ target: BenchTarget, plan: BenchPlan, progress: BenchCounter) async -> BenchResult {
        let clock = ContinuousClock()
        let began = clock.now
        await target.prepare?(plan.hosts, plan.family)
        if let warmup = plan.warmup {
            _ = await measure(target, plan: plan, length: warmup, progress: BenchCounter())
        }
        let setup = clock.now - began
        var result = await measure(target, plan: plan, length: plan.length, progress: progress)
        result.source = target.name
        result.setup = setup
        return result
    }

    private struct Tally: Sendable {
        var ok = 0
        var failed = 0
        var errors: [String: Int] = [:]
        var latenciesMs: [Double] = []
        /// When this worker sent its first query and when its last one ended.
        var first: ContinuousClock.Instant?
        var last: ContinuousClock.Instant?
    }

    private static func measure(
        _ target: BenchTarget, plan: BenchPlan, length: BenchPlan.Length, progress: BenchCounter
    ) async -> BenchResult {
        let clock = ContinuousClock()
        let tickets = BenchCounter()
        let hosts = plan.hosts
        let family = plan.family
        let resolve = target.resolve
        let start = clock.now
        let limit: Int?
        let deadline: ContinuousClock.Instant?
        switch length {
        case .queries(let count):
            limit = count
            deadline = nil
        case .duration(let duration):
            limit = nil
            deadline = start + duration
        }
        let workers = limit.map { min(plan.concurrency, $0) } ?? plan.concurrency
        let expected = limit.map { $0 / max(workers, 1) + 1 } ?? 1024
        let tally = await withTaskGroup(of: Tally.self) { group in
            for _ in 0..<workers {
                group.addTask(executorPreference: target.executor) {
                    var tally = Tally()
                    tally.latenciesMs.reserveCapacity(expected)
                    while !Task.isCancelled {
                        let sent = clock.now
                        let ticket: Int
                        if let limit {
                            ticket = tickets.next()
                            if ticket >= limit { break }
                        } else {
                            if let deadline, sent >= deadline { break }
                            ticket = tickets.next()
                        }
                        if tally.first == nil { tally.first = sent }
                        do {
                            try await resolve(hosts[ticket % hosts.count], family)
                            let done = clock.now
                            tally.last = done
                            tally.ok += 1
                            tally.latenciesMs.append((done - sent).fractionalMilliseconds)
                        } catch let error as HTTPDNSError {
                            tally.last = clock.now
                            tally.failed += 1
                            tally.errors[error.code.description, default: 0] += 1
                        } catch {
                            tally.last = clock.now
                            tally.failed += 1
                            tally.errors[error is CancellationError ? "cancelled" : "internalError", default: 0] += 1
                        }
                        progress.add()
                    }
                    return tally
                }
            }
            var total = Tally()
            for await part in group {
                total.ok += part.ok
                total.failed += part.failed
                total.errors.merge(part.errors, uniquingKeysWith: +)
                total.latenciesMs += part.latenciesMs
                if let first = part.first { total.first = min(total.first ?? first, first) }
                if let last = part.last { total.last = max(total.last ?? last, last) }
            }
            return total
        }
        // The window of the queries themselves; a run that sent nothing lasted as long as it took to find out.
        let elapsed = tally.first.flatMap { first in tally.last.map { $0 - first } } ?? (clock.now - start)
        return BenchResult(
            source: target.name,
            queries: tally.ok + tally.failed,
            ok: tally.ok,
            errors: tally.errors,
            elapsed: elapsed,
            latenciesMs: tally.latenciesMs.sorted()
        )
    }
}
