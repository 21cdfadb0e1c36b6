import CoreMetrics
import Logging
import Synchronization
import HTTPDNSCore
import HTTPDNSPinnedClients

/// Following the host's network: the kernel's address and route changes (``NetworkMonitor``), what the resolver does
/// about them, and the changes handed to applications.
extension HostResolver {
    /// The changes of the host's network this resolver sees, from now on, as they settle (a resolver that does not
    /// watch the network, `network.watch: false`, sends none). Each call is its own subscription; the sequence ends
    /// at ``shutdown()``.
    ///
    /// By the time a change arrives the resolver has followed it: on a new network (another default route or
    /// prefix) the scores of the old network are put aside and those of the new one (none the first time) take
    /// their place, every cached answer is refreshed on its next use (served stale meanwhile), `/etc/resolv.conf` is
    /// read again (a settings-built resolver rebuilds its upstreams) and NAT64 discovered again; when addresses went
    /// away, pooled connections are closed, since those made through them are dead.
    public func networkChanges() -> AsyncStream<NetworkChange> {
        let (stream, continuation) = AsyncStream<NetworkChange>.makeStream(bufferingPolicy: .bufferingNewest(16))
        let id = state.withLock { state -> Int? in
            guard !shutDown.load(ordering: .acquiring) else { return nil }
            state.nextListener += 1
            state.networkListeners[state.nextListener] = continuation
            return state.nextListener
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { _ = $0.networkListeners.removeValue(forKey: id) }
        }
        return stream
    }

    /// Starts the watcher; a failure (no netlink in a sandbox) is logged and leaves the resolver without one.
    func startWatchingNetwork(namespace: String?) {
        do {
            let monitor = try NetworkMonitor(namespace: namespace, logger: logger) { [weak self] change in
                self?.follow(change)
            }
            state.withLock { $0.networkMonitor = monitor }
            cache?.switchNetwork(to: monitor.initialKey)
        } catch {
            logger.warning("cannot watch the network for changes", metadata: ["reason": "\(error.message)"])
        }
    }

    /// Stops the watcher and ends every subscriber's sequence.
    func stopWatchingNetwork() {
        let (monitor, listeners) = state.withLock { state in
            defer {
                state.networkMonitor = nil
                state.networkListeners = [:]
            }
            return (state.networkMonitor, Array(state.networkListeners.values))
        }
        monitor?.shutdown()
        for listener in listeners { listener.finish() }
    }

    /// What a change of the network means for the resolver (see ``networkChanges()``).
    func follow(_ change: NetworkChange) {
        guard !shutDown.load(ordering: .acquiring) else { return }
        if change.isNewNetwork {
            cache?.switchNetwork(to: change.current)
            network?.networkChanged()
            if let settings = appliedSettings {
                do {
                    try apply(settings)
                } catch {
                    logger.warning(
                        "the upstreams could not be rebuilt after a network change",
                        metadata: ["reason": "\(error.message)"])
                }
            }
        }
        if change.isNewNetwork || !change.removedAddresses.isEmpty { clientPool.retireAll() }
        metrics.networkChanges.increment()
        let listeners = state.withLock { Array($0.networkListeners.values) }
        for listener in listeners { listener.yield(change) }
    }
}
