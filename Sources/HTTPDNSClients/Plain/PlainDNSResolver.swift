package import HTTPDNSCore
package import Logging
package import NIOCore
import Foundation

/// Classic DNS to configured servers through a ``PlainDNSClient`` (the server's own sockets: random ports, IDs and
/// case, answers matched byte for byte), as `hostsctl serve` asks its `cares.servers`. Its answers are named
/// `ResolutionSource.cares`, like c-ares's, whose place it takes: the same section configures it, and the same
/// lookups come out (``DNSMessageExchange`` builds and reads the messages for both).
package final class PlainDNSResolver: HostNameResolver, ClientSubnetResolver, DNSMessageExchange {
    /// The sockets the queries go out on.
    package let client: PlainDNSClient
    private let logger: Logger
    private let source: ResolutionSource = .cares

    /// A resolver asking `configuration`'s servers from `eventLoopGroup`'s loops, and from `servingGroup`'s for
    /// lookups a server's loop starts itself; `mismatched` hears of every datagram dropped (forged, or late).
    /// - Throws: `HTTPDNSError.Code.invalidConfiguration` without servers.
    package init(
        configuration: PlainDNSClient.Configuration, eventLoopGroup: any EventLoopGroup,
        servingGroup: (any EventLoopGroup)? = nil, logger: Logger,
        mismatched: @escaping @Sendable (PlainDNSClient.Mismatch) -> Void = { _ in }
    ) throws(HTTPDNSError) {
        client = try PlainDNSClient(
            configuration: configuration, eventLoopGroup: eventLoopGroup, servingGroup: servingGroup, logger: logger,
            mismatched: mismatched)
        self.logger = logger
    }

    /// Resolves `host` with one query a family (both in parallel for ``AddressFamily/any``, IPv4 first).
    /// - Throws: `HTTPDNSError` (`notFound`, `noData`, `timeout`, ...) or `CancellationError`.
    package func resolve(_ host: HostName, family: AddressFamily) async throws -> Resolution {
        switch family {
        case .ipv4, .ipv6:
            let addresses = try await addresses(of: host, type: family == .ipv4 ? .a : .aaaa, source: source)
            return Resolution(host: host.name, addresses: addresses)
        case .any:
            async let v4 = Result(catching: { try await self.addresses(of: host, type: .a, source: self.source) })
            let v6 = await Result(catching: { try await self.addresses(of: host, type: .aaaa, source: self.source) })
            return try Resolution(host: host.name, addresses: DualStack.merge(await v4, v6, host: host, logger: logger))
        }
    }

    /// Resolves `host` for clients in `clientSubnet` (an EDNS Client Subnet option), with the scope the answer
    /// holds for.
    package func resolve(_ host: HostName, family: AddressFamily, clientSubnet: IPNetwork) async throws
        -> ScopedResolution
    {
        try await scopedResolution(host, family: family, clientSubnet: clientSubnet, source: source, logger: logger)
    }

    /// Sends a whole query message (relayed types) and returns the answer, with the message's ID and question.
    package func send(message: [UInt8]) async throws -> [UInt8] {
        try await client.send(message: message)
    }

    /// Starts the lookup of `host`'s addresses of `family` (``AddressFamily/ipv4`` or ``AddressFamily/ipv6``) from
    /// `loop`'s own sockets, for clients in `subnet` when given (an ECS option), the caller being on `loop`:
    /// `completion` is called there, once, with the addresses and the scope they hold for (0 without a subnet), or
    /// the error ``resolve(_:family:)`` would throw (`ScopedNegativeAnswer` for a negative answer to a subnet
    /// query). The same messages as the tasks' path (``DNSLookupMessages``), and no task or other thread on the
    /// way. `false` (nothing started) for ``AddressFamily/any`` or a loop without this client's sockets.
    package func start(
        _ host: HostName, family: AddressFamily, subnet: IPNetwork?, on loop: any EventLoop,
        handle: PlainDNSQueryHandle, completion: @escaping (Result<ScopedResolution, any Error>) -> Void
    ) -> Bool {
        guard family != .any else { return false }
        let type: DNSRecordType = family == .ipv4 ? .a : .aaaa
        let query = DNSLookupMessages.query(for: host, type: type, subnet: subnet)
        let source = source
        return client.start(message: query, on: loop, handle: handle) { result in
            completion(
                Result {
                    let answer = try result.get()
                    guard let subnet else {
                        let addresses = try DNSLookupMessages.addresses(
                            in: answer, query: query, host: host, type: type, source: source)
                        return ScopedResolution(
                            resolution: Resolution(host: host.name, addresses: addresses), scopePrefixLength: 0)
                    }
                    let (addresses, scope) = try DNSLookupMessages.scopedAddresses(
                        in: answer, query: query, host: host, type: type, subnet: subnet, source: source)
                    return ScopedResolution(
                        resolution: Resolution(host: host.name, addresses: addresses), scopePrefixLength: scope)
                })
        }
    }

    /// Forgets the lookup of `handle` started on `loop` (nobody waits for it any more), from any thread.
    package func cancel(_ handle: PlainDNSQueryHandle, on loop: any EventLoop) {
        client.cancel(handle, on: loop)
    }

    /// Closes the sockets; queries still waiting fail with `HTTPDNSError.Code.shutdown`.
    package func shutdown() {
        client.shutdown()
    }

    /// The servers of `/etc/resolv.conf` (or `path`): its `nameserver` lines, port 53, for a configuration that
    /// names none (c-ares reads the same file); empty when the file has none or cannot be read.
    package static func systemServers(path: String = "/etc/resolv.conf") -> [ServerAddress] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
        return text.split(whereSeparator: \.isNewline).compactMap { line in
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard fields.count >= 2, fields[0] == "nameserver" else { return nil }
            // A scoped IPv6 address (fe80::1%eth0) names an interface the sockets do not pick: left to c-ares.
            guard !fields[1].contains("%"), let ip = IPAddress(String(fields[1])) else { return nil }
            return ServerAddress(ip: ip)
        }
    }
}
