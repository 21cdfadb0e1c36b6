import CAres
public import Logging
public import HTTPDNSCore

/// An asynchronous DNS resolver over the system c-ares library.
///
/// Each resolver owns one c-ares channel driven by a dedicated thread that sleeps in `epoll_wait` until a socket is
/// ready or a query times out, so it costs nothing while idle and adds no polling delay. Thousands of queries can be
/// in flight at once. Cancelling the task that awaits a query ends only that query: the task gets
/// `CancellationError` at once and the late answer is dropped.
///
/// ```swift
/// let resolver = try CAresResolver(configuration: .init(servers: [try ServerAddress(parsing: "127.0.0.1:5353")]))
/// let answer = try await resolver.resolve(try HostName("api.example.com"), family: .ipv4)
/// ```
public final class CAresResolver: HostNameResolver, UncancellableQueries {
    /// How a ``CAresResolver`` asks: its servers, time limits and search list. Read from the `cares.*` keys with
    /// ``init(configReader:)``.
    public struct Configuration: Sendable, Hashable {
        /// The DNS servers to ask, in order. Empty (the default) means the system's, from `/etc/resolv.conf`.
        public var servers: [ServerAddress]
        /// How long to wait for an answer on the first try (default 2 s). c-ares doubles it on each later
        /// round through the servers.
        public var timeout: Duration
        /// How many times each query is sent before it fails with `HTTPDNSError.Code.timeout` (default 2).
        public var tries: Int
        /// The UDP socket receive buffer size in bytes (default 4 MiB) so that bursts of answers are not
        /// dropped; the kernel caps it at `net.core.rmem_max`. 0 keeps the system default.
        public var socketReceiveBufferSize: Int
        /// Query over TCP instead of UDP (default `false`).
        public var useTCP: Bool
        /// The search domains tried for short names, in order; `nil` (the default) means the system's (resolv.conf
        /// `search`/`domain`, `LOCALDOMAIN`) and `[]` turns search off. The resolver pipeline applies them.
        public var searchDomains: [String]?
        /// The dots a name needs to be tried as it is first; `nil` (the default) means the system's (resolv.conf,
        /// `RES_OPTIONS`).
        public var ndots: Int?
        /// Whether address queries too go out with DNS 0x20 (the name in a random mix of cases, the answer taken
        /// only when it echoes it; see ``CAresResolver/send(message:)``): built here and sent whole, rather than
        /// built by c-ares. `hostsctl serve` sets it, so every query it sends through c-ares carries it. Off by
        /// default.
        package var randomizesCase = false
        /// Whether a server's classic queries leave on sockets of its own rather than c-ares's (`PlainDNSClient`:
        /// random source ports per socket, rotated, random IDs, DNS 0x20, answers matched byte for byte on the
        /// socket that asked), with these servers (or resolv.conf's), timeout, tries and `useTCP`. `hostsctl serve`
        /// sets it; search domains and `ndots` do not apply there (a server asks fully qualified names). Off by
        /// default: the library's stub resolution stays on c-ares.
        package var usesOwnSockets = false

        /// Creates a configuration; every parameter has the documented default.
        public init(
            servers: [ServerAddress] = [],
            timeout: Duration = .seconds(2),
            tries: Int = 2,
            socketReceiveBufferSize: Int = 4 << 20,
            useTCP: Bool = false,
            searchDomains: [String]? = nil,
            ndots: Int? = nil
        ) {
            self.servers = servers
            self.timeout = timeout
            self.tries = tries
            self.socketReceiveBufferSize = socketReceiveBufferSize
            self.useTCP = useTCP
            self.searchDomains = searchDomains
            self.ndots = ndots
        }

        /// The system's servers and search list, a 2 s timeout, 2 tries, a 4 MiB receive buffer, UDP.
        static var `default`: Configuration { Configuration() }

        /// The search policy this configuration describes: ``searchDomains`` and ``ndots`` where set, the system's
        /// (`SearchPolicy.system(resolvConf:environment:)`) for the rest.
        package var searchPolicy: SearchPolicy {
            let system = (searchDomains == nil || ndots == nil) ? SearchPolicy.system() : nil
            return SearchPolicy(
                domains: searchDomains ?? system?.domains.map(\.name) ?? [], ndots: ndots ?? system?.ndots ?? 1)
        }

        /// Checks the ranges: a timeout from 1 ms to 1 hour, 1 to 16 tries, a non-negative buffer size.
        func validate() throws(HTTPDNSError) {
            guard timeout >= .milliseconds(1), timeout <= .seconds(3600) else {
                throw HTTPDNSError(
                    code: .invalidConfiguration, message: "timeout must be between 1 ms and 1 hour, not \(timeout)")
            }
            guard (1...16).contains(tries) else {
                throw HTTPDNSError(code: .invalidConfiguration, message: "tries must be between 1 and 16, not \(tries)")
            }
            guard socketReceiveBufferSize >= 0 else {
                throw HTTPDNSError(code: .invalidConfiguration, message: "socketReceiveBufferSize must not be negative")
            }
        }
    }

    /// The source name this resolver gives its answers: `ResolutionSource.cares`.
    let source: ResolutionSource = .cares
    /// How long a query may keep going after its task is cancelled: see ``longestQuery(timeout:tries:servers:)``.
    package let longestQuery: Duration
    let loop: CAresEventLoop
    private let logger: Logger
    /// ``Configuration/randomizesCase``.
    private let randomizesCase: Bool

    /// The resolver's event thread as a task executor.
    ///
    /// Tasks that prefer it (`withTaskExecutorPreference(resolver.executor) { … }`) run on the c-ares thread between
    /// socket events, so a query's whole round trip — send, answer, resumption, the next send — stays on one thread
    /// with no hand-off. That is the fastest way to resolve in bulk (see the README's benchmarks). Only run short,
    /// non-blocking work there: while a job runs, no answer is read. After ``shutdown()`` such tasks continue on
    /// the global concurrent executor.
    public var executor: any TaskExecutor { loop }

    /// The servers the channel asks, as `IP:PORT` (the configured ones, or the system's).
    var servers: [String] { loop.servers }

    /// Creates a resolver and starts its event thread.
    /// - Parameters:
    ///   - configuration: Servers, timeout, tries; see ``Configuration``.
    ///   - logger: Where to log; by default nothing is logged.
    /// - Throws: `HTTPDNSError` with `HTTPDNSError.Code.invalidConfiguration` or `HTTPDNSError.Code.invalidServer`
    ///   for bad options, or the c-ares initialisation error.
    public init(
        configuration: Configuration = Configuration(),
        logger: Logger = Logger(label: "httpdns.cares", factory: { _ in SwiftLogNoOpLogHandler() })
    ) throws(HTTPDNSError) {
        try configuration.validate()
        self.loop = try CAresEventLoop(configuration: configuration)
        self.longestQuery = Self.longestQuery(
            timeout: configuration.timeout, tries: configuration.tries, servers: loop.servers.count)
        self.logger = logger
        self.randomizesCase = configuration.randomizesCase
        logger.debug("c-ares resolver started", metadata: ["servers": "\(loop.servers.joined(separator: ","))"])
    }

    /// How long c-ares 1.18 keeps one query going when no server answers: each of `servers` is tried `tries` times,
    /// and the per-try timeout doubles with every round over the servers (`ares__send_query` shifts it left by
    /// `try_count / nservers`), so `servers × timeout × (2^tries − 1)`. One server, 2 s, 3 tries: tries sent at 0, 2
    /// and 6 s, given up at 14 s, not at 6.
    static func longestQuery(timeout: Duration, tries: Int, servers: Int) -> Duration {
        let rounds = min(max(tries, 1), 30)
        return timeout * max(servers, 1) * ((1 << rounds) - 1)
    }

    deinit {
        loop.shutdown()
    }

    /// Stops the event thread. Queries still in flight fail with `HTTPDNSError.Code.shutdown`, and so do later
    /// calls. Called automatically when the resolver is released; calling it twice is harmless.
    public func shutdown() {
        loop.shutdown()
    }

    /// Resolves `host` with `A` and/or `AAAA` queries.
    ///
    /// For `AddressFamily.any` both queries run in parallel; the answer holds the IPv4 addresses first. If one
    /// family fails and the other has addresses, those are returned; if both fail, the more telling error wins
    /// (`HTTPDNSError.Code.notFound` over `HTTPDNSError.Code.noData` over the rest).
    /// - Throws: `HTTPDNSError` with the host and servers as context, or `CancellationError`.
    public func resolve(_ host: HostName, family: AddressFamily) async throws -> Resolution {
        switch family {
        case .ipv4:
            return Resolution(host: host.name, addresses: try await query(host, type: .a))
        case .ipv6:
            return Resolution(host: host.name, addresses: try await query(host, type: .aaaa))
        case .any:
            async let v4 = Result(catching: { try await self.query(host, type: .a) })
            let v6 = await Result(catching: { try await self.query(host, type: .aaaa) })
            return try Resolution(host: host.name, addresses: DualStack.merge(await v4, v6, host: host, logger: logger))
        }
    }

    /// Sends one query and parses its answer.
    func query(_ host: HostName, type: DNSRecordType) async throws -> [ResolvedAddress] {
        if randomizesCase { return try await addresses(of: host, type: type, source: source) }
        switch try await exchange(CAresQuery(name: host.name, type: type)) {
        case .addresses(let addresses):
            return addresses
        case .message:
            throw HTTPDNSError(aresStatus: ARES_EBADRESP, host: host.name, servers: loop.servers)
        case .failure(let status):
            throw HTTPDNSError(aresStatus: status, host: host.name, servers: loop.servers)
        }
    }

    /// Sends a whole DNS message to the configured servers (with c-ares's retries, timeouts and server rotation) and
    /// returns the whole answer, whatever its record types; c-ares replaces the message's ID with its own.
    ///
    /// The question's name goes out in a random mix of cases (DNS 0x20, ``DNSCaseRandomization``) and the answer
    /// is taken only when its question echoes that mix byte for byte: c-ares 1.18 matches answers by ID and a
    /// question compared without case, from one source port, so this is what tells a forged answer apart. The
    /// answer comes back with the caller's question bytes. An answer that does not echo the question is dropped
    /// and the query asked once more with a new mix; a second such answer fails.
    /// - Throws: `HTTPDNSError` when no server answered (`questionMismatch` when the answers did not echo the
    ///   question), or `CancellationError`.
    package func send(message: [UInt8]) async throws -> [UInt8] {
        guard DNSCaseRandomization.randomized(message) != nil else { return try await sendAsIs(message) }
        for _ in 1...2 {
            guard let (asked, questionEnd) = DNSCaseRandomization.randomized(message) else { break }
            var answer = try await sendAsIs(asked)
            // FORMERR and NOTIMP may come without the question: nothing to check, and nothing in them to keep.
            if answer.count >= 12, answer[4] == 0, answer[5] == 0, answer[3] & 0x0F == 1 || answer[3] & 0x0F == 4,
                answer[6...11].allSatisfy({ $0 == 0 })
            {
                return answer
            }
            if DNSCaseRandomization.echoesQuestion(answer, of: asked, questionEnd: questionEnd) {
                answer.replaceSubrange(12..<questionEnd, with: message[12..<questionEnd])
                return answer
            }
            logger.notice(
                "dropped an upstream answer whose question does not echo the query's case (forged, or a server that folds case)"
            )
        }
        throw HTTPDNSError(
            code: .questionMismatch, message: "the upstream answers did not echo the question's case (DNS 0x20)",
            host: "", servers: loop.servers)
    }

    /// Sends `message` as it is and returns the answer c-ares matched to it.
    private func sendAsIs(_ message: [UInt8]) async throws -> [UInt8] {
        switch try await exchange(CAresQuery(message: message)) {
        case .message(let answer):
            return answer
        case .addresses:
            throw HTTPDNSError(aresStatus: ARES_EBADRESP, host: "", servers: loop.servers)
        case .failure(let status):
            throw HTTPDNSError(aresStatus: status, host: "", servers: loop.servers)
        }
    }

    private func exchange(_ query: CAresQuery) async throws -> CAresReply {
        try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { continuation in
                guard query.install(continuation) else { return }
                if !loop.submit(query) {
                    query.complete(.failure(ARES_EDESTRUCTION))
                }
            }
        } onCancel: {
            query.cancel()
        }
    }
}

extension CAresResolver: ClientSubnetResolver, DNSMessageExchange {
    /// Resolves `host` with queries that carry `clientSubnet` in an EDNS Client Subnet option (RFC 7871), sent
    /// through c-ares like any query (its servers, retries and timeouts), and reads the scope from the answer's
    /// option: an answer without one holds for every client (scope 0), and a scope longer than the subnet sent is
    /// cut to it. For ``AddressFamily/any`` both queries run and the longer scope of the two is the answer's.
    /// - Throws: `HTTPDNSError` as ``resolve(_:family:)``; `badResponse` when the answer's option names another
    ///   network than the query's.
    package func resolve(_ host: HostName, family: AddressFamily, clientSubnet: IPNetwork) async throws
        -> ScopedResolution
    {
        try await scopedResolution(host, family: family, clientSubnet: clientSubnet, source: source, logger: logger)
    }
}
