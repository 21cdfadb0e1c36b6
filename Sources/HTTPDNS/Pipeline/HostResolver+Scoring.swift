import CoreMetrics
import Logging
import Synchronization
public import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients
import HTTPDNSPinnedClients

/// What callers measured, and the background probes that measure the rest.
extension HostResolver {
    // MARK: Scoring

    /// Reports a TCP connect to `ip` of `host` that succeeded after `latency` (a connect time, comparable with the
    /// background probes'; report the time to a response with `reportFirstByte(to:of:latency:)` (the fronts do)).
    public func reportConnect(to ip: IPAddress, of host: HostName, latency: Duration) {
        cache?.recordConnect(to: cacheAddress(for: ip, of: host), of: host, latency: latency)
    }

    /// Reports a request to `ip` of `host` whose first response byte came after `latency`: kept apart from connect
    /// times, and proof that the address answers (its back-off ends).
    package func reportFirstByte(to ip: IPAddress, of host: HostName, latency: Duration) {
        cache?.recordFirstByte(to: cacheAddress(for: ip, of: host), of: host, latency: latency)
    }

    /// Reports a connect to `ip` of `host` that failed; the address drops in the ranking until its penalty decays.
    public func reportFailure(to ip: IPAddress, of host: HostName) {
        cache?.recordFailure(to: cacheAddress(for: ip, of: host), of: host)
    }

    /// Call when the network changed (interface, Wi-Fi, VPN) and the resolver does not watch it itself
    /// (`network.watch`): every cached answer is refreshed on its next use (served stale meanwhile), every address
    /// is probed again, NAT64 is discovered again and pooled connections are closed.
    public func networkDidChange() {
        logger.info("network changed; every cached answer is due for refresh")
        cache?.markAllForRefresh()
        network?.networkChanged()
        clientPool.retireAll()
    }

    func startProbe(_ request: HostCacheCore.ProbeRequest) {
        guard let prober, let probing = policy.probing, let cache else { return }
        // An address already being probed (for this host or another) is left to that probe.
        let addresses = state.withLock {
            $0.admissions.claimProbes(
                request.addresses, limit: probing.maximumAddressesPerRound,
                includingGuarded: probing.probesGuardedAddresses)
        }
        guard !addresses.isEmpty else { return }
        probesRunning.add(1, ordering: .relaxed)
        let ports = request.port.map { [$0] } ?? probing.ports
        let started = tasks.spawn(optional: true) { [self] in
            defer {
                probesRunning.subtract(1, ordering: .relaxed)
                state.withLock { $0.admissions.releaseProbes(addresses) }
            }
            await withTaskGroup(of: (IPAddress, ProbeOutcome).self) { group in
                var next = 0
                func probeNext() {
                    let ip = addresses[next]
                    next += 1
                    group.addTask {
                        // A little jitter, so rounds of many hosts do not connect in lockstep.
                        try? await Task.sleep(for: .milliseconds(Int.random(in: 0...20)))
                        var outcome = ProbeOutcome.failed(.connectionFailed)
                        // Through the NAT64 prefix on a host without an IPv4 route: the path requests take.
                        let dial = self.network?.dialAddress(for: ip) ?? ip
                        for port in ports {
                            outcome = await prober.probe(dial, port: port, timeout: probing.timeout)
                            if outcome.isSuccess || Task.isCancelled { break }
                        }
                        return (ip, outcome)
                    }
                }
                while next < min(probing.maximumConcurrentProbesPerHost, addresses.count) { probeNext() }
                for await (ip, outcome) in group {
                    if next < addresses.count, !Task.isCancelled { probeNext() }
                    if Task.isCancelled { continue }
                    switch outcome {
                    case .connected(let latency):
                        metrics.probesConnected.increment()
                        metrics.probeDuration.recordNanoseconds(latency.wholeNanoseconds)
                        cache.recordConnect(to: ip, of: request.host, latency: latency)
                    case .failed(let code):
                        metrics.probesFailed.increment()
                        logger.debug(
                            "probe failed", metadata: ["host": "\(request.host)", "ip": "\(ip)", "error": "\(code)"])
                        cache.recordFailure(to: ip, of: request.host)
                    }
                }
            }
        }
        if !started {
            probesRunning.subtract(1, ordering: .relaxed)
            state.withLock { $0.admissions.releaseProbes(addresses) }
        }
    }
}
