package import Configuration
package import HTTPDNS
package import HTTPDNSCore

/// The `serve.*` keys: where `hostsctl serve` listens, its certificate, its limits and the vendor accounts it
/// answers. The server owns them; the shared settings file keeps the section for it (`ResolverSettings.read`).
package struct ServeSettings: Sendable, Hashable {
    /// One vendor account served on `/{account}/d` and `/{account}/sign_d`.
    package struct Account: Sendable, Hashable {
        /// The account ID.
        package var id: String
        /// The environment variable that holds its signing secret; `nil` for an account that answers unsigned
        /// requests.
        package var secretVariable: String?
    }

    /// Whether the endpoints that carry no account (`/dns-query`, `/resolve`, `/d?dn=`) answer.
    package enum PublicEndpoints: String, Sendable, Hashable, CaseIterable {
        /// They answer unless an account is signed-only (which says the service is not for everyone).
        case auto
        /// They answer.
        case on
        /// They answer 403.
        case off
    }

    /// What the server does with DNS queries for types other than A and AAAA.
    package enum OtherQueryTypes: String, Sendable, Hashable, CaseIterable {
        /// Answer NOTIMP.
        case notImplemented = "notimp"
        /// Send them through c-ares to its servers and relay the answer.
        case forward
    }

    /// Where the client's network for EDNS Client Subnet (RFC 7871) comes from.
    package enum ClientSubnetMode: String, Sendable, Hashable, CaseIterable {
        /// What the client says (an ECS option in its query, `ip=` of the vendor APIs, `edns_client_subnet=` of the
        /// JSON API), else its connection's address.
        case on
        /// The connection's address only: whatever the client says is ignored (and not echoed).
        case connection
        /// No client subnet: upstreams see the server's own network, and clients' options are ignored.
        case off
    }

    /// The address and port to listen on.
    package var listen: ServerAddress
    /// The PEM certificate chain; with ``privateKey`` the server speaks TLS (HTTP/2 and HTTP/1.1).
    package var certificate: String?
    /// Where plain DNS (UDP and TCP, RFC 1035 and RFC 7766) is served; `nil` (the default) for nowhere.
    package var dnsListen: ServerAddress?
    /// Where DNS over TLS (RFC 7858) is served, with ``certificate``; `nil` (the default) for nowhere.
    package var dotListen: ServerAddress?
    /// The PEM private key.
    package var privateKey: String?
    /// The most addresses in one answer.
    package var maximumAnswers: Int
    /// The largest request body, in bytes.
    package var maximumBodyBytes: Int
    /// A connection idle for this long is closed, in milliseconds.
    package var idleTimeoutMilliseconds: Int
    /// The most connections open at once; past it new connections wait in the listen backlog.
    package var maximumConnections: Int
    /// The most connections open at once from one client network (see ``clientPrefixV4``); past it new ones are
    /// closed.
    package var maximumConnectionsPerClient: Int
    /// The TLS handshake must end within this of the accept, in milliseconds.
    package var handshakeTimeoutMilliseconds: Int
    /// A request head must arrive whole within this (the first from the handshake, on HTTP/1.1 later ones from
    /// their first byte), in milliseconds.
    package var requestHeadTimeoutMilliseconds: Int
    /// A request body must arrive whole within this of its head, in milliseconds.
    package var requestBodyTimeoutMilliseconds: Int
    /// A connection whose answers stay unsent this long is closed, in milliseconds.
    package var writeTimeoutMilliseconds: Int
    /// The most answer bytes queued on one connection before it is closed.
    package var maximumQueuedBytes: Int
    /// The prefix length an IPv4 client's network is counted by for rate and connection limits.
    package var clientPrefixV4: Int
    /// The prefix length an IPv6 client's network is counted by for rate and connection limits.
    package var clientPrefixV6: Int
    /// How far ahead a signed request's expiry (`t`) may be, in seconds.
    package var signatureWindowSeconds: Int
    /// Whether the unsigned endpoints (`/dns-query`, `/resolve`, `/d?dn=`) answer.
    package var publicEndpoints: PublicEndpoints
    /// Whether the server may probe (and rank by probing) private, loopback, link-local and other guarded
    /// addresses that answers name.
    package var probeGuardedAddresses: Bool
    /// Networks whose clients may send `POST /report` without an account signature.
    package var reportNetworks: [String]
    /// The most queries being forwarded at once (``otherTypes`` `forward`); past it queries get SERVFAIL at once.
    package var maximumForwardedQueries: Int
    /// The vendor accounts.
    package var accounts: [Account]
    /// Requests per second each client network (see ``clientPrefixV4``) may make; 0 turns the limit off.
    package var rateLimitPerSecond: Int
    /// Requests a client may make at once before the rate applies.
    package var rateLimitBurst: Int
    /// What happens to queries for other record types.
    package var otherTypes: OtherQueryTypes
    /// Whether access logs show whole client addresses (otherwise the /24 or /48 network).
    package var logFullClientAddresses: Bool
    /// Whether clients may report connect times and failures (`POST /report`) that feed the server's scores.
    package var acceptClientReports: Bool
    /// Where a client's network for EDNS Client Subnet comes from, if anywhere.
    package var clientSubnetMode: ClientSubnetMode
    /// The most bits of an IPv4 client's address sent upstream as its subnet.
    package var clientSubnetPrefixV4: Int
    /// The most bits of an IPv6 client's address sent upstream as its subnet.
    package var clientSubnetPrefixV6: Int
    /// Proxies (CIDR) whose `Forwarded` or `X-Forwarded-For` header names the client.
    package var trustedProxies: [String]
    /// Regions (CIDR) that client reports steer as one; other clients by their own /24 or /56.
    package var steeringRegions: [String]

    /// The defaults: plain HTTP on 127.0.0.1:8053, 8 answers, 64 KiB bodies, 30 s idle, 10,000 connections, no
    /// vendor account.
    package static var `default`: ServeSettings {
        // Reading from an empty provider gives every default; it cannot fail.
        try! ServeSettings(configReader: defaultsReader)
    }

    /// Reads the `serve.*` keys; missing keys take their defaults.
    /// - Throws: ``DNSError/Code/invalidConfiguration`` naming the key for a bad value, or a certificate without a
    ///   key (or the other way round).
    package init(configReader config: ConfigReader) throws(DNSError) {
        // Placeholders only: every field below overwrites its property.
        listen = ServerAddress(ip: IPAddress(ipv4: 127, 0, 0, 1), port: 8053)
        certificate = nil
        dnsListen = nil
        dotListen = nil
        privateKey = nil
        maximumAnswers = 0
        maximumBodyBytes = 0
        idleTimeoutMilliseconds = 0
        maximumConnections = 0
        maximumConnectionsPerClient = 0
        handshakeTimeoutMilliseconds = 0
        requestHeadTimeoutMilliseconds = 0
        requestBodyTimeoutMilliseconds = 0
        writeTimeoutMilliseconds = 0
        maximumQueuedBytes = 0
        clientPrefixV4 = 32
        clientPrefixV6 = 56
        signatureWindowSeconds = 0
        publicEndpoints = .auto
        probeGuardedAddresses = false
        reportNetworks = []
        maximumForwardedQueries = 0
        accounts = []
        rateLimitPerSecond = 0
        rateLimitBurst = 0
        otherTypes = .notImplemented
        logFullClientAddresses = false
        acceptClientReports = false
        clientSubnetMode = .on
        clientSubnetPrefixV4 = 24
        clientSubnetPrefixV6 = 56
        trustedProxies = []
        steeringRegions = []
        try SettingField.readAll(Self.fields, from: config, into: &self)
        guard (certificate == nil) == (privateKey == nil) else {
            throw SettingsReader(config: config).invalid(
                "serve.certificate", "serve.certificate and serve.privateKey go together")
        }
        guard dotListen == nil || certificate != nil else {
            throw SettingsReader(config: config).invalid(
                "serve.dot.listen", "DNS over TLS needs serve.certificate and serve.privateKey")
        }
    }

    /// An `IP:PORT` key that may be unset.
    private static func optionalAddress(
        _ path: String, _ field: any WritableKeyPath<ServeSettings, ServerAddress?> & Sendable, _ help: String
    ) -> SettingField<ServeSettings> {
        .custom(
            path, .string, field, shown: "none", help,
            check: { text in
                text.isEmpty || (try? ServerAddress(parsing: text)) != nil
                    ? nil : "'\(HostName.printable(text))' is not IP:PORT"
            },
            decode: { reader, key throws(DNSError) in
                let text = try reader.string(key, default: "")
                return text.isEmpty ? nil : try ServerAddress(parsing: text)
            },
            describe: { $0?.description ?? "none" })
    }

    /// The `serve` section of the settings file.
    package static let section = SettingsSection("serve", fields: fields, read: ServeSettings.init(configReader:))

    static let fields: [SettingField<ServeSettings>] = [
        .custom(
            "serve.listen", .string, \.listen, shown: "127.0.0.1:8053",
            "the address and port hostsctl serve listens on",
            check: { text in
                (try? ServerAddress(parsing: text)) == nil ? "'\(HostName.printable(text))' is not IP:PORT" : nil
            },
            decode: { reader, key throws(DNSError) in
                try ServerAddress(parsing: try reader.string(key, default: "127.0.0.1:8053"))
            },
            describe: { $0.description }),
        .optionalString(
            "serve.certificate", \.certificate, shown: "none (plain HTTP)", none: "none",
            "PEM certificate chain; with serve.privateKey the server speaks TLS with HTTP/2"),
        .optionalString("serve.privateKey", \.privateKey, shown: "none", none: "none", "PEM private key"),
        optionalAddress(
            "serve.dns.listen", \.dnsListen,
            "IP:PORT where plain DNS is served over UDP and TCP (for resolvers that forward); unset: not served"),
        optionalAddress(
            "serve.dot.listen", \.dotListen,
            "IP:PORT where DNS over TLS is served with serve.certificate (port 853 for Android, stubby); unset: not served"
        ),
        .int("serve.maxAnswers", \.maximumAnswers, default: 8, "most addresses in one answer", range: 1...64),
        .int(
            "serve.maxBodyBytes", \.maximumBodyBytes, default: 65_535, "largest request body, bytes",
            range: 512...65_535),
        .int(
            "serve.idleTimeoutMs", \.idleTimeoutMilliseconds, default: 30_000,
            "an idle connection is closed after this, milliseconds", range: 100...3_600_000),
        .int(
            "serve.maxConnections", \.maximumConnections, default: 10_000,
            "most connections open at once; past it new ones wait in the listen backlog", range: 1...1_000_000),
        .int(
            "serve.maxConnectionsPerClient", \.maximumConnectionsPerClient, default: 1_000,
            "most connections open at once from one client network (serve.clientPrefixV4/V6); past it new ones are closed",
            range: 1...1_000_000),
        .int(
            "serve.tlsHandshakeTimeoutMs", \.handshakeTimeoutMilliseconds, default: 10_000,
            "the TLS handshake must end within this of the accept, milliseconds", range: 100...600_000),
        .int(
            "serve.requestHeadTimeoutMs", \.requestHeadTimeoutMilliseconds, default: 10_000,
            "a request head must arrive whole within this (the first from the handshake), milliseconds",
            range: 100...600_000),
        .int(
            "serve.requestBodyTimeoutMs", \.requestBodyTimeoutMilliseconds, default: 10_000,
            "a request body must arrive whole within this of its head, milliseconds", range: 100...600_000),
        .int(
            "serve.writeTimeoutMs", \.writeTimeoutMilliseconds, default: 10_000,
            "a connection whose answers stay unsent (a client that does not read) is closed after this, milliseconds",
            range: 100...600_000),
        .int(
            "serve.maxQueuedBytes", \.maximumQueuedBytes, default: 1 << 20,
            "most answer bytes queued on one connection; past it the connection is closed", range: 65_536...(64 << 20)),
        .int(
            "serve.clientPrefixV4", \.clientPrefixV4, default: 32,
            "IPv4 clients are counted by this prefix for rate and connection limits", range: 8...32),
        .int(
            "serve.clientPrefixV6", \.clientPrefixV6, default: 56,
            "IPv6 clients are counted by this prefix for rate and connection limits", range: 16...128),
        .int(
            "serve.signatureWindowSeconds", \.signatureWindowSeconds, default: 600,
            "a signed request's expiry t may be at most this far ahead, seconds", range: 1...86_400),
        .choice(
            "serve.publicEndpoints", \.publicEndpoints, default: .auto,
            "whether /dns-query, /resolve and /d?dn= answer: auto (unless an account is signed-only), on, off"),
        .bool(
            "serve.probeGuardedAddresses", \.probeGuardedAddresses, default: false,
            "let the server probe private, loopback, link-local and other guarded addresses that answers name"),
        .strings(
            "serve.reportNetworks", \.reportNetworks,
            "networks (CIDR) whose clients may POST /report without an account signature",
            check: { IPNetwork($0) == nil ? "'\(HostName.printable($0))' is not a network such as 10.0.0.0/8" : nil }),
        .int(
            "serve.maxForwardedQueries", \.maximumForwardedQueries, default: 256,
            "most queries of other types being forwarded at once; past it SERVFAIL", range: 1...100_000),
        .custom(
            "serve.accounts", .stringArray, \.accounts, shown: "[]",
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
            decode: { reader, key throws(DNSError) in
                try reader.strings(key, default: []).map { text in
                    let parts = text.split(separator: ":").map(String.init)
                    return Account(id: parts[0], secretVariable: parts.count > 1 ? parts[1] : nil)
                }
            },
            describe: { SettingsReader.list($0.map { $0.id + ($0.secretVariable.map { ":" + $0 } ?? "") }) }),
        .int(
            "serve.rateLimitPerSecond", \.rateLimitPerSecond, default: 0,
            "requests per second per client network (serve.clientPrefixV4/V6); 0 turns the limit off",
            range: 0...10_000_000),
        .int(
            "serve.rateLimitBurst", \.rateLimitBurst, default: 200,
            "requests a client may make at once before the rate applies", range: 1...10_000_000),
        .choice(
            "serve.otherTypes", \.otherTypes, default: .notImplemented,
            "queries for types other than A and AAAA: notimp answers NOTIMP, forward sends them through c-ares"),
        .bool(
            "serve.logFullClientAddresses", \.logFullClientAddresses, default: false,
            "access logs show whole client addresses instead of their /24 or /48"),
        .bool(
            "serve.clientReports", \.acceptClientReports, default: false,
            "accept POST /report: clients' connect times and failures for addresses the server answered feed its scores"
        ),
        .choice(
            "serve.ecs.mode", \.clientSubnetMode, default: .on,
            "EDNS Client Subnet: on (the client's ECS option, ip= or edns_client_subnet=, else its address), "
                + "connection (its address only), off"),
        .int(
            "serve.ecs.prefixV4", \.clientSubnetPrefixV4, default: 24,
            "most bits of an IPv4 client's address sent upstream as its subnet", range: 8...32),
        .int(
            "serve.ecs.prefixV6", \.clientSubnetPrefixV6, default: 56,
            "most bits of an IPv6 client's address sent upstream as its subnet", range: 16...128),
        .strings(
            "serve.trustedProxies", \.trustedProxies,
            "proxies (CIDR) whose Forwarded or X-Forwarded-For header names the client (limits, ECS, reports, logs)",
            check: { IPNetwork($0) == nil ? "'\(HostName.printable($0))' is not a network such as 10.0.0.0/8" : nil }),
        .strings(
            "serve.steeringRegions", \.steeringRegions,
            "regions (CIDR) whose clients' reports order the answers of every client in them (else by /24 or /56)",
            check: { IPNetwork($0) == nil ? "'\(HostName.printable($0))' is not a network such as 10.0.0.0/8" : nil }),
    ]
}
