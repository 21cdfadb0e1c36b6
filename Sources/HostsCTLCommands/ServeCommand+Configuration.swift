import Configuration
package import HTTPDNS
import HTTPDNSCore
package import HTTPDNSServer

extension ServeCommand {
    /// The `serve` section of the settings file, `hostsctl serve`'s configuration: where it listens, its certificate,
    /// its limits and the vendor accounts it answers. The shared settings file keeps the section for the command
    /// (`HostResolver.Configuration.read`).
    ///
    /// The keys read straight into the configurations of the two components the command runs, ``server`` (the
    /// listener, `HTTPDNSServer.Configuration`) and ``service`` (what it answers, `HTTPDNSService.Configuration`); what
    /// only the command decides (the accounts' secret variables, whether the public endpoints answer, probing guarded
    /// addresses) sits beside them.
    package struct Configuration: Sendable, Hashable {
        /// One vendor account served on `/{account}/d` and `/{account}/sign_d`.
        struct Account: Sendable, Hashable {
            /// The account ID.
            var id: String
            /// The environment variable that holds its signing secret; `nil` for an account that answers unsigned
            /// requests.
            var secretVariable: String?
        }

        /// Whether the endpoints that carry no account (`/dns-query`, `/resolve`, `/d?dn=`) answer.
        enum PublicEndpoints: String, Sendable, Hashable, CaseIterable {
            /// They answer unless an account is signed-only (which says the service is not for everyone).
            case auto
            /// They answer.
            case on
            /// They answer 403.
            case off
        }

        /// The listener: address, certificate, limits and deadlines.
        var server: HTTPDNSServer.Configuration
        /// What the service answers and how; its accounts and public endpoints come from ``service(accounts:)``.
        package var service: HTTPDNSService.Configuration
        /// Whether the server may probe (and rank by probing) private, loopback, link-local and other guarded
        /// addresses that answers name (and so forward reverse lookups into them).
        var probeGuardedAddresses: Bool
        /// Whether the unsigned endpoints (`/dns-query`, `/resolve`, `/d?dn=`) answer.
        var publicEndpoints: PublicEndpoints
        /// The vendor accounts.
        var accounts: [Account]

        /// How much of a client's address names its network, for the listener's connection limits and the service's
        /// rate limits alike (`serve.clientPrefixV4`, `serve.clientPrefixV6`).
        var clientPrefixes: ClientPrefixes {
            get { server.clientPrefixes }
            set {
                server.clientPrefixes = newValue
                service.clientPrefixes = newValue
            }
        }

        /// The service's configuration with the accounts' secrets (read by the caller from the environment): the
        /// public endpoints answer when `on`, or when `auto` and no account is signed-only.
        func service(accounts secrets: [String: HTTPDNSSecret?]) -> HTTPDNSService.Configuration {
            var configuration = service
            configuration.accounts = secrets
            configuration.publicEndpoints =
                publicEndpoints == .on || (publicEndpoints == .auto && !secrets.values.contains { $0 != nil })
            configuration.forwardsGuardedReverseLookups = probeGuardedAddresses
            configuration.guardsForwardedAddresses = !probeGuardedAddresses
            return configuration
        }

        /// The defaults: plain HTTP on 127.0.0.1:8053, 8 answers, 64 KiB bodies, 30 s idle, 10,000 connections, no
        /// vendor account.
        static var `default`: Configuration {
            // Reading from an empty provider gives every default; it cannot fail.
            try! Configuration(configReader: defaultsReader)
        }

        /// Reads the `serve` section from `config`, a reader scoped to it; missing keys take their defaults.
        /// - Throws: `HTTPDNSError.Code.invalidConfiguration` naming the key for a bad value, or a certificate without a
        ///   key (or the other way round).
        init(configReader config: ConfigReader) throws(HTTPDNSError) {
            server = HTTPDNSServer.Configuration()
            service = HTTPDNSService.Configuration()
            probeGuardedAddresses = false
            publicEndpoints = .auto
            accounts = []
            try SettingField.readAll(Self.fields, from: config, scope: "serve", into: &self)
            guard (server.certificatePath == nil) == (server.privateKeyPath == nil) else {
                throw SettingsReader(config: config, scope: "serve").invalid(
                    "certificate", "serve.certificate and serve.privateKey go together")
            }
            guard server.dotListen == nil || server.certificatePath != nil else {
                throw SettingsReader(config: config, scope: "serve").invalid(
                    "dot.listen", "DNS over TLS needs serve.certificate and serve.privateKey")
            }
        }

        /// An `IP:PORT` key that may be unset (empty or `none`); unset by default unless `value` is given.
        private static func optionalAddress(
            _ path: String, _ field: any WritableKeyPath<Configuration, ServerAddress?> & Sendable,
            default value: String = "none", _ help: String
        ) -> SettingField<Configuration> {
            .custom(
                path, .string, field, shown: value, help,
                check: { text in
                    text.isEmpty || text == "none" || (try? ServerAddress(parsing: text)) != nil
                        ? nil : "'\(HostName.printable(text))' is not IP:PORT or none"
                },
                decode: { reader, key throws(HTTPDNSError) in
                    let text = try reader.string(key, default: value)
                    return text.isEmpty || text == "none" ? nil : try ServerAddress(parsing: text)
                },
                describe: { $0?.description ?? "none" })
        }

        /// A listener's own connection limit: 0 (the default) for none but the shared `serve.maxConnections`.
        private static func listenerLimit(
            _ path: String, _ field: any WritableKeyPath<Configuration, Int?> & Sendable, _ listener: String
        ) -> SettingField<Configuration> {
            .custom(
                path, .int, field, shown: "0",
                "most connections open at once on \(listener), within serve.maxConnections; 0: no limit of its own",
                range: 0...1_000_000,
                decode: { reader, key throws(HTTPDNSError) in
                    let limit = try reader.int(key, default: 0)
                    return limit > 0 ? limit : nil
                },
                describe: { "\($0 ?? 0)" })
        }

        /// The `serve` section of the settings file.
        package static let section = SettingsSection("serve", fields: fields, read: Configuration.init(configReader:))

        static let fields: [SettingField<Configuration>] = [
            .custom(
                "listen", .string, \.server.listen, shown: "127.0.0.1:8053",
                "the address and port hostsctl serve listens on",
                check: { text in
                    (try? ServerAddress(parsing: text)) == nil ? "'\(HostName.printable(text))' is not IP:PORT" : nil
                },
                decode: { reader, key throws(HTTPDNSError) in
                    try ServerAddress(parsing: try reader.string(key, default: "127.0.0.1:8053"))
                },
                describe: { $0.description }),
            .optionalString(
                "certificate", \.server.certificatePath, shown: "none (plain HTTP)", none: "none",
                "PEM certificate chain; with serve.privateKey the server speaks TLS with HTTP/2"),
            .optionalString("privateKey", \.server.privateKeyPath, shown: "none", none: "none", "PEM private key"),
            optionalAddress(
                "dns.listen", \.server.dnsListen,
                "IP:PORT where plain DNS is served over UDP and TCP (for resolvers that forward); unset: not served"),
            optionalAddress(
                "dot.listen", \.server.dotListen,
                "IP:PORT where DNS over TLS is served with serve.certificate (port 853 for Android, stubby); unset: not served"
            ),
            optionalAddress(
                "admin.listen", \.server.adminListen, default: "127.0.0.1:8054",
                "IP:PORT where /metrics, /healthz and /readyz are served over plain HTTP (never /metrics on serve.listen); none: nowhere"
            ),
            .custom(
                "admin.hostNames", .stringArray, \.server.adminHostNames, shown: "[]",
                "names the admin listener answers for in Host besides loopback, localhost and its address (else 421)",
                check: { (try? HostName($0)) == nil ? "'\(HostName.printable($0))' is not a host name" : nil },
                decode: { reader, key throws(HTTPDNSError) in try reader.strings(key, default: []) },
                describe: { SettingsReader.list($0) }),
            .int(
                "tlsHandshakesPerSecond", \.server.maximumHandshakesPerSecond, default: 1_024,
                "new TLS connections a second in all (a sixteenth per client network); past it closed before the handshake",
                range: 16...1_000_000),
            .int(
                "admin.maxConnections", \.server.maximumAdminConnections, default: 64,
                "most connections open at once on the admin listener, apart from serve.maxConnections",
                range: 1...100_000),
            listenerLimit("http.maxConnections", \.server.listenerLimits.http, "the HTTP listener (serve.listen)"),
            listenerLimit("dns.maxConnections", \.server.listenerLimits.dns, "plain DNS over TCP (serve.dns.listen)"),
            listenerLimit("dot.maxConnections", \.server.listenerLimits.dot, "DNS over TLS (serve.dot.listen)"),
            .int("maxAnswers", \.service.maximumAnswers, default: 8, "most addresses in one answer", range: 1...64),
            .int(
                "maxBodyBytes", \.server.maximumBodyBytes, default: 4_096, "largest request body, bytes (a DoH query)",
                range: 512...65_535),
            .milliseconds(
                "idleTimeoutMs", \.server.idleTimeout, default: 30_000,
                "an idle connection is closed after this, milliseconds", range: 100...3_600_000),
            .int(
                "maxConnections", \.server.maximumConnections, default: 768,
                "most connections open at once; past it a new one takes the longest-idle one's place, or waits in the listen backlog (docs/security.md)",
                range: 1...1_000_000),
            .int(
                "maxConnectionsPerClient", \.server.maximumConnectionsPerClient, default: 48,
                "most connections open at once from one client network (serve.clientPrefixV4/V6); past it new ones are closed",
                range: 1...1_000_000),
            .milliseconds(
                "tlsHandshakeTimeoutMs", \.server.handshakeTimeout, default: 10_000,
                "the TLS handshake must end within this of the accept, milliseconds", range: 100...600_000),
            .milliseconds(
                "requestHeadTimeoutMs", \.server.requestHeadTimeout, default: 10_000,
                "a request head must arrive whole within this (the first from the handshake), milliseconds",
                range: 100...600_000),
            .milliseconds(
                "requestBodyTimeoutMs", \.server.requestBodyTimeout, default: 10_000,
                "a request body must arrive whole within this of its head, milliseconds", range: 100...600_000),
            .milliseconds(
                "writeTimeoutMs", \.server.writeTimeout, default: 10_000,
                "a connection whose answers stay unsent (a client that does not read) is closed after this, milliseconds",
                range: 100...600_000),
            .int(
                "maxQueuedBytes", \.server.maximumQueuedBytes, default: 1 << 20,
                "most answer bytes queued on one connection; past it the connection is closed",
                range: 65_536...(64 << 20)),
            .int(
                "clientPrefixV4", \.clientPrefixes.ipv4, default: 24,
                "IPv4 clients are counted by this prefix for rate and connection limits", range: 8...32),
            .int(
                "clientPrefixV6", \.clientPrefixes.ipv6, default: 48,
                "IPv6 clients are counted by this prefix for rate and connection limits", range: 16...128),
            .seconds(
                "signatureWindowSeconds", \.service.signatureWindow, default: 600,
                "a signed request's expiry t may be at most this far ahead, seconds", range: 1...86_400),
            .choice(
                "publicEndpoints", \.publicEndpoints, default: .auto,
                "whether /dns-query, /resolve and /d?dn= answer: auto (unless an account is signed-only), on, off"),
            .bool(
                "probeGuardedAddresses", \.probeGuardedAddresses, default: false,
                "let the server probe private, loopback, link-local and other guarded addresses that answers name"),
            networks(
                "reportNetworks", \.service.reportNetworks,
                "networks (CIDR) whose clients may POST /report without an account signature"),
            .int(
                "maxForwardedQueries", \.service.maximumForwardedQueries, default: 256,
                "most queries of other types being forwarded at once; past it SERVFAIL", range: 1...100_000),
            .int(
                "maxUpstreamLookups", \.service.maximumUpstreamLookups, default: 1_024,
                "most requests waiting for an upstream at once; past it 503 with Retry-After (SERVFAIL over DNS)",
                range: 1...1_000_000),
            .int(
                "maxUpstreamLookupsPerNetwork", \.service.maximumUpstreamLookupsPerNetwork, default: 64,
                "most requests of one client network (/24 or /48) waiting for an upstream at once", range: 1...1_000_000
            ),
            .milliseconds(
                "upstreamQueueMs", \.service.upstreamQueueWait, default: 300,
                "a request past its network's share waits this long for one of its places (four shares "
                    + "may wait; 0: refused at once), milliseconds", range: 0...5_000),
            .custom(
                "accounts", .stringArray, \.accounts, shown: "[]",
                "vendor accounts served on /ACCOUNT/d and /ACCOUNT/sign_d: ACCOUNT, or ACCOUNT:SECRET_ENV for signed only",
                check: { text in
                    let parts = text.split(separator: ":", omittingEmptySubsequences: false)
                    let valid =
                        (parts.count == 1 || parts.count == 2)
                        && parts.allSatisfy { part in
                            !part.isEmpty
                                && part.utf8.allSatisfy {
                                    $0.isASCIIAlphanumeric || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_")
                                }
                        }
                    return valid ? nil : "'\(HostName.printable(text))' is not ACCOUNT or ACCOUNT:SECRET_ENV"
                },
                decode: { reader, key throws(HTTPDNSError) in
                    try reader.strings(key, default: []).map { text in
                        let parts = text.split(separator: ":").map(String.init)
                        return Account(id: parts[0], secretVariable: parts.count > 1 ? parts[1] : nil)
                    }
                },
                describe: { SettingsReader.list($0.map { $0.id + ($0.secretVariable.map { ":" + $0 } ?? "") }) }),
            perSecond(
                "rateLimitPerSecond", \.service.rateLimitPerSecond, default: 2_000,
                "requests per second per client network (serve.clientPrefixV4/V6) over TCP, DoT, HTTP and cookie-verified UDP; 0 turns the limit off",
                range: 0...10_000_000),
            perSecond(
                "rateLimitBurst", \.service.rateLimitBurst, default: 4_000,
                "requests a client may make at once before the rate applies", range: 1...10_000_000),
            perSecond(
                "udpRateLimitPerSecond", \.service.udpRateLimitPerSecond, default: 500,
                "UDP queries per second per client network, apart from its other transports (past it dropped, or TC one in two); 0 turns it off",
                range: 0...10_000_000),
            perSecond(
                "udpRateLimitBurst", \.service.udpRateLimitBurst, default: 1_000,
                "UDP queries a client network may send at once before serve.udpRateLimitPerSecond applies",
                range: 1...10_000_000),
            .choice(
                "otherTypes", \.service.otherTypes, default: .notImplemented,
                "queries for types other than A and AAAA: notimp answers NOTIMP, forward sends them through c-ares"),
            .bool(
                "logFullClientAddresses", \.service.logFullClientAddresses, default: false,
                "access logs show whole client addresses instead of their /24 or /48"),
            .bool(
                "clientReports", \.service.acceptClientReports, default: false,
                "accept POST /report: clients' connect times and failures for addresses the server answered feed its scores"
            ),
            .choice(
                "ecs.mode", \.service.clientSubnetMode, default: .on,
                "EDNS Client Subnet: on (the client's ECS option, ip= or edns_client_subnet=, else its address), "
                    + "connection (its address only), off"),
            .int(
                "ecs.prefixV4", \.service.clientSubnetPrefixes.ipv4, default: 24,
                "most bits of an IPv4 client's address sent upstream as its subnet", range: 8...32),
            .int(
                "ecs.prefixV6", \.service.clientSubnetPrefixes.ipv6, default: 56,
                "most bits of an IPv6 client's address sent upstream as its subnet", range: 16...128),
            networks(
                "trustedProxies.networks", \.service.trustedProxies,
                "proxies (CIDR) whose serve.trustedProxies.header names the client (limits, ECS, reports, logs)"),
            .choice(
                "trustedProxies.header", \.service.trustedProxyHeader, default: .xForwardedFor,
                "the one header trusted proxies write, read from the right: x-forwarded-for or forwarded (RFC 7239)"),
            networks(
                "steeringRegions", \.service.steeringRegions,
                "regions (CIDR) whose clients' reports order the answers of every client in them (else by /24 or /56)"),
        ]

        /// A key holding networks (CIDR), e.g. `10.0.0.0/8`.
        private static func networks(
            _ path: String, _ field: any WritableKeyPath<Configuration, [IPNetwork]> & Sendable, _ help: String
        ) -> SettingField<Configuration> {
            .custom(
                path, .stringArray, field, shown: "[]", help,
                check: {
                    IPNetwork($0) == nil ? "'\(HostName.printable($0))' is not a network such as 10.0.0.0/8" : nil
                },
                decode: { reader, key throws(HTTPDNSError) in
                    try reader.strings(key, default: []).compactMap(IPNetwork.init)
                },
                describe: { SettingsReader.list($0.map(\.description)) })
        }

        /// An integer key held as a rate (requests per second, a burst of requests).
        private static func perSecond(
            _ path: String, _ field: any WritableKeyPath<Configuration, Double> & Sendable, default value: Int,
            _ help: String, range: ClosedRange<Int>
        ) -> SettingField<Configuration> {
            .custom(
                path, .int, field, shown: "\(value)", help, range: range,
                decode: { reader, key throws(HTTPDNSError) in Double(try reader.int(key, default: value)) },
                describe: { "\(Int($0))" })
        }
    }
}
