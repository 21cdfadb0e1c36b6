import CAres
import Synchronization
import HTTPDNSCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Owns one c-ares channel and the thread that drives it from epoll readiness events.
///
/// c-ares 1.18 is not thread-safe, so every call on the channel happens on the loop thread. The thread sleeps in
/// `epoll_wait` with the timeout c-ares asks for (`ares_timeout`), or without any timeout when no query is pending,
/// so an idle resolver never wakes up. c-ares reports which sockets it wants watched through
/// `ARES_OPT_SOCK_STATE_CB`; other threads hand queries over through ``inbox`` and an `eventfd`.
///
/// The loop is also a `TaskExecutor`: tasks that prefer it run on the loop thread between socket events, so a caller
/// can keep a query's whole round trip (send, answer, resumption, next send) on one thread.
///
/// `@unchecked Sendable`: `channel` and `watcher` are touched only on the loop thread (after `init` hands the
/// channel over by starting the thread). Everything shared with other threads is in `inbox` (behind its lock),
/// in atomics, or immutable (`epollFD`, `wakeFD`, `servers`).
final class CAresEventLoop: TaskExecutor, @unchecked Sendable {
    private struct Inbox {
        var pending: [CAresQuery] = []
        /// Jobs of tasks that prefer this loop as their executor.
        var jobs: [UnownedJob] = []
        /// The loop thread has exited; jobs go to the global concurrent executor from now on.
        var stopped = false
        var stopRequested = false
        /// The loop thread is (about to be) blocked in `epoll_wait` and needs the eventfd to see new queries.
        var sleeping = false
        var thread: pthread_t?
    }

    private var channel: ares_channel?
    private let watcher: SocketWatcher
    private let epollFD: Int32
    private let wakeFD: Int32
    private let inbox = Locked(Inbox())

    /// The servers of the channel as `IP:PORT`, for error context.
    let servers: [String]
    /// How many times the loop thread returned from `epoll_wait`; lets tests check that an idle loop sleeps.
    let wakeups = Atomic<Int>(0)

    /// Creates the channel and starts its thread.
    /// - Throws: `HTTPDNSError` when c-ares rejects the options or the servers, or the thread cannot start.
    init(configuration options: CAresResolver.Configuration) throws(HTTPDNSError) {
        CAresLibrary.initializeOnce()
        epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        wakeFD = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        guard epollFD >= 0, wakeFD >= 0 else {
            let code = errno
            if epollFD >= 0 { close(epollFD) }
            if wakeFD >= 0 { close(wakeFD) }
            throw HTTPDNSError(code: .internalError, message: "cannot create epoll or eventfd: errno \(code)")
        }
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.fd = wakeFD
        _ = epoll_ctl(epollFD, EPOLL_CTL_ADD, wakeFD, &event)

        var aresOptions = ares_options()
        var mask: Int32 = ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_SOCK_STATE_CB
        aresOptions.timeout = Int32(clamping: options.timeout.roundedUpMilliseconds)
        aresOptions.tries = Int32(clamping: options.tries)
        let watcher = SocketWatcher(epollFD: epollFD)
        aresOptions.sock_state_cb = { data, socket, readable, writable in
            guard let data else { return }
            let watcher = Unmanaged<SocketWatcher>.fromOpaque(data).takeUnretainedValue()
            watcher.watch(socket, readable: readable != 0, writable: writable != 0)
        }
        // The watcher outlives the channel: both belong to this loop, which destroys the channel first.
        aresOptions.sock_state_cb_data = Unmanaged.passUnretained(watcher).toOpaque()
        if options.socketReceiveBufferSize > 0 {
            mask |= ARES_OPT_SOCK_RCVBUF
            aresOptions.socket_receive_buffer_size = Int32(clamping: options.socketReceiveBufferSize)
        }
        mask |= ARES_OPT_FLAGS
        aresOptions.flags = options.useTCP ? ARES_FLAG_USEVC : 0
        // With one server there is nobody to fail over to, so pass SERVFAIL, REFUSED and NOTIMP answers through and
        // report them as they are. With several, c-ares moves on to the next server and, if all fail, reports
        // ECONNREFUSED.
        if (options.servers.isEmpty ? Self.systemServerCount() : options.servers.count) == 1 {
            aresOptions.flags |= ARES_FLAG_NOCHECKRESP
        }
        var channel: ares_channel?
        let status = ares_init_options(&channel, &aresOptions, mask)
        guard status == ARES_SUCCESS, let channel else {
            close(epollFD)
            close(wakeFD)
            throw HTTPDNSError(aresStatus: status, host: nil, servers: options.servers.map(\.description))
        }
        if !options.servers.isEmpty {
            let csv = options.servers.map(\.description).joined(separator: ",")
            let status = ares_set_servers_ports_csv(channel, csv)
            guard status == ARES_SUCCESS else {
                ares_destroy(channel)
                close(epollFD)
                close(wakeFD)
                throw HTTPDNSError(
                    code: .invalidServer,
                    message: "c-ares rejected the server list '\(csv)' (status \(status))",
                    servers: options.servers.map(\.description)
                )
            }
        }
        self.channel = channel
        self.watcher = watcher
        self.servers = Self.serverList(of: channel)

        let retained = Unmanaged.passRetained(self).toOpaque()
        var thread = pthread_t()
        let created = pthread_create(
            &thread, nil,
            { argument in
                let loop = Unmanaged<CAresEventLoop>.fromOpaque(argument!).takeRetainedValue()
                loop.run()
                return nil
            }, retained)
        guard created == 0 else {
            Unmanaged<CAresEventLoop>.fromOpaque(retained).release()
            throw HTTPDNSError(code: .internalError, message: "cannot start the c-ares thread: error \(created)")
        }
        inbox.withLock { $0.thread = thread }
    }

    deinit {
        if let channel { ares_destroy(channel) }
        close(epollFD)
        close(wakeFD)
    }

    /// Hands a query to the loop thread.
    /// - Returns: `false` when the loop is shutting down.
    func submit(_ query: CAresQuery) -> Bool {
        let (accepted, wake) = inbox.withLock { inbox -> (Bool, Bool) in
            guard !inbox.stopRequested else { return (false, false) }
            inbox.pending.append(query)
            // A busy loop drains the inbox before it sleeps again; only a sleeping one needs the (costly) eventfd.
            guard inbox.sleeping else { return (true, false) }
            inbox.sleeping = false
            return (true, true)
        }
        if wake { signal() }
        return accepted
    }

    /// Whether the caller runs on the loop thread.
    var isLoopThread: Bool {
        inbox.withLock { inbox in inbox.thread.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
    }

    /// Runs `job` on the loop thread (the `TaskExecutor` requirement).
    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let (accepted, wake) = inbox.withLock { inbox -> (Bool, Bool) in
            guard !inbox.stopped else { return (false, false) }
            inbox.jobs.append(job)
            guard inbox.sleeping else { return (true, false) }
            inbox.sleeping = false
            return (true, true)
        }
        if wake { signal() }
        if !accepted { globalConcurrentExecutor.enqueue(ExecutorJob(job)) }
    }

    /// Stops the loop: pending queries fail with `HTTPDNSError.Code.shutdown`. Waits for the thread unless called on it.
    func shutdown() {
        let thread = inbox.withLock { inbox -> pthread_t? in
            inbox.stopRequested = true
            defer { inbox.thread = nil }
            return inbox.thread
        }
        guard let thread else { return }
        signal()
        if pthread_equal(thread, pthread_self()) != 0 {
            pthread_detach(thread)
        } else {
            pthread_join(thread, nil)
        }
    }

    private func signal() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, MemoryLayout<UInt64>.size)
    }

    // MARK: - Loop thread only

    private func run() {
        _ = httpdns_set_thread_name("httpdns-cares")
        let capacity: Int32 = 128
        var events = [epoll_event](repeating: epoll_event(), count: Int(capacity))
        while let channel {
            // Sleep only when no query is waiting to be sent; otherwise just collect ready sockets.
            let idle = inbox.withLock { inbox -> Bool in
                inbox.sleeping = inbox.pending.isEmpty && inbox.jobs.isEmpty && !inbox.stopRequested
                return inbox.sleeping
            }
            let timeout = idle ? Self.nextTimeout(channel) : 0
            let count = events.withUnsafeMutableBufferPointer { epoll_wait(epollFD, $0.baseAddress, capacity, timeout) }
            if idle { inbox.withLock { $0.sleeping = false } }
            wakeups.add(1, ordering: .relaxed)
            if count < 0 {
                if errno == EINTR { continue }
                // epoll itself broke; fail everything rather than spin.
                stopLoop(channel)
                return
            }
            var handledSocket = false
            for index in 0..<Int(count) {
                let fd = events[index].data.fd
                let flags = events[index].events
                if fd == wakeFD {
                    var value: UInt64 = 0
                    _ = read(wakeFD, &value, MemoryLayout<UInt64>.size)
                    continue
                }
                let readable = flags & (EPOLLIN.rawValue | EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0
                let writable = flags & EPOLLOUT.rawValue != 0
                ares_process_fd(channel, readable ? fd : ARES_SOCKET_BAD, writable ? fd : ARES_SOCKET_BAD)
                handledSocket = true
            }
            if !handledSocket {
                // A timeout (or only new queries): let c-ares expire and retry queries.
                ares_process_fd(channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD)
            }
            // Tasks running here (answers resumed them above) send their next queries into the inbox.
            runJobs()
            let (batch, stop) = inbox.withLock { inbox -> ([CAresQuery], Bool) in
                defer { inbox.pending.removeAll(keepingCapacity: true) }
                return (inbox.pending, inbox.stopRequested)
            }
            for query in batch {
                start(query, on: channel)
            }
            if stop {
                stopLoop(channel)
                return
            }
        }
    }

    private func runJobs() {
        let jobs = inbox.withLock { inbox -> [UnownedJob] in
            defer { inbox.jobs.removeAll(keepingCapacity: true) }
            return inbox.jobs
        }
        let executor = asUnownedTaskExecutor()
        for job in jobs {
            job.runSynchronously(on: executor)
        }
    }

    private func stopLoop(_ channel: ares_channel) {
        // Fails every pending query with ARES_EDESTRUCTION through its callback.
        ares_destroy(channel)
        self.channel = nil
        let (orphans, jobs) = inbox.withLock { inbox in
            inbox.stopRequested = true
            inbox.stopped = true
            defer {
                inbox.pending.removeAll()
                inbox.jobs.removeAll()
            }
            return (inbox.pending, inbox.jobs)
        }
        // Tasks that preferred this loop carry on elsewhere rather than hang.
        for job in jobs { globalConcurrentExecutor.enqueue(ExecutorJob(job)) }
        for query in orphans { query.complete(.failure(ARES_EDESTRUCTION)) }
    }

    private func start(_ query: CAresQuery, on channel: ares_channel) {
        guard !query.isCancelled else { return }
        let argument = Unmanaged.passRetained(query).toOpaque()
        if let message = query.message {
            message.withUnsafeBufferPointer { bytes in
                ares_send(
                    channel, bytes.baseAddress, Int32(bytes.count),
                    { argument, status, _, answer, length in
                        let query = Unmanaged<CAresQuery>.fromOpaque(argument!).takeRetainedValue()
                        guard status == ARES_SUCCESS, let answer, length > 0 else {
                            query.complete(.failure(status == ARES_SUCCESS ? ARES_EBADRESP : status))
                            return
                        }
                        query.complete(.message(Array(UnsafeBufferPointer(start: answer, count: Int(length)))))
                    }, argument)
            }
            return
        }
        query.name.withCString { name in
            ares_query(
                channel, name, 1 /* C_IN */, query.type.rawValue,
                { argument, status, _, answer, length in
                    let query = Unmanaged<CAresQuery>.fromOpaque(argument!).takeRetainedValue()
                    guard status == ARES_SUCCESS, let answer, length > 0 else {
                        query.complete(.failure(status == ARES_SUCCESS ? ARES_EBADRESP : status))
                        return
                    }
                    // Parsed here, while c-ares still owns the buffer, so the answer is never copied.
                    let message = UnsafeBufferPointer(start: answer, count: Int(length))
                    let addresses = DNSAnswerWalk.addresses(
                        in: message, type: query.type, source: .cares, limit: DNSWireMessage.maximumAddresses)
                    switch addresses {
                    case nil: query.complete(.failure(ARES_EBADRESP))
                    case let addresses? where addresses.isEmpty: query.complete(.failure(ARES_ENODATA))
                    case let addresses?: query.complete(.addresses(addresses))
                    }
                }, argument)
        }
    }

    /// Milliseconds until c-ares needs to handle a timeout, rounded up; -1 (sleep until woken) when nothing is pending.
    private static func nextTimeout(_ channel: ares_channel) -> Int32 {
        var storage = timeval()
        guard let next = ares_timeout(channel, nil, &storage) else { return -1 }
        let micros = Int64(next.pointee.tv_sec) * 1_000_000 + Int64(next.pointee.tv_usec)
        return Int32(clamping: (micros + 999) / 1000)
    }

    /// How many servers the system configuration (resolv.conf) names.
    private static func systemServerCount() -> Int {
        var channel: ares_channel?
        guard ares_init(&channel) == ARES_SUCCESS, let channel else { return 0 }
        defer { ares_destroy(channel) }
        return serverList(of: channel).count
    }

    private static func serverList(of channel: ares_channel) -> [String] {
        var list: UnsafeMutablePointer<ares_addr_port_node>?
        guard ares_get_servers_ports(channel, &list) == ARES_SUCCESS else { return [] }
        defer { ares_free_data(list) }
        var servers: [String] = []
        var node = list
        while let current = node {
            var entry = current.pointee
            let port = entry.udp_port == 0 ? 53 : UInt16(clamping: entry.udp_port)
            let ip: IPAddress? =
                entry.family == AF_INET
                ? IPAddress(ipv4Network: entry.addr.addr4.s_addr)
                : withUnsafeBytes(of: &entry.addr.addr6) { IPAddress(bytes: $0) }
            if let ip { servers.append(ServerAddress(ip: ip, port: port).description) }
            node = current.pointee.next
        }
        return servers
    }
}

/// Keeps the epoll interest set in step with the sockets c-ares reports through `ARES_OPT_SOCK_STATE_CB`.
///
/// `@unchecked Sendable`: used only on the loop thread, from inside c-ares calls; it is created before the
/// thread starts and handed over with it.
private final class SocketWatcher: @unchecked Sendable {
    private let epollFD: Int32
    private var watched: [ares_socket_t: UInt32] = [:]

    init(epollFD: Int32) {
        self.epollFD = epollFD
    }

    func watch(_ socket: ares_socket_t, readable: Bool, writable: Bool) {
        var flags: UInt32 = 0
        if readable { flags |= EPOLLIN.rawValue }
        if writable { flags |= EPOLLOUT.rawValue }
        var event = epoll_event()
        event.events = flags
        event.data.fd = socket
        switch (watched[socket], flags) {
        case (nil, 0):
            return
        case (nil, _):
            _ = epoll_ctl(epollFD, EPOLL_CTL_ADD, socket, &event)
            watched[socket] = flags
        case (.some, 0):
            _ = epoll_ctl(epollFD, EPOLL_CTL_DEL, socket, &event)
            watched[socket] = nil
        case (.some(let old), _) where old != flags:
            _ = epoll_ctl(epollFD, EPOLL_CTL_MOD, socket, &event)
            watched[socket] = flags
        default:
            return
        }
    }
}

/// Process-wide c-ares initialisation (`ares_library_init`), done once.
enum CAresLibrary {
    private static let status: Int32 = ares_library_init(ARES_LIB_INIT_ALL)

    static func initializeOnce() {
        _ = status
    }
}
