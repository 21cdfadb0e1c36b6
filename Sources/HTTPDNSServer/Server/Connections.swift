import CoreMetrics
import HTTPDNS
import Logging
import NIOCore
import Synchronization

/// The open connections, for graceful shutdown and the connection limits.
///
/// At the total limit a new connection takes the place of an idle one (no request in progress, handshake done; see
/// ``ConnectionActivity``), which is closed: well-behaved keep-alive connections that hold places while doing
/// nothing give way to newcomers, so a few networks each at their own limit cannot lock everyone else out. The
/// place is taken from the network holding the most connections (its longest-idle one), and only when that network
/// holds at least two more than the newcomer's: places move towards an even share and never back, so a network
/// that opens and drops connections (plain TCP ones cost it no handshake) cannot churn out the keep-alive
/// connections of networks holding no more than it does, and a network takes at most its own limit of places from
/// others a minute. A newcomer whose network already holds its even share is closed at once. At the limit an IPv6
/// block of sixteen networks' width (a /32) takes no place once it holds four networks' worth of connections
/// (``ClientNetwork/aggregateShare``), so sixteen cheap /48s cannot hold the table; below the limit a block is not
/// held back (one /32 may be a whole carrier's customers).
/// Only when every connection has a request in progress does accepting stop, by turning `autoRead` off on the
/// listening channel (the kernel keeps queueing connections in the backlog); it starts again when one closes, or
/// when a check a second later finds one idle. The listeners (HTTP, DNS over TCP, DNS over TLS)
/// share the limit: each one that accepts a connection while the limit is reached is paused too (that connection is
/// closed), and every paused listener is resumed when the count falls below the limit, whichever listener's
/// connection closed. A listener with a limit of its own (`HTTPDNSServer.Configuration.ListenerLimits`) is paused the
/// same way at that limit and resumed when one of its own connections closes (and the total allows). The option
/// changes are made under the lock that decides them, so they reach each listening channel's event loop in the order
/// they were decided. A client network at its own limit has its new connection closed at once (the backlog cannot
/// hold one client's connections back while serving others'); the table of counts only holds networks with a
/// connection open.
final class Connections: Sendable {
    private struct Entry {
        var channel: any Channel
        var activity: ConnectionActivity
        var client: ClientNetwork
    }

    /// Where the place of a newcomer at the total limit comes from.
    private enum Room {
        /// The idle connection to close.
        case shed(ObjectIdentifier)
        /// Idle connections there are, but their networks hold no more than the newcomer's share.
        case evenShare
        /// No connection is idle.
        case noneIdle
    }

    private struct State {
        var open: [ObjectIdentifier: Entry] = [:]
        /// Connections closed to make room, still open until their close completes: they count no more (neither in
        /// the total nor in their network's count).
        var shed: Set<ObjectIdentifier> = []
        /// Connections by network, those without an address to go by (`.shared`) included, shed ones not.
        var perClient: [ClientNetwork: Int] = [:]
        /// Connections by IPv6 block (``ClientNetwork/aggregate(_:)``).
        var perAggregate: [ClientNetwork: Int] = [:]
        /// How many networks hold each number of connections (the keys are at most the per-network limit, for
        /// `.shared` any): the most any network holds, without a scan.
        var holdings: [Int: Int] = [:]
        /// Places each network may still take from others (a burst of its limit, its limit again each minute), so
        /// a network that closes the places it took and takes them again churns others at a bounded pace. At most
        /// ``shedBudgetTable`` networks; a full table forgets one (that network starts again with a full budget).
        var shedBudgets: [ClientNetwork: (tokens: Double, updated: NIODeadline)] = [:]
        /// Connections open by listening channel, for the listeners with a limit of their own.
        var perListener: [ObjectIdentifier: Int] = [:]
        /// The listening channels paused at a limit, with their own limits, to resume when they fit again.
        var paused: [ObjectIdentifier: (listener: any Channel, limit: Int?)] = [:]
    }

    private let state = Locked(State())
    private let limit: Int
    private let perClientLimit: Int
    private let prefixes: ClientPrefixes
    private let counts: Locked<HTTPDNSServer.ProtocolCounts>
    /// Where the public table's counts go; the admin listener's table has none.
    private let metrics: ServiceMetrics?
    private let logger: Logger

    init(
        limit: Int, perClient: Int, prefixes: ClientPrefixes = ClientPrefixes(),
        counts: Locked<HTTPDNSServer.ProtocolCounts>, metrics: ServiceMetrics?, logger: Logger
    ) {
        self.limit = limit
        self.perClientLimit = perClient
        self.prefixes = prefixes
        self.counts = counts
        self.metrics = metrics
        self.logger = logger
    }

    var count: Int { state.withLock { $0.open.count } }

    /// How many open connections are between requests (tests wait on it to know a request head has been read).
    var idleCount: Int { state.withLock { $0.open.values.count { $0.activity.idleSince != nil } } }

    var all: [any Channel] { state.withLock { $0.open.values.map(\.channel) } }

    /// Counts `channel` from `client` as open until it closes, and returns where its guard tells whether it is
    /// idle; `nil` (and nothing counted) when its listener's `listenerLimit` or the client network's limit is already
    /// reached, or the total is and no connection of a network holding more can make room (or the client's IPv6
    /// block holds its quarter, or its network has taken its share of places from others this minute).
    func admit(_ channel: any Channel, client: ClientNetwork, listenerLimit: Int? = nil) -> ConnectionActivity? {
        let key = ObjectIdentifier(channel)
        let listenerKey = channel.parent.map { ObjectIdentifier($0) }
        // Connections without an address to go by (not TCP) have no limit of their own.
        let counted = client != .shared
        let aggregate = client.aggregate(prefixes)
        let aggregateLimit = perClientLimit * ClientNetwork.aggregateShare
        let activity = ConnectionActivity()
        let (admitted, paused, overClientLimit, shed) = state.withLock {
            state -> (Bool, Bool, Bool, (any Channel)?) in
            let ownCount = listenerKey.map { state.perListener[$0, default: 0] } ?? 0
            guard ownCount < listenerLimit ?? .max else {
                // This listener accepted past its own limit: it waits.
                return (false, Self.pause(channel.parent, limit: listenerLimit, &state), false, nil)
            }
            let held = state.perClient[client, default: 0]
            if counted, held >= perClientLimit { return (false, false, true, nil) }
            var shed: (any Channel)?
            if state.open.count - state.shed.count >= limit {
                // Under pressure only: an IPv6 block past its quarter takes nothing more (it keeps what it holds).
                if let aggregate, state.perAggregate[aggregate, default: 0] >= aggregateLimit {
                    return (false, false, true, nil)
                }
                switch room(&state, for: client, holding: held) {
                case .shed(let victim):
                    state.shed.insert(victim)
                    if let entry = state.open[victim] {
                        shed = entry.channel
                        Self.uncount(entry.client, &state, prefixes: prefixes)
                    }
                case .evenShare:
                    return (false, false, true, nil)
                case .noneIdle:
                    // Full, nobody idle: accepting waits for one to close.
                    return (false, Self.pause(channel.parent, limit: listenerLimit, &state), false, nil)
                }
            }
            Self.count(client, &state, prefixes: prefixes)
            state.open[key] = Entry(channel: channel, activity: activity, client: client)
            if let listenerKey { state.perListener[listenerKey] = ownCount + 1 }
            // Recorded under the lock, so the gauge's last value is the last count.
            metrics?.connectionsOpen.record(state.open.count - state.shed.count)
            // Full now with nobody idle to give way: the next clients wait in the backlog (looked at again each
            // second, and when a connection closes), rather than being accepted and closed.
            let full = state.open.count - state.shed.count >= limit && Self.longestIdle(state) == nil
            guard ownCount + 1 == listenerLimit || full else { return (true, false, false, shed) }
            return (true, Self.pause(channel.parent, limit: listenerLimit, &state), false, shed)
        }
        report(
            shed: shed, refused: overClientLimit, paused: paused, on: channel.eventLoop, listenerLimit: listenerLimit)
        guard admitted else { return nil }
        channel.closeFuture.whenComplete { [self] _ in
            state.withLock { state in
                state.open[key] = nil
                // A shed connection left its network's count when it was chosen.
                if state.shed.remove(key) == nil { Self.uncount(client, &state, prefixes: prefixes) }
                metrics?.connectionsOpen.record(state.open.count - state.shed.count)
                if let listenerKey {
                    let remaining = state.perListener[listenerKey, default: 1] - 1
                    state.perListener[listenerKey] = remaining > 0 ? remaining : nil
                }
                Self.resume(&state, limit: limit)
            }
        }
        return activity
    }

    /// What ``admit(_:client:listenerLimit:)`` decided, done outside the lock: the shed connection closed, the
    /// refusal or the pause counted and logged.
    private func report(
        shed: (any Channel)?, refused: Bool, paused: Bool, on eventLoop: any EventLoop, listenerLimit: Int?
    ) {
        if let shed {
            counts.withLock { $0.shed += 1 }
            metrics?.connectionsShed.increment()
            shed.close(promise: nil)
        }
        if refused {
            counts.withLock { $0.refusedPerClient += 1 }
            metrics?.connectionsRefused.increment()
            logger.debug(
                "a client network holds its share of connections; closing its new connection",
                metadata: ["limit": "\(perClientLimit)"])
        }
        if paused {
            resumeWhenIdle(on: eventLoop)
            counts.withLock { $0.pauses += 1 }
            metrics?.acceptPauses.increment()
            logger.notice(
                "connection limit reached; new connections wait in the backlog",
                metadata: ["limit": "\(limit)", "listenerLimit": "\(listenerLimit.map(String.init) ?? "none")"])
        }
    }

    /// Adds one connection of `client` to its network's and block's counts. Call it under the lock.
    private static func count(_ client: ClientNetwork, _ state: inout State, prefixes: ClientPrefixes) {
        let held = state.perClient[client, default: 0]
        state.perClient[client] = held + 1
        moveHolding(from: held, to: held + 1, &state)
        if let aggregate = client.aggregate(prefixes) { state.perAggregate[aggregate, default: 0] += 1 }
    }

    /// Takes one connection of `client` out of its network's and block's counts. Call it under the lock.
    private static func uncount(_ client: ClientNetwork, _ state: inout State, prefixes: ClientPrefixes) {
        let held = state.perClient[client, default: 1]
        state.perClient[client] = held > 1 ? held - 1 : nil
        moveHolding(from: held, to: held - 1, &state)
        if let aggregate = client.aggregate(prefixes) {
            let inBlock = state.perAggregate[aggregate, default: 1] - 1
            state.perAggregate[aggregate] = inBlock > 0 ? inBlock : nil
        }
    }

    /// One network moved from holding `old` connections to `new` (0: none, not counted).
    private static func moveHolding(from old: Int, to new: Int, _ state: inout State) {
        if old > 0 {
            let networks = state.holdings[old, default: 1] - 1
            state.holdings[old] = networks > 0 ? networks : nil
        }
        if new > 0 { state.holdings[new, default: 0] += 1 }
    }

    /// The most networks the shed budgets follow at once.
    static let shedBudgetTable = 4_096

    /// Takes one place from `client`'s budget of places taken from others; `false` when it is spent.
    private func takeShedBudget(_ client: ClientNetwork, _ state: inout State) -> Bool {
        let now = NIODeadline.now()
        let burst = Double(perClientLimit)
        let perSecond = burst / 60
        if state.shedBudgets[client] == nil, state.shedBudgets.count >= Self.shedBudgetTable {
            state.shedBudgets.remove(at: state.shedBudgets.startIndex)
        }
        var budget = state.shedBudgets[client] ?? (burst, now)
        let elapsed = Double((now - budget.updated).nanoseconds) / 1e9
        budget.tokens = min(burst, budget.tokens + elapsed * perSecond)
        budget.updated = now
        guard budget.tokens >= 1 else {
            state.shedBudgets[client] = budget
            return false
        }
        budget.tokens -= 1
        state.shedBudgets[client] = budget.tokens >= burst ? nil : budget
        return true
    }

    /// Where a newcomer of `client`, whose network holds `held` connections, finds a place in a full table: the
    /// longest-idle connection of the network holding the most, if that network holds at least `held + 2` (after
    /// the move it still holds no fewer than the newcomer's; a move between networks one apart would only swap
    /// them), or at least one for a newcomer holding none (else a table of single connections, one each from
    /// hundreds of networks, would refuse everyone new), and only while the newcomer's network has places left to
    /// take from others (``takeShedBudget(_:_:)``). Whether any network holds enough is known without a scan
    /// (``State/holdings``); the scan for the connection runs only when one does, and the limit is a few hundred
    /// connections (docs/security.md).
    private func room(_ state: inout State, for client: ClientNetwork, holding held: Int) -> Room {
        let needed = held == 0 ? 1 : held + 2
        guard let most = state.holdings.keys.max(), most >= needed else { return .evenShare }
        var best: (key: ObjectIdentifier, holding: Int, since: UInt64)?
        var anyIdle = false
        for (key, entry) in state.open {
            guard let since = entry.activity.idleSince, !state.shed.contains(key) else { continue }
            anyIdle = true
            let holding = state.perClient[entry.client, default: 0]
            guard holding >= needed else { continue }
            if let current = best, current.holding > holding || (current.holding == holding && current.since <= since) {
                continue
            }
            best = (key, holding, since)
        }
        guard let best else { return anyIdle ? .evenShare : .noneIdle }
        return takeShedBudget(client, &state) ? .shed(best.key) : .evenShare
    }

    /// The connection idle the longest (not shed already), if any is idle. A scan: it runs only at the limit, and
    /// the limit is a few thousand connections (docs/security.md).
    private static func longestIdle(_ state: State) -> ObjectIdentifier? {
        var oldest: (key: ObjectIdentifier, since: UInt64)?
        for (key, entry) in state.open {
            guard let since = entry.activity.idleSince, !state.shed.contains(key) else { continue }
            if since < oldest?.since ?? .max { oldest = (key, since) }
        }
        return oldest?.key
    }

    /// Resumes the listeners paused at the total limit if a connection has become idle since (so a new one can take
    /// its place); else looks again a second later. Paused listeners are otherwise resumed when a connection closes.
    private func resumeWhenIdle(on eventLoop: any EventLoop) {
        eventLoop.scheduleTask(in: .seconds(1)) { [self] in
            let again = state.withLock { state -> Bool in
                guard !state.paused.isEmpty else { return false }
                guard Self.longestIdle(state) != nil else { return true }
                Self.resume(&state, limit: .max)
                return false
            }
            if again { resumeWhenIdle(on: eventLoop) }
        }
    }

    /// Resumes every paused listener that fits again: below the total limit and below its own. Call it under the
    /// lock.
    private static func resume(_ state: inout State, limit: Int) {
        guard !state.paused.isEmpty, state.open.count - state.shed.count < limit else { return }
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

/// Whether one connection is between requests, and since when: its ``ConnectionGuard`` writes it on the
/// connection's event loop as requests come and go, and ``Connections`` reads it from the accepting thread when it
/// must make room. One atomic word: a store per change of state, a load per look.
final class ConnectionActivity: Sendable {
    private static let busy = UInt64.max
    /// `NIODeadline.uptimeNanoseconds` of when the connection became idle; ``busy`` while a request is in progress
    /// or the TLS handshake is not done (a new connection starts busy).
    private let since = Atomic<UInt64>(ConnectionActivity.busy)

    /// When the connection became idle, `nil` while it is busy.
    var idleSince: UInt64? {
        let value = since.load(ordering: .relaxed)
        return value == Self.busy ? nil : value
    }

    /// The connection has no request in progress since `moment`.
    func idle(since moment: NIODeadline) { since.store(moment.uptimeNanoseconds, ordering: .relaxed) }

    /// A request (or the handshake) is in progress.
    func busy() { since.store(Self.busy, ordering: .relaxed) }
}
