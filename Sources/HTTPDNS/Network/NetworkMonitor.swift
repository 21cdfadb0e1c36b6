import CNetlink
import Foundation
import Glibc
import HTTPDNSCore
import Logging

/// A change of the host's network, once the kernel's notifications of it settled: another default route, addresses
/// added or removed. ``HostResolver/networkChanges()`` hands them to applications.
public struct NetworkChange: Sendable, Hashable {
    /// The network before: its default routes and the prefixes of its addresses.
    var previous: String
    /// The network now.
    var current: String
    /// Addresses the host no longer has.
    public var removedAddresses: [IPAddress]
    /// Addresses the host gained.
    public var addedAddresses: [IPAddress]

    /// Whether the host moved to another network (default route or prefixes changed), not only to other addresses
    /// within the same one.
    public var isNewNetwork: Bool { previous != current }

    init(previous: NetworkSnapshot, current: NetworkSnapshot) {
        self.previous = previous.key
        self.current = current.key
        self.removedAddresses = previous.addresses.subtracting(current.addresses).sorted()
        self.addedAddresses = current.addresses.subtracting(previous.addresses).sorted()
    }
}

/// Watches the kernel's address and route changes (rtnetlink: links, IPv4 and IPv6 addresses and routes) on a small
/// thread of its own that sleeps in `poll` until the kernel or ``shutdown()`` wakes it, waits until no notification
/// came for `debounce` (a network coming up sends dozens), then compares the network with the last one seen and
/// reports a difference once.
///
/// The thread owns the socket, the last snapshot and the pipe's read end; ``shutdown()`` only writes a byte to the
/// pipe (once, under a lock) to wake it.
final class NetworkMonitor: Sendable {
    private let wakeWrite: Int32
    private let done = Locked(false)
    /// The network's key when watching started.
    let initialKey: String

    /// Starts watching; `onChange` runs on the watcher's thread for each settled change.
    /// - Parameters:
    ///   - namespace: A network namespace (`/var/run/netns/NAME`) to watch instead of the process's: what the tests
    ///     use to change routes and addresses of a network they made.
    ///   - debounce: How long notifications must stay quiet before the network is compared.
    /// - Throws: `HTTPDNSError.Code.internalError` when the netlink socket cannot be opened or the namespace entered.
    init(
        namespace: String? = nil, debounce: Duration = .milliseconds(250),
        logger: Logger, onChange: @escaping @Sendable (NetworkChange) -> Void
    ) throws(HTTPDNSError) {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else {
            throw HTTPDNSError(
                code: .internalError, message: "cannot make the network watcher's pipe: \(Self.error(errno))")
        }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        wakeWrite = ends[1]
        let wakeRead = ends[0]
        let started = Locked<Result<String, HTTPDNSError>?>(nil)
        let thread = Thread {
            Self.run(
                namespace: namespace, wake: wakeRead, debounce: debounce, logger: logger, started: started,
                onChange: onChange)
            close(wakeRead)
        }
        thread.name = "httpdns-network"
        thread.start()
        // The socket is opened (and the namespace entered) before the first snapshot, so no change is missed.
        while true {
            if let outcome = started.withLock({ $0 }) {
                switch outcome {
                case .failure(let error):
                    close(wakeWrite)
                    throw error
                case .success(let key):
                    initialKey = key
                }
                break
            }
            usleep(200)
        }
    }

    deinit { shutdown() }

    /// Stops the watcher: its thread wakes and ends (a change being reported at that moment still is).
    func shutdown() {
        let first = done.withLock { done -> Bool in
            defer { done = true }
            return !done
        }
        guard first else { return }
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
        close(wakeWrite)
    }

    private static func error(_ code: Int32) -> String { String(cString: strerror(code)) }

    private static func run(
        namespace: String?, wake: Int32, debounce: Duration, logger: Logger,
        started: Locked<Result<String, HTTPDNSError>?>, onChange: @Sendable (NetworkChange) -> Void
    ) {
        if let namespace {
            let status = httpdns_enter_network_namespace(namespace)
            guard status == 0 else {
                started.withLock {
                    $0 = .failure(
                        HTTPDNSError(
                            code: .internalError,
                            message: "cannot enter the network namespace \(namespace): \(error(-status))"))
                }
                return
            }
        }
        let socket = httpdns_netlink_open(httpdns_netlink_route_groups())
        guard socket >= 0 else {
            started.withLock {
                $0 = .failure(
                    HTTPDNSError(code: .internalError, message: "cannot open a netlink socket: \(error(-socket))"))
            }
            return
        }
        defer { close(socket) }
        var last = NetworkSnapshot.current()
        started.withLock { $0 = .success(last.key) }
        var buffer = [UInt8](repeating: 0, count: 16_384)
        var settleAt: ContinuousClock.Instant?
        while true {
            var descriptors = [
                pollfd(fd: socket, events: Int16(POLLIN), revents: 0),
                pollfd(fd: wake, events: Int16(POLLIN), revents: 0),
            ]
            let timeout = settleAt.map { max(0, Int32(($0 - .now).fractionalMilliseconds.rounded(.up))) } ?? -1
            let ready = poll(&descriptors, 2, timeout)
            if ready < 0, errno != EINTR { return }
            if descriptors[1].revents != 0 { return }
            if descriptors[0].revents != 0 {
                // The messages only say that something changed; the snapshot says what. An overrun (ENOBUFS) too.
                while recv(socket, &buffer, buffer.count, Int32(MSG_DONTWAIT)) > 0 || errno == ENOBUFS {}
                settleAt = .now + debounce
                continue
            }
            guard let deadline = settleAt, ContinuousClock.now >= deadline else { continue }
            settleAt = nil
            let current = NetworkSnapshot.current()
            guard current != last else { continue }
            let change = NetworkChange(previous: last, current: current)
            last = current
            logger.info(
                "network changed",
                metadata: [
                    "network": "\(change.current)", "newNetwork": "\(change.isNewNetwork)",
                    "removed": "\(change.removedAddresses)", "added": "\(change.addedAddresses)",
                ])
            onChange(change)
        }
    }
}
