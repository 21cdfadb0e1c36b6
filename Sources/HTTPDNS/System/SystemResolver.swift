import Glibc
import NIOPosix
public import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients

extension ResolutionSource {
    /// An answer from the operating system's resolver (`getaddrinfo`).
    public static let system: ResolutionSource = "system"
}

/// The operating system's resolver, `getaddrinfo(3)`, run on a pool of threads so callers never block.
///
/// This is what `URLSession` and most programs use: `/etc/hosts`, `/etc/nsswitch.conf` and `/etc/resolv.conf`
/// decide the answer, and it reports no TTLs (every address gets TTL 0). It is here as the baseline to measure the
/// other resolvers against (`hostsctl bench --source system`) and as the pipeline's last resort: the `system`
/// layer, by default asked only for names every other upstream says do not exist.
package final class SystemResolver: HostNameResolver {
    private let pool: NIOThreadPool
    /// The TTL given to every answer (`getaddrinfo` reports none).
    let ttl: UInt32

    /// Starts `threads` threads (1 to 1024); at most that many lookups run at once, the rest wait in turn.
    /// - Parameter ttl: The TTL given to the answers (default 0: `getaddrinfo` reports none).
    /// - Throws: `HTTPDNSError.Code.invalidConfiguration` for a thread count out of range.
    package init(threads: Int = 8, ttl: UInt32 = 0) throws(HTTPDNSError) {
        guard (1...1024).contains(threads) else {
            throw HTTPDNSError(
                code: .invalidConfiguration, message: "threads must be between 1 and 1024, not \(threads)")
        }
        self.ttl = ttl
        pool = NIOThreadPool(numberOfThreads: threads)
        pool.start()
    }

    deinit {
        pool.shutdownGracefully { _ in }
    }

    /// Stops the threads once the lookups in flight end; later lookups fail with `HTTPDNSError.Code.shutdown`.
    package func shutdown() async {
        try? await pool.shutdownGracefully()
    }

    /// Resolves `host` with `getaddrinfo`, one address per IP (stream sockets), in the system's order.
    /// - Throws: `HTTPDNSError` (`notFound`, `noData`, `timeout` for a temporary failure, `shutdown`, …) with the
    ///   host as context.
    ///   A cancelled caller gets `CancellationError` at once; its `getaddrinfo` call, which nothing can interrupt,
    ///   runs on in its thread and its answer is dropped.
    package func resolve(_ host: HostName, family: AddressFamily) async throws -> Resolution {
        let ttl = self.ttl
        return try await CancellableWait<Resolution>.value { wait in
            pool.submit { state in
                guard case .active = state else {
                    let error = HTTPDNSError(
                        code: .shutdown, message: "the system resolver was shut down", host: host.name)
                    return wait.finish(.failure(error))
                }
                wait.finish(Self.lookup(host, family: family, ttl: ttl).mapError { $0 })
            }
        }
    }

    /// Resolves on the calling thread, blocking it until `getaddrinfo` returns.
    static func lookup(_ host: HostName, family: AddressFamily, ttl: UInt32 = 0) -> Result<Resolution, HTTPDNSError> {
        var hints = addrinfo()
        switch family {
        case .ipv4: hints.ai_family = AF_INET
        case .ipv6: hints.ai_family = AF_INET6
        case .any: hints.ai_family = AF_UNSPEC
        }
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host.name, nil, &hints, &list)
        guard status == 0 else {
            let reason = String(cString: gai_strerror(status))
            return .failure(
                HTTPDNSError(code: code(forLookupStatus: status), message: "getaddrinfo: \(reason)", host: host.name))
        }
        defer { freeaddrinfo(list) }
        var addresses: [ResolvedAddress] = []
        var seen = Set<IPAddress>()
        var cursor = list
        while let entry = cursor {
            if let ip = address(of: entry.pointee), seen.insert(ip).inserted {
                addresses.append(ResolvedAddress(ip: ip, ttl: ttl, source: .system))
            }
            cursor = entry.pointee.ai_next
        }
        guard !addresses.isEmpty else {
            return .failure(HTTPDNSError(code: .noData, message: "getaddrinfo returned no address", host: host.name))
        }
        let ordered = addresses.filter { $0.ip.family == .ipv4 } + addresses.filter { $0.ip.family != .ipv4 }
        return .success(Resolution(host: host.name, addresses: ordered))
    }

    private static func address(of entry: addrinfo) -> IPAddress? {
        guard let socketAddress = entry.ai_addr else { return nil }
        var text = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        let status = getnameinfo(socketAddress, entry.ai_addrlen, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST)
        guard status == 0 else { return nil }
        return IPAddress(String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    // glibc's EAI_NODATA and EAI_ADDRFAMILY ("no address of the requested family"), which its headers declare only
    // with _GNU_SOURCE, so Swift does not see them.
    private static let glibcNoData: Int32 = -5
    private static let glibcAddressFamily: Int32 = -9

    /// The `HTTPDNSError.Code` for a `getaddrinfo` status.
    static func code(forLookupStatus status: Int32) -> HTTPDNSError.Code {
        switch status {
        case EAI_NONAME: .notFound
        case glibcNoData, glibcAddressFamily: .noData
        case EAI_AGAIN: .timeout
        case EAI_FAIL: .serverFailure
        case EAI_MEMORY: .noMemory
        case EAI_FAMILY: .badFamily
        default: .internalError
        }
    }
}
