import HTTPDNSCore
import Logging
import NIOCore
import NIOPosix

/// One event loop's part of a ``PlainDNSClient``: its sockets and the queries waiting on them. Everything here runs
/// on `loop` (the client reaches it through a `NIOLoopBoundBox`), so nothing is locked.
final class PlainDNSEngine {
    /// A query from its start to its one completion.
    final class Query {
        let handle: PlainDNSQueryHandle
        /// The message as the caller gave it: its ID and question's case go back on the answer.
        let original: [UInt8]
        /// What goes out this try: a random ID and case mix.
        var asked: [UInt8]
        var questionEnd: Int
        let completion: (Result<[UInt8], any Error>) -> Void
        /// Tries made so far (the next server and round follow from it).
        var attempt = 0
        var socket: PlainDNSSocket?
        /// The ID of the try in flight (the socket picks it).
        var id: UInt16 = 0
        /// The TCP connection of the try in flight, and a count of connections started, so that one that connects
        /// after its try ended is closed at once.
        var stream: (any Channel)?
        var streams = 0
        /// The last SERVFAIL, REFUSED, NOTIMP or bare FORMERR heard: the answer if no try is left.
        var refusal: [UInt8]?

        init(
            handle: PlainDNSQueryHandle, original: [UInt8], questionEnd: Int,
            completion: @escaping (Result<[UInt8], any Error>) -> Void
        ) {
            self.handle = handle
            self.original = original
            self.asked = original
            self.questionEnd = questionEnd
            self.completion = completion
        }
    }

    let loop: any EventLoop
    let configuration: PlainDNSClient.Configuration
    let servers: [SocketAddress]
    let logger: Logger
    let mismatched: @Sendable (PlainDNSClient.Mismatch) -> Void
    /// The socket each server's new queries go out on.
    private var current: [PlainDNSSocket?]
    private var waiting: [ObjectIdentifier: Query] = [:]
    private var closed = false
    /// The tries' deadlines, in order within each round (every try of a round waits as long): a query's entry whose
    /// attempt is not its current one was answered or moved on, and is skipped. One timer for the engine, not one
    /// a try (NIO cancels a scheduled task with a scan of every one scheduled).
    private var deadlines = PlainDNSDeadlines()
    private var ticking = false
    /// How often the deadlines are looked at while any query waits: a try may end this much past its timeout.
    static let tick = TimeAmount.milliseconds(25)
    private var generator = BufferedRandom()
    /// Sockets written to since the loop last flushed them.
    private var unflushed: [PlainDNSSocket] = []

    init(
        loop: any EventLoop, configuration: PlainDNSClient.Configuration, servers: [SocketAddress], logger: Logger,
        mismatched: @escaping @Sendable (PlainDNSClient.Mismatch) -> Void
    ) {
        self.loop = loop
        self.configuration = configuration
        self.servers = servers
        self.logger = logger
        self.mismatched = mismatched
        self.current = Array(repeating: nil, count: servers.count)
    }

    /// Starts a query for `message`; `completion` is called once, on the loop.
    func start(
        _ message: [UInt8], handle: PlainDNSQueryHandle, completion: @escaping (Result<[UInt8], any Error>) -> Void
    ) {
        guard !closed else { return completion(.failure(Self.error(.shutdown, "the upstream sockets are closed"))) }
        guard !handle.isCancelled else { return completion(.failure(CancellationError())) }
        guard let (asked, questionEnd) = DNSCaseRandomization.randomized(message, using: &generator) else {
            return completion(.failure(Self.error(.badQuery, "an upstream query must have one question")))
        }
        let query = Query(handle: handle, original: message, questionEnd: questionEnd, completion: completion)
        query.asked = asked
        waiting[ObjectIdentifier(handle)] = query
        dispatch(query)
    }

    /// Flushes `socket` once the loop is done with what it is doing now (the rest of a read burst, whose queries
    /// then leave in one flush), with every other socket written to meanwhile.
    func flushLater(_ socket: PlainDNSSocket) {
        if unflushed.isEmpty {
            let engine = NIOLoopBound(self, eventLoop: loop)
            loop.execute {
                let sockets = engine.value.unflushed
                engine.value.unflushed = []
                for socket in sockets { socket.flush() }
            }
        }
        if !unflushed.contains(where: { $0 === socket }) { unflushed.append(socket) }
    }

    /// Forgets the query of `handle` (its task was cancelled), if it still waits.
    func cancel(_ handle: PlainDNSQueryHandle) {
        guard let query = waiting[ObjectIdentifier(handle)] else { return }
        finish(query, .failure(CancellationError()))
    }

    /// Closes every socket and fails every waiting query.
    func shutdown() {
        closed = true
        for query in Array(waiting.values) {
            finish(query, .failure(Self.error(.shutdown, "the upstream sockets were closed")))
        }
        for socket in current.compactMap({ $0 }) { socket.close() }
        current = Array(repeating: nil, count: servers.count)
    }

    /// Takes no new query; each socket closes once its queries are done.
    func drain() {
        closed = true
        for socket in current.compactMap({ $0 }) { socket.retire() }
        current = Array(repeating: nil, count: servers.count)
    }

    // MARK: - Tries

    /// Sends the query's next try: to the next server in order, with a new ID and case mix, over UDP unless the
    /// configuration says TCP; arms the try's timeout.
    private func dispatch(_ query: Query) {
        let server = query.attempt % servers.count
        let round = query.attempt / servers.count
        // The first try's mix was made at the start; each later one gets a new one.
        if query.attempt > 0, let randomized = DNSCaseRandomization.randomized(query.original, using: &generator) {
            query.asked = randomized.message
        }
        let timeout = configuration.timeout * (1 << min(round, 16))
        deadlines.add(query, attempt: query.attempt, round: round, at: .now() + TimeAmount(timeout))
        tickIfWaiting()
        if configuration.tcpOnly {
            // A stream carries one query, but its ID is as random as a datagram's (the caller's own, a relayed
            // client's, would not be the one the answer is checked against).
            query.id = randomID()
            (query.asked[0], query.asked[1]) = (UInt8(query.id >> 8), UInt8(query.id & 0xFF))
            sendStream(query, server: server)
        } else {
            socket(for: server).send(query)
        }
    }

    /// Looks at the deadlines every ``tick`` while any query waits, and moves the overdue tries on.
    private func tickIfWaiting() {
        guard !ticking, !waiting.isEmpty else { return }
        ticking = true
        loop.assumeIsolated().scheduleTask(in: Self.tick) { [self] in
            ticking = false
            for (query, attempt) in deadlines.overdue(at: .now()) where query.attempt == attempt {
                advance(query)
            }
            // With nothing waiting every entry left is of a query that ended: none is kept until its time.
            if waiting.isEmpty { deadlines = PlainDNSDeadlines() }
            tickIfWaiting()
        }
    }

    /// The try failed (timed out, or its connection did): the next one, or the query fails when none is left.
    func advance(_ query: Query) {
        guard isWaiting(query) else { return }
        detach(query)
        query.attempt += 1
        guard query.attempt < servers.count * configuration.tries else {
            // A server's refusal heard on the way is the answer; else the tries timed out.
            if let refusal = query.refusal { return deliver(query, refusal) }
            return finish(
                query,
                .failure(
                    HTTPDNSError(
                        code: .timeout, message: "no DNS server answered in time",
                        servers: configuration.servers.map(\.description))))
        }
        dispatch(query)
    }

    /// The answer of `query` (its ID and question checked by the caller). Truncated (by its TC bit, or cut at the
    /// receive buffer: `cut`), it is asked over TCP. With several servers SERVFAIL, REFUSED and NOTIMP end the try,
    /// not the query (the next server is asked, as c-ares does); so does a FORMERR without the question (it needs no
    /// case bits to forge) with any number; the last such answer is returned only when no try is left. Else the caller's ID and question go
    /// back on it and the query completes.
    func answered(_ query: Query, _ answer: [UInt8], overStream: Bool, cut: Bool = false) {
        guard isWaiting(query) else { return }
        if !overStream, cut || answer[2] & 0x02 != 0 {
            detach(query)
            return sendStream(query, server: query.attempt % servers.count)
        }
        let rcode = answer[3] & 0x0F
        let refused = servers.count > 1 && (rcode == 2 || rcode == 4 || rcode == 5)
        if refused || (rcode == 1 && answer[5] == 0) {
            query.refusal = answer
            return advance(query)
        }
        deliver(query, answer)
    }

    /// Completes `query` with `answer`, the caller's ID and question bytes put back.
    private func deliver(_ query: Query, _ answer: [UInt8]) {
        var answer = answer
        (answer[0], answer[1]) = (query.original[0], query.original[1])
        if answer.count >= query.questionEnd, answer[5] == 1 {
            answer.replaceSubrange(12..<query.questionEnd, with: query.original[12..<query.questionEnd])
        }
        finish(query, .success(answer))
    }

    /// Whether `answer` may be the answer to `query` as asked: an answer (QR set) carrying the question byte for
    /// byte, or a FORMERR or NOTIMP without one (a server that cannot read the query says so without echoing it).
    func accepts(_ answer: [UInt8], for query: Query) -> Bool {
        guard answer.count >= 12, answer[2] & 0x80 != 0 else { return false }
        if answer[4...11].allSatisfy({ $0 == 0 }), answer[3] & 0x0F == 1 || answer[3] & 0x0F == 4 { return true }
        return DNSCaseRandomization.echoesQuestion(answer, of: query.asked, questionEnd: query.questionEnd)
    }

    private func finish(_ query: Query, _ result: Result<[UInt8], any Error>) {
        guard waiting.removeValue(forKey: ObjectIdentifier(query.handle)) != nil else { return }
        detach(query)
        query.completion(result)
    }

    /// Takes the query off its socket or connection.
    private func detach(_ query: Query) {
        if let socket = query.socket {
            socket.forget(query)
            query.socket = nil
        }
        query.streams += 1
        if let stream = query.stream {
            query.stream = nil
            stream.close(promise: nil)
        }
    }

    // MARK: - Sockets

    /// The socket new queries to `server` go out on: the current one while it has sent fewer than its share and is
    /// young enough, else a new one (the old one closes once its last query is done).
    private func socket(for server: Int) -> PlainDNSSocket {
        if let socket = current[server], socket.isUsable(configuration, now: .now()) { return socket }
        current[server]?.retire()
        let socket = PlainDNSSocket(server: servers[server], engine: self)
        current[server] = socket
        return socket
    }

    /// Asks over TCP (a truncated answer, or `tcpOnly`), within the try's time.
    private func sendStream(_ query: Query, server: Int) {
        PlainDNSStream.ask(query, server: servers[server], engine: self)
    }

    /// Whether `query` still waits for an answer.
    func isWaiting(_ query: Query) -> Bool { waiting[ObjectIdentifier(query.handle)] === query }

    /// A random query ID, from the engine's generator.
    func randomID() -> UInt16 { UInt16.random(in: 0...UInt16.max, using: &generator) }

    static func error(_ code: HTTPDNSError.Code, _ message: String) -> HTTPDNSError {
        HTTPDNSError(code: code, message: message)
    }
}
