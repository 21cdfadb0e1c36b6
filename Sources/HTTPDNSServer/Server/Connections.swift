import CoreMetrics
import HTTPDNS
import Logging
import NIOCore

/// The open connections, for graceful shutdown and the connection limits.
///
/// At the total limit, accepting stops by turning `autoRead` off on the listening channel (the kernel keeps queueing
/// connections in the backlog) and starts again when one closes. The listeners (HTTP, DNS over TCP, DNS over TLS)
/// share the limit: each one that accepts a connection while the limit is reached is paused too (that connection is
/// closed), and every paused listener is resumed when the count falls below the limit, whichever listener's
/// connection closed. A listener with a limit of its own (`HTTPDNSServer.Configuration.ListenerLimits`) is paused the
/// same way at that limit and resumed when one of its own connections closes (and the total allows). The option
/// changes are made under the lock that decides them, so they reach each listening channel's event loop in the order
/// they were decided. A client network at its own limit has its new connection closed at once (the backlog cannot
/// hold one client's connections back while serving others'); the table of counts only holds networks with a
/// connection open.
final class Connections: Sendable {
    private struct State {
        var open: [ObjectIdentifier: any Channel] = [:]
        var perClient: [ClientNetwork: Int] = [:]
        /// Connections open by listening channel, for the listeners with a limit of their own.
        var perListener: [ObjectIdentifier: Int] = [:]
        /// The listening channels paused at a limit, with their own limits, to resume when they fit again.
        var paused: [ObjectIdentifier: (listener: any Channel, limit: Int?)] = [:]
    }

    private let state = Locked(State())
    private let limit: Int
    private let perClientLimit: Int
    private let counts: Locked<HTTPDNSServer.ProtocolCounts>
    /// Where the public table's counts go; the admin listener's table has none.
    private let metrics: ServiceMetrics?
    private let logger: Logger

    init(
        limit: Int, perClient: Int, counts: Locked<HTTPDNSServer.ProtocolCounts>, metrics: ServiceMetrics?,
        logger: Logger
    ) {
        self.limit = limit
        self.perClientLimit = perClient
        self.counts = counts
        self.metrics = metrics
        self.logger = logger
    }

    var count: Int { state.withLock { $0.open.count } }

    var all: [any Channel] { state.withLock { Array($0.open.values) } }

    /// Counts `channel` from `client` as open until it closes; `false` (and nothing counted) when the total limit,
    /// its listener's `listenerLimit` or the client's is already reached.
    func admit(_ channel: any Channel, client: ClientNetwork, listenerLimit: Int? = nil) -> Bool {
        let key = ObjectIdentifier(channel)
        let listenerKey = channel.parent.map { ObjectIdentifier($0) }
        // Connections without an address to go by (not TCP) count only towards the total.
        let counted = client != .shared
        let (admitted, paused, overClientLimit) = state.withLock { state in
            let ownCount = listenerKey.map { state.perListener[$0, default: 0] } ?? 0
            guard state.open.count < limit, ownCount < listenerLimit ?? .max else {
                // Another listener reached the total first, or this one accepted past its own limit: it waits too.
                return (false, Self.pause(channel.parent, limit: listenerLimit, &state), false)
            }
            if counted {
                let current = state.perClient[client, default: 0]
                guard current < perClientLimit else { return (false, false, true) }
                state.perClient[client] = current + 1
            }
            state.open[key] = channel
            if let listenerKey { state.perListener[listenerKey] = ownCount + 1 }
            // Recorded under the lock, so the gauge's last value is the last count.
            metrics?.connectionsOpen.record(state.open.count)
            guard state.open.count == limit || ownCount + 1 == listenerLimit else { return (true, false, false) }
            return (true, Self.pause(channel.parent, limit: listenerLimit, &state), false)
        }
        if overClientLimit {
            counts.withLock { $0.refusedPerClient += 1 }
            metrics?.connectionsRefused.increment()
            logger.debug(
                "a client network is at its connection limit; closing its new connection",
                metadata: ["limit": "\(perClientLimit)"])
        }
        if paused {
            counts.withLock { $0.pauses += 1 }
            metrics?.acceptPauses.increment()
            logger.notice(
                "connection limit reached; new connections wait in the backlog",
                metadata: ["limit": "\(limit)", "listenerLimit": "\(listenerLimit.map(String.init) ?? "none")"])
        }
        guard admitted else { return false }
        channel.closeFuture.whenComplete { [self] _ in
            state.withLock { state in
                state.open[key] = nil
                metrics?.connectionsOpen.record(state.open.count)
                if counted {
                    let remaining = state.perClient[client, default: 1] - 1
                    state.perClient[client] = remaining > 0 ? remaining : nil
                }
                if let listenerKey {
                    let remaining = state.perListener[listenerKey, default: 1] - 1
                    state.perListener[listenerKey] = remaining > 0 ? remaining : nil
                }
                Self.resume(&state, limit: limit)
            }
        }
        return true
    }

    /// Resumes every paused listener that fits again: below the total limit and below its own. Call it under the
    /// lock.
    private static func resume(_ state: inout State, limit: Int) {
        guard !state.paused.isEmpty, state.open.count < limit else { return }
        for (key, paused) in state.paused where state.perListener[key, default: 0] < paused.limit ?? .max {
            paused.listener.setOption(.autoRead, value: true).whenFailure { _ in }
            state.paused[key] = nil
        }
    }

    /// Stops `listener` accepting, unless it already has; `true` when it was running. Call it under the lock.
    private static func pause(_ listener: (any Channel)?, limit: Int?, _ state: inout State) -> Bool {
        guard let listener, state.paused[ObjectIdentifier(listener)] == nil else { return false }
        state.paused[ObjectIdentifier(listener)] = (listener, limit)
        listener.setOption(.autoRead, value: false).whenFailure { _ in }
        return true
    }
}
