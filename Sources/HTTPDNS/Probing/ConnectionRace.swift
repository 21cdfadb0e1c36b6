package import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients
/// A connection race in the manner of RFC 8305 ("Happy Eyeballs"): TCP connects to a host's ranked addresses,
/// started one after another with a short delay, the first to connect wins.
///
/// Used before a request whose best address has not proven itself (never answered, or carrying a failure
/// penalty): instead of waiting a full connect timeout on a dead address, the next-ranked one starts after
/// ``attemptDelay`` (or at once when the attempt before it fails), and the request goes to the winner. Attempts
/// that lose keep running to their own end in the background, and every outcome is reported, so the scores learn
/// from losers too. Only connects are raced, never requests: nothing is sent, so no request can be sent twice. The
/// winner's connection can be kept (``runKeepingWinner(_:port:report:)``) for the request to go out on.
package struct ConnectionRace: Sendable {
    /// The delay before the next attempt starts when the current one has neither connected nor failed.
    var attemptDelay: Duration
    /// The shortest delay, used when an address's measured connect time predicts a quick answer.
    var minimumAttemptDelay: Duration
    /// How long one connect may take.
    var connectTimeout: Duration
    /// What connects.
    var prober: any ConnectProber

    package init(
        attemptDelay: Duration, minimumAttemptDelay: Duration = .milliseconds(10), connectTimeout: Duration,
        prober: any ConnectProber
    ) {
        self.attemptDelay = attemptDelay
        self.minimumAttemptDelay = min(minimumAttemptDelay, attemptDelay)
        self.connectTimeout = connectTimeout
        self.prober = prober
    }

    /// The wait before the attempt after `address`: twice its measured connect time when that is shorter than
    /// ``attemptDelay`` (a fast address that has not answered by then is unlikely to), never below
    /// ``minimumAttemptDelay``.
    func delay(after address: RankedAddress) -> Duration {
        guard let latency = address.latencyMilliseconds, address.penaltyMilliseconds < 1 else { return attemptDelay }
        let predicted = Duration.milliseconds(Int64((latency * 2).rounded(.up)))
        return min(max(predicted, minimumAttemptDelay), attemptDelay)
    }

    /// Races connects to `addresses` (in order) on `port`; returns the first address that connected, or `nil` when
    /// every attempt failed or the task was cancelled. `report` receives every attempt's outcome, also those that
    /// end after the race. The winning connection is closed.
    func run(
        _ addresses: [RankedAddress],
        port: Int,
        report: @escaping @Sendable (IPAddress, ProbeOutcome) -> Void
    ) async -> IPAddress? {
        guard let (winner, connection) = await runKeepingWinner(addresses, port: port, report: report) else {
            return nil
        }
        connection?.close()
        return winner
    }

    /// Races as ``run(_:port:report:)`` does, and hands over the winner's connection (when the prober keeps
    /// connections) so the request it raced for goes out on it instead of dialling the winner again. Connections of
    /// attempts that connect after the race are closed.
    package func runKeepingWinner(
        _ addresses: [RankedAddress],
        port: Int,
        report: @escaping @Sendable (IPAddress, ProbeOutcome) -> Void
    ) async -> (IPAddress, DialedConnection?)? {
        guard !addresses.isEmpty else { return nil }
        enum Event: Sendable {
            case outcome(Int, ProbeOutcome, DialedConnection?)
            case delayPassed(Int)
        }
        let (events, sink) = AsyncStream<Event>.makeStream()
        var timers: [Task<Void, Never>] = []
        defer {
            sink.finish()
            for timer in timers { timer.cancel() }
        }
        var started = 0
        var failed = 0
        func startNext() {
            let index = started
            started += 1
            let ip = addresses[index].ip
            let prober = prober, timeout = connectTimeout
            // Unstructured on purpose: a losing attempt keeps running after the race and still reports.
            Task {
                let (outcome, connection) = await prober.dial(ip, port: port, timeout: timeout)
                report(ip, outcome)
                // After the race the stream is finished: a late winner's connection is closed here. (One that
                // arrives while the race is returning is closed when the buffered event goes.)
                if case .terminated = sink.yield(.outcome(index, outcome, connection)) { connection?.close() }
            }
            if started < addresses.count {
                let delay = delay(after: addresses[index])
                timers.append(
                    Task {
                        guard (try? await Task.sleep(for: delay)) != nil else { return }
                        sink.yield(.delayPassed(index))
                    })
            }
        }
        startNext()
        for await event in events {
            switch event {
            case .outcome(let index, .connected, let connection):
                return (addresses[index].ip, connection)
            case .outcome:
                failed += 1
                if started < addresses.count {
                    startNext()
                } else if failed == addresses.count {
                    return nil
                }
            case .delayPassed(let index):
                // Only the newest attempt's delay starts another; an older timer is stale.
                if index == started - 1, started < addresses.count { startNext() }
            }
        }
        return nil
    }
}
