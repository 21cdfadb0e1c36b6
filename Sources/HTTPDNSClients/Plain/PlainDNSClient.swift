package import HTTPDNSCore
package import Logging
package import NIOCore
import NIOPosix
import Synchronization

/// Classic DNS (RFC 1035: UDP, and TCP for a truncated answer) to configured servers on sockets of its own, for a
/// server whose upstream queries must not be spoofable. c-ares 1.18 sends every query from one UDP port while any is
/// pending and never randomises a name's case; here each event loop owns connected UDP sockets per server, each on a
/// port the kernel picks at random and replaced after ``Configuration/queriesPerSocket`` queries or
/// ``Configuration/socketLifetime``, every query gets a random ID and its name a random mix of cases (DNS 0x20,
/// ``DNSCaseRandomization``), and an answer is taken only from the server's address and port (the socket is
/// connected: the kernel drops anything else), on the socket that asked, with the query's ID and its question equal
/// byte for byte. A forger must guess the port (about 15 bits), the ID (16) and one bit per letter of the name; an
/// answer with a known ID and the wrong question is counted (``Mismatch``) and dropped, and the query keeps waiting
/// for the real one.
///
/// Retries and timeouts follow c-ares's rules for `cares.timeoutMs` and `cares.tries`: `tries` rounds over the
/// servers in order, each try waiting `timeout`, doubled every round. A truncated answer is asked again over TCP to
/// the same server within the try's time. A cancelled query is forgotten at once (its answer, if any, is dropped):
/// unlike c-ares 1.18, nothing keeps going out for it.
package final class PlainDNSClient: Sendable {
    /// Servers, timeouts and how long a socket serves.
    package struct Configuration: Sendable, Hashable {
        /// The servers, asked in order.
        package var servers: [ServerAddress]
        /// The first round's timeout of one try; doubled every round.
        package var timeout: Duration
        /// Rounds over the servers.
        package var tries: Int
        /// Every query over TCP (`cares.tcp`).
        package var tcpOnly: Bool
        /// Queries sent from one socket before the next ones go from a new socket (a new random port).
        package var queriesPerSocket: Int
        /// How long one socket is used for new queries at most.
        package var socketLifetime: Duration

        /// A configuration for `servers`; the rest as c-ares's defaults (2 s, 2 tries), 100 queries or 30 s a socket.
        package init(
            servers: [ServerAddress], timeout: Duration = .seconds(2), tries: Int = 2, tcpOnly: Bool = false,
            queriesPerSocket: Int = 100, socketLifetime: Duration = .seconds(30)
        ) {
            self.servers = servers
            self.timeout = max(timeout, .milliseconds(1))
            self.tries = max(tries, 1)
            self.tcpOnly = tcpOnly
            self.queriesPerSocket = max(queriesPerSocket, 1)
            self.socketLifetime = socketLifetime
        }
    }

    /// Why a datagram from a server was dropped.
    package enum Mismatch: String, Sendable {
        /// No query waits on that socket with its ID (forged, or late for a query given up).
        case id
        /// A query waits with that ID, but the answer's question is not the one asked, byte for byte (forged: the
        /// right ID and the wrong case), or the datagram is no answer.
        case question
    }

    /// The event loop serve's upstream sockets run on: one thread of their own, as c-ares had, so that a miss's
    /// socket work never waits behind the listeners' loops, nor they behind it (measured: on the server's own loops
    /// the workload's DNS over TLS answered 0.78x the queries a second). Never shut down, like NIO's singleton.
    package static let upstreamEventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)

    package let configuration: Configuration
    private let engines: [ObjectIdentifier: NIOLoopBoundBox<PlainDNSEngine>]
    private let group: any EventLoopGroup

    /// A client of `configuration`'s servers on `eventLoopGroup`'s loops (a `MultiThreadedEventLoopGroup`), which
    /// ``send(message:)`` uses, and on `servingGroup`'s, where a server's event loop sends its own misses
    /// (``start(message:on:handle:completion:)``: no other thread on the way); `mismatched` is told of every datagram
    /// dropped. An engine opens its sockets at its first query: a loop that never asks costs nothing.
    /// - Throws: `HTTPDNSError.Code.invalidConfiguration` without servers.
    package init(
        configuration: Configuration, eventLoopGroup: any EventLoopGroup, servingGroup: (any EventLoopGroup)? = nil,
        logger: Logger, mismatched: @escaping @Sendable (Mismatch) -> Void = { _ in }
    ) throws(HTTPDNSError) {
        guard !configuration.servers.isEmpty else {
            throw HTTPDNSError(code: .invalidConfiguration, message: "no DNS servers for the upstream sockets")
        }
        var addresses: [SocketAddress] = []
        for server in configuration.servers {
            guard let address = try? SocketAddress(ipAddress: server.ip.description, port: Int(server.port)) else {
                throw HTTPDNSError(code: .invalidServer, message: "not a socket address", servers: ["\(server)"])
            }
            addresses.append(address)
        }
        self.configuration = configuration
        self.group = eventLoopGroup
        let groups = [eventLoopGroup] + (servingGroup.map { [$0] } ?? [])
        var engines: [ObjectIdentifier: NIOLoopBoundBox<PlainDNSEngine>] = [:]
        for group in groups {
            for loop in group.makeIterator() where engines[ObjectIdentifier(loop)] == nil {
                let engine = PlainDNSEngine(
                    loop: loop, configuration: configuration, servers: addresses, logger: logger,
                    mismatched: mismatched)
                engines[ObjectIdentifier(loop)] = .makeBoxSendingValue(engine, eventLoop: loop)
            }
        }
        self.engines = engines
    }

    /// Starts a query for `message` from the engine of `loop`, which the caller runs on: `completion` is called
    /// there, once, with the answer (its ID and question as `message`'s) or the error ``send(message:)`` would
    /// throw. `false` (nothing started) when the caller is not on a loop this client has an engine on.
    package func start(
        message: [UInt8], on loop: any EventLoop, handle: PlainDNSQueryHandle,
        completion: @escaping (Result<[UInt8], any Error>) -> Void
    ) -> Bool {
        guard let box = engines[ObjectIdentifier(loop)], loop.inEventLoop else { return false }
        box.value.start(message, handle: handle, completion: completion)
        return true
    }

    /// Whether `loop` has an engine of this client (``start(message:on:handle:completion:)`` can start there).
    package func hasEngine(on loop: any EventLoop) -> Bool {
        engines[ObjectIdentifier(loop)] != nil
    }

    /// Forgets the query of `handle` started on `loop` (its asker went away), from any thread.
    package func cancel(_ handle: PlainDNSQueryHandle, on loop: any EventLoop) {
        handle.cancel()
        guard let box = engines[ObjectIdentifier(loop)] else { return }
        if loop.inEventLoop {
            box.value.cancel(handle)
        } else {
            loop.execute { box.value.cancel(handle) }
        }
    }

    /// Sends `message` (one question) and returns the server's answer, with `message`'s ID and question bytes.
    /// - Throws: `HTTPDNSError` (`timeout` when no server answered in time, `badQuery` for a message without one
    ///   question, `shutdown`), or `CancellationError`.
    package func send(message: [UInt8]) async throws -> [UInt8] {
        let loop = group.any()
        guard let box = engines[ObjectIdentifier(loop)] else {
            throw HTTPDNSError(code: .shutdown, message: "the upstream sockets' event loop is not known")
        }
        let handle = PlainDNSQueryHandle()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[UInt8], any Error>) in
                loop.execute {
                    box.value.start(message, handle: handle) { result in continuation.resume(with: result) }
                }
            }
        } onCancel: {
            handle.cancel()
            loop.execute { box.value.cancel(handle) }
        }
    }

    /// Released (a reload replaced it): queries in flight finish, then the sockets close.
    deinit {
        for (_, box) in engines {
            box.eventLoop.execute { box.value.drain() }
        }
    }

    /// Closes every socket; queries still waiting fail with `HTTPDNSError.Code.shutdown`.
    package func shutdown() {
        for (_, box) in engines {
            box.eventLoop.execute { box.value.shutdown() }
        }
    }
}

/// What a waiting query's asker and its event loop share: whether the asker went away (set from any thread; the
/// loop looks before it starts the query, so a cancellation that comes first is never lost).
package final class PlainDNSQueryHandle: Sendable {
    private let cancelled = Atomic<Bool>(false)

    /// A handle for one query.
    package init() {}

    var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

    func cancel() { cancelled.store(true, ordering: .releasing) }
}
