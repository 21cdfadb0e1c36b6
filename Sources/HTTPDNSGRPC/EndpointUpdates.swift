import GRPCCore
import GRPCNIOTransportHTTP2Posix
import HTTPDNS
import Logging
import Synchronization

/// The push-mode name sequence of one target: the first list as soon as the host resolves, then a new list each
/// time the ranking changes enough to matter (see `NameResolvers.HTTPDNS`). It never ends on its own; gRPC
/// cancels the task reading it when the channel closes.
struct EndpointUpdates: AsyncSequence, Sendable {
    typealias Element = NameResolutionResult
    typealias Failure = any Error

    let resolver: HostResolver
    let target: ResolvableTargets.HTTPDNS
    let configuration: NameResolvers.HTTPDNS.Configuration
    let logger: Logger

    func makeAsyncIterator() -> Iterator {
        Iterator(updates: self, network: NetworkGeneration(resolver: resolver))
    }

    struct Iterator: AsyncIteratorProtocol {
        let updates: EndpointUpdates
        let network: NetworkGeneration
        /// The addresses of the last list pushed, in its order, with their scores then.
        var pushed: [RankedAddress]?
        /// The network generation the last list was made in.
        var pushedGeneration = 0
        /// Until when the first list is provisional: it went out in the answer's order, its first address not yet
        /// measured (see ``provisionalPoll``).
        var provisionalUntil: ContinuousClock.Instant?

        /// How often the ranking is looked at during the first `updateInterval` after a first list pushed before its
        /// first address was measured. The first list cannot wait for probes (most hosts answer at their first
        /// address), but when its first address is the wrong one (a dead address ahead of live ones leaves pick-first
        /// connecting to nothing), the ranking replaces it as the probes land, instead of an interval later; from then
        /// on lists follow the interval's cadence.
        static let provisionalPoll = Duration.milliseconds(50)

        mutating func next() async throws -> NameResolutionResult? {
            guard let pushed else {
                // The first list: a lookup that fails throws, and gRPC asks again after its back-off.
                let answer = try await lookUp()
                // Round robin uses every address whatever its rank: nothing to replace early.
                if !updates.configuration.isRoundRobin, answer.addresses.first?.isMeasured == false {
                    provisionalUntil = .now + updates.configuration.updateInterval
                }
                return push(answer.addresses, generation: network.current)
            }
            while true {
                let interval = updates.configuration.updateInterval
                if let until = provisionalUntil {
                    try await Task.sleep(for: Swift.min(Self.provisionalPoll, Swift.max(until - .now, .zero)))
                } else {
                    try await Task.sleep(for: interval)
                }
                let generation = network.current
                let answer: RankedResolution
                do {
                    answer = try await lookUp()
                } catch is CancellationError {
                    throw CancellationError()
                } catch {
                    // The last list stays in use; the next round asks again.
                    updates.logger.debug(
                        "grpc target lookup failed; keeping the last endpoint list",
                        metadata: ["host": "\(updates.target.host)", "error": "\(error)"])
                    continue
                }
                if let until = provisionalUntil, ContinuousClock.now < until {
                    // While the first measurements come in: a measured address replaces an unmeasured first one,
                    // and a clearly better one replaces it in turn (the probes of a round land one by one).
                    if Self.measuredFirst(answer.addresses, replaces: pushed, configuration: updates.configuration) {
                        return push(answer.addresses, generation: generation)
                    }
                    continue
                }
                provisionalUntil = nil
                if Self.shouldPush(
                    answer.addresses, after: pushed, networkChanged: generation != pushedGeneration,
                    configuration: updates.configuration)
                {
                    return push(answer.addresses, generation: generation)
                }
                // A network change is weighed once: a list it did not change is not pushed later for it.
                pushedGeneration = generation
            }
        }

        private func lookUp() async throws -> RankedResolution {
            do {
                let answer = try await updates.resolver.resolveRanked(
                    updates.target.host, family: updates.configuration.family, port: updates.target.port)
                guard !answer.addresses.isEmpty else {
                    throw RPCError(code: .unavailable, message: "\(updates.target.host) has no addresses")
                }
                return answer
            } catch let error as CancellationError {
                throw error
            } catch let error as RPCError {
                throw error
            } catch {
                throw RPCError(
                    code: .unavailable, message: "could not resolve \(updates.target.host)", cause: error)
            }
        }

        private mutating func push(_ addresses: [RankedAddress], generation: Int) -> NameResolutionResult {
            pushed = addresses
            pushedGeneration = generation
            updates.logger.debug(
                "grpc endpoint list pushed",
                metadata: [
                    "host": "\(updates.target.host)",
                    "addresses": "\(addresses.map { $0.ip.description }.joined(separator: ","))",
                ])
            let socketAddresses = addresses.map { Self.socketAddress($0.ip, port: updates.target.port) }
            let endpoints =
                updates.configuration.isRoundRobin
                ? socketAddresses.map { Endpoint(addresses: [$0]) } : [Endpoint(addresses: socketAddresses)]
            return NameResolutionResult(
                endpoints: endpoints, serviceConfig: .success(updates.configuration.serviceConfig))
        }

        static func socketAddress(_ ip: IPAddress, port: Int) -> GRPCNIOTransportCore.SocketAddress {
            ip.family == .ipv6 ? .ipv6(host: ip.description, port: port) : .ipv4(host: ip.description, port: port)
        }

        /// Whether `latest`, over the same addresses as a provisional list `pushed`, is led by a measured address that
        /// should replace the one pushed first: at once when that one is unmeasured, else by the usual threshold
        /// (pick-first only).
        static func measuredFirst(
            _ latest: [RankedAddress], replaces pushed: [RankedAddress],
            configuration: NameResolvers.HTTPDNS.Configuration
        ) -> Bool {
            guard !configuration.isRoundRobin, Set(latest.map(\.ip)) == Set(pushed.map(\.ip)),
                let best = latest.first, best.ip != pushed.first?.ip, best.isMeasured, !best.isBackingOff
            else { return false }
            guard let current = latest.first(where: { $0.ip == pushed.first?.ip }), current.isMeasured else {
                return true
            }
            return shouldPush(latest, after: pushed, networkChanged: false, configuration: configuration)
        }

        /// Whether `latest` differs from the list last pushed enough to push it: other addresses, a network
        /// change that reordered them, or (pick-first) a new first address clearly better than the old one, or
        /// the old one backing off after failures.
        static func shouldPush(
            _ latest: [RankedAddress], after pushed: [RankedAddress], networkChanged: Bool,
            configuration: NameResolvers.HTTPDNS.Configuration
        ) -> Bool {
            let latestIPs = latest.map(\.ip), pushedIPs = pushed.map(\.ip)
            if Set(latestIPs) != Set(pushedIPs) { return true }
            if configuration.isRoundRobin || latestIPs == pushedIPs { return false }
            if networkChanged { return true }
            guard let best = latest.first, best.ip != pushedIPs.first,
                let current = latest.first(where: { $0.ip == pushedIPs.first })
            else { return false }
            if current.isBackingOff { return true }
            return best.score < current.score * (1 - configuration.reorderThreshold)
        }
    }
}

/// Counts the changes of the host's network the resolver reports, for as long as the sequence's iterator lives
/// (the watch ends with it).
final class NetworkGeneration: Sendable {
    private final class Counter: Sendable {
        let value = Atomic<Int>(0)
    }

    private let counter: Counter
    private let watch: Task<Void, Never>

    init(resolver: HostResolver) {
        let counter = Counter()
        let changes = resolver.networkChanges()
        self.counter = counter
        self.watch = Task {
            for await _ in changes { counter.value.add(1, ordering: .relaxed) }
        }
    }

    deinit { watch.cancel() }

    /// How many changes were seen so far.
    var current: Int { counter.value.load(ordering: .relaxed) }
}
