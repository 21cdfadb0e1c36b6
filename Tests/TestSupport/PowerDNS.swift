import Foundation
public import HTTPDNS

/// A real PowerDNS Authoritative server (Debian `pdns-server` with `pdns-backend-bind`) on 127.0.0.1 at a free high
/// port, answering the zone `ecs.test` by the client's network: LUA `view()` records with
/// `edns-subnet-processing=yes`, so the network comes from a query's EDNS Client Subnet option, else from its source
/// address. What a CDN's authoritative server does.
///
/// - `www.ecs.test` A: 192.0.2.1 for 198.51.100.0/24, 192.0.2.2 for 203.0.113.0/24, 192.0.2.11 for 127.0.1.0/24,
///   192.0.2.12 for 127.0.2.0/24, 192.0.2.9 for everyone else; PowerDNS answers it with the scope of the subnet
///   asked.
/// - `www.ecs.test` AAAA: 2001:db8::1 for 2001:db8:1::/48, 2001:db8::9 otherwise.
/// - `flat.ecs.test` A: 192.0.2.50 for everyone (scope 0).
/// - `alias.ecs.test` CNAME: `a.ecs.test` (192.0.2.101) for 198.51.100.0/24, `b.ecs.test` (192.0.2.102) for
///   203.0.113.0/24, `z.ecs.test` (192.0.2.109) otherwise: another record type that depends on the network.
/// - `web.ecs.test` HTTPS with `ipv4hint=10.0.0.8` (an internal address), `pub.ecs.test` HTTPS with a public hint.
/// - `www.ecs.test` HTTPS with hints no view answers (192.0.2.250, 2001:db8::250), `elsewhere.ecs.test` HTTPS pointing at
///   `www.ecs.test` with port 8443, `h3` and ECH: what serve steers to the addresses each client network gets;
///   `flatsvc.ecs.test` HTTPS pointing at `flat.ecs.test` (IPv4 only) with an IPv6 hint, `lonely.ecs.test` HTTPS with
///   a hint and no address records.
/// - For `hostsctl resolve --type`: `svc.ecs.test` HTTPS with every common key, `pool.ecs.test` HTTPS in AliasMode,
///   `doh.ecs.test` SVCB with `dohpath`, `mail` MX, `caa` CAA, `_sip._tcp` SRV, `chain` CNAME to `alias`, `words`
///   TXT of two strings, one with quotes.
/// - `big.ecs.test` TXT of about 900 bytes (truncated over UDP without EDNS), `broken.ecs.test` A whose LUA fails
///   (SERVFAIL).
public final class PowerDNS: Sendable {
    /// The server's address, e.g. `127.0.0.1:40123`.
    public let address: ServerAddress
    private let process: ChildProcess
    private let directory: URL

    /// The answers by network, as listed above.
    public static let zone = """
        $TTL 300
        @ IN SOA ns.ecs.test. admin.ecs.test. 1 3600 600 86400 60
        @ IN NS ns.ecs.test.
        ns IN A 127.0.0.1
        www IN LUA A "view({ {{'198.51.100.0/24'}, {'192.0.2.1'}}, {{'203.0.113.0/24'}, {'192.0.2.2'}}, \
        {{'127.0.1.0/24'}, {'192.0.2.11'}}, {{'127.0.2.0/24'}, {'192.0.2.12'}}, {{'0.0.0.0/0', '::/0'}, {'192.0.2.9'}} })"
        www IN LUA AAAA "view({ {{'2001:db8:1::/48'}, {'2001:db8::1'}}, {{'0.0.0.0/0', '::/0'}, {'2001:db8::9'}} })"
        flat IN A 192.0.2.50
        part IN LUA CNAME "view({ {{'127.0.1.0/24'}, {'empty.ecs.test'}}, {{'127.0.2.0/24'}, {'p2.ecs.test'}}, \
        {{'0.0.0.0/0', '::/0'}, {'p0.ecs.test'}} })"
        empty IN TXT "no address"
        p2 IN A 192.0.2.61
        p0 IN A 192.0.2.60
        alias IN LUA CNAME "view({ {{'198.51.100.0/24'}, {'a.ecs.test'}}, {{'203.0.113.0/24'}, {'b.ecs.test'}}, \
        {{'0.0.0.0/0', '::/0'}, {'z.ecs.test'}} })"
        a IN A 192.0.2.101
        b IN A 192.0.2.102
        z IN A 192.0.2.109
        web IN HTTPS 1 . alpn=h2 ipv4hint=10.0.0.8
        pub IN HTTPS 1 . alpn=h2 ipv4hint=93.184.216.34
        big IN TXT "x10x10x10x10x10x10x10x10x10x10x10x10x10x10x10x10x10x10x10x10x10x10x10x10x10x10x10x10x10x10x10x10x10x10x10x10x10x10x10x10" "x11x11x11x11x11x11x11x11x11x11x11x11x11x11x11x11x11x11x11x11x11x11x11x11x11x11x11x11x11x11x11x11x11x11x11x11x11x11x11x11" "x12x12x12x12x12x12x12x12x12x12x12x12x12x12x12x12x12x12x12x12x12x12x12x12x12x12x12x12x12x12x12x12x12x12x12x12x12x12x12x12" "x13x13x13x13x13x13x13x13x13x13x13x13x13x13x13x13x13x13x13x13x13x13x13x13x13x13x13x13x13x13x13x13x13x13x13x13x13x13x13x13" "x14x14x14x14x14x14x14x14x14x14x14x14x14x14x14x14x14x14x14x14x14x14x14x14x14x14x14x14x14x14x14x14x14x14x14x14x14x14x14x14" "x15x15x15x15x15x15x15x15x15x15x15x15x15x15x15x15x15x15x15x15x15x15x15x15x15x15x15x15x15x15x15x15x15x15x15x15x15x15x15x15"
        broken IN LUA A "error('no answer')"
        www IN HTTPS 1 . alpn=h2 ipv4hint=192.0.2.250 ipv6hint=2001:db8::250
        elsewhere IN HTTPS 1 www.ecs.test. alpn=h3 port=8443 ipv4hint=192.0.2.251 ech=AQIDBAUGBwg=
        flatsvc IN HTTPS 1 flat.ecs.test. alpn=h2 ipv6hint=2001:db8::252
        lonely IN HTTPS 1 . alpn=h2 ipv4hint=192.0.2.253
        svc IN HTTPS 1 target.ecs.test. mandatory=alpn,port alpn=h2,h3 port=8443 ipv4hint=192.0.2.1,192.0.2.2 ech=AQIDBAUGBwg= ipv6hint=2001:db8::1
        pool IN HTTPS 0 svc.ecs.test.
        doh IN SVCB 1 doh.ecs.test. alpn=h2 key7="/dns-query{?dns}"
        mail IN MX 10 mx.ecs.test.
        caa IN CAA 0 issue "ca.example.net"
        _sip._tcp IN SRV 10 60 5060 sip.ecs.test.
        chain IN CNAME alias.ecs.test.
        words IN TXT "two words" "and \\"quoted\\""

        """

    /// Starts pdns_server; waits until it answers.
    /// - Throws: ``TestServerError`` when PowerDNS is missing or does not come up.
    public init() throws {
        let binary = "/usr/sbin/pdns_server"
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw TestServerError(
                "pdns_server is not installed; run scripts/test.sh, which installs pdns-server and pdns-backend-bind")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "httpdns-pdns-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        do {
            try Self.zone.write(
                to: directory.appendingPathComponent("ecs.test.zone"), atomically: true, encoding: .utf8)
            try "zone \"ecs.test\" { type master; file \"\(directory.path)/ecs.test.zone\"; };\n".write(
                to: directory.appendingPathComponent("named.conf"), atomically: true, encoding: .utf8)
            (process, address) = try ServerLaunch.dnsServer("pdns_server") { port in
                let lines = [
                    "launch=bind", "bind-config=\(directory.path)/named.conf", "local-address=127.0.0.1",
                    "local-port=\(port)", "enable-lua-records=yes", "edns-subnet-processing=yes",
                    "socket-dir=\(directory.path)", "guardian=no", "daemon=no", "disable-syslog=yes", "loglevel=3",
                    "webserver=no", "security-poll-suffix=", "query-cache-ttl=0", "cache-ttl=0",
                    "negquery-cache-ttl=0", "distributor-threads=1", "receiver-threads=1",
                ]
                try (lines.joined(separator: "\n") + "\n").write(
                    to: directory.appendingPathComponent("pdns.conf"), atomically: true, encoding: .utf8)
                return try ChildProcess(path: binary, arguments: ["--config-dir=\(directory.path)"])
            }
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
        self.directory = directory
    }

    /// Stops the server and removes its files.
    public func stop() {
        process.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    deinit { stop() }

    /// Starts PowerDNS without holding a thread of the cooperative pool while it comes up.
    public static func start() async throws -> PowerDNS {
        try await offThePool { try PowerDNS() }
    }
}
