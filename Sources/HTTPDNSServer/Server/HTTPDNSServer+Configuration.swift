public import Configuration
public import HTTPDNS

extension HTTPDNSServer.Configuration {
    /// Reads the listener's keys of the `serve` section (`listen`, `certificate`, `privateKey`, `dns.listen`,
    /// `dot.listen`, `admin.*`, the connection limits, deadlines and write bound, `clientPrefixV4`/`V6`) from
    /// `config`, a reader scoped to that section; missing keys take their defaults, those of
    /// `HTTPDNSServer.Configuration()`, but for the admin listener, which a settings file opens on `127.0.0.1:8054`
    /// unless it says `none` (a server embedded in code has none unless given one).
    /// - Throws: `HTTPDNSError.Code.invalidConfiguration` naming the key for a bad value, a certificate without a key
    ///   (or the other way round), or DNS over TLS without a certificate.
    public init(configReader config: ConfigReader) throws(HTTPDNSError) {
        self.init()
        try SettingField.readAll(Self.fields, from: config, scope: "serve", into: &self)
        guard (certificatePath == nil) == (privateKeyPath == nil) else {
            throw SettingsReader(config: config, scope: "serve").invalid(
                "certificate", "serve.certificate and serve.privateKey go together")
        }
        guard dotListen == nil || certificatePath != nil else {
            throw SettingsReader(config: config, scope: "serve").invalid(
                "dot.listen", "DNS over TLS needs serve.certificate and serve.privateKey")
        }
        if let (key, problem) = listenerClash() {
            throw SettingsReader(config: config, scope: "serve").invalid(key, problem)
        }
    }

    /// The listeners by their key, for messages: the TCP ones (HTTP, plain DNS, DNS over TLS, admin) that are set.
    var tcpListeners: [(key: String, address: ServerAddress)] {
        [("listen", listen), ("dns.listen", dnsListen), ("dot.listen", dotListen), ("admin.listen", adminListen)]
            .compactMap { key, address in address.map { (key, $0) } }
    }

    /// Two listeners that would take the same TCP port (the same address, or one of them on every address, `0.0.0.0`
    /// or `::`): the later one's key and why. Port 0 (a free one, picked at start) never clashes.
    func listenerClash() -> (key: String, problem: String)? {
        let listeners = tcpListeners
        for (index, (key, address)) in listeners.enumerated() where address.port != 0 {
            for (earlierKey, earlier) in listeners[..<index] where earlier.port == address.port {
                if earlier.ip == address.ip || earlier.ip.scope == .unspecified || address.ip.scope == .unspecified {
                    return (
                        key, "\(address) is also serve.\(earlierKey) (\(earlier)): each listener needs its own port"
                    )
                }
            }
        }
        return nil
    }

    /// The defaults of the memberwise initializer, which the keys' rows print: each default is written once.
    private static let standard = HTTPDNSServer.Configuration()

    /// The listener's keys, relative to the `serve` section.
    package static let fields: [SettingField<HTTPDNSServer.Configuration>] = [
        .custom(
            "listen", .string, \.listen, shown: standard.listen.description,
            "the address and port hostsctl serve listens on",
            check: { ServerAddress.listenProblem($0) },
            decode: { reader, key throws(HTTPDNSError) in
                try ServerAddress(listening: try reader.string(key, default: standard.listen.description))
            },
            describe: { $0.description }),
        .optionalString(
            "certificate", \.certificatePath, shown: "none (plain HTTP)", none: "none",
            "PEM certificate chain; with serve.privateKey the server speaks TLS with HTTP/2"
        ).namingFiles(),
        .optionalString("privateKey", \.privateKeyPath, shown: "none", none: "none", "PEM private key").namingFiles(),
        optionalAddress(
            "dns.listen", \.dnsListen,
            "IP:PORT where plain DNS is served over UDP and TCP (for resolvers that forward); unset: not served"),
        optionalAddress(
            "dot.listen", \.dotListen,
            "IP:PORT where DNS over TLS is served with serve.certificate (port 853 for Android, stubby); unset: not served"
        ),
        optionalAddress(
            "admin.listen", \.adminListen, default: "127.0.0.1:8054",
            "IP:PORT where /metrics, /healthz and /readyz are served over plain HTTP (never /metrics on serve.listen); none: nowhere"
        ),
        .custom(
            "admin.hostNames", .stringArray, \.adminHostNames, shown: "[]",
            "names the admin listener answers for in Host besides loopback, localhost and its address (else 421)",
            check: { (try? HostName($0)) == nil ? "'\(HostName.printable($0))' is not a host name" : nil },
            decode: { reader, key throws(HTTPDNSError) in try reader.strings(key, default: []) },
            describe: { SettingsReader.list($0) }),
        .int(
            "tlsHandshakesPerSecond", \.maximumHandshakesPerSecond, default: standard.maximumHandshakesPerSecond,
            "new TLS connections a second in all (a sixteenth per client network); past it closed before the handshake",
            range: 16...1_000_000),
        .int(
            "admin.maxConnections", \.maximumAdminConnections, default: standard.maximumAdminConnections,
            "most connections open at once on the admin listener, apart from serve.maxConnections",
            range: 1...100_000),
        listenerLimit("http.maxConnections", \.listenerLimits.http, "the HTTP listener (serve.listen)"),
        listenerLimit("dns.maxConnections", \.listenerLimits.dns, "plain DNS over TCP (serve.dns.listen)"),
        listenerLimit("dot.maxConnections", \.listenerLimits.dot, "DNS over TLS (serve.dot.listen)"),
        .int(
            "maxBodyBytes", \.maximumBodyBytes, default: standard.maximumBodyBytes,
            "largest request body, bytes (a DoH query)", range: 512...65_535),
        milliseconds(
            "idleTimeoutMs", \.idleTimeout, "an idle connection is closed after this, milliseconds",
            range: 100...3_600_000),
        .int(
            "maxConnections", \.maximumConnections, default: standard.maximumConnections,
            "most connections open at once; past it a new one takes the longest-idle one's place, or waits in the listen backlog (docs/security.md)",
            range: 1...1_000_000),
        .int(
            "maxConnectionsPerClient", \.maximumConnectionsPerClient, default: standard.maximumConnectionsPerClient,
            "most connections open at once from one client network (serve.clientPrefixV4/V6); past it new ones are closed",
            range: 1...1_000_000),
        milliseconds(
            "tlsHandshakeTimeoutMs", \.handshakeTimeout,
            "the TLS handshake must end within this of the accept, milliseconds", range: 100...600_000),
        milliseconds(
            "requestHeadTimeoutMs", \.requestHeadTimeout,
            "a request head must arrive whole within this (the first from the handshake), milliseconds",
            range: 100...600_000),
        milliseconds(
            "requestBodyTimeoutMs", \.requestBodyTimeout,
            "a request body must arrive whole within this of its head, milliseconds", range: 100...600_000),
        milliseconds(
            "writeTimeoutMs", \.writeTimeout,
            "a connection whose answers stay unsent (a client that does not read) is closed after this, milliseconds",
            range: 100...600_000),
        .int(
            "maxQueuedBytes", \.maximumQueuedBytes, default: standard.maximumQueuedBytes,
            "most answer bytes queued on one connection; past it the connection is closed",
            range: 65_536...(64 << 20)),
        .int(
            "clientPrefixV4", \.clientPrefixes.ipv4, default: standard.clientPrefixes.ipv4,
            "IPv4 clients are counted by this prefix for rate and connection limits", range: 8...32),
        .int(
            "clientPrefixV6", \.clientPrefixes.ipv6, default: standard.clientPrefixes.ipv6,
            "IPv6 clients are counted by this prefix for rate and connection limits", range: 16...128),
    ]

    /// A deadline key in whole milliseconds, whose default is the memberwise initializer's.
    private static func milliseconds(
        _ path: String, _ field: any WritableKeyPath<Self, Duration> & Sendable, _ help: String,
        range: ClosedRange<Int>
    ) -> SettingField<Self> {
        .milliseconds(
            path, field, default: Int(standard[keyPath: field].roundedUpMilliseconds), help, range: range)
    }

    /// An `IP:PORT` key that may be unset (empty or `none`); unset by default unless `value` is given.
    private static func optionalAddress(
        _ path: String, _ field: any WritableKeyPath<Self, ServerAddress?> & Sendable,
        default value: String = "none", _ help: String
    ) -> SettingField<Self> {
        .custom(
            path, .string, field, shown: value, help,
            check: { text in
                text.isEmpty || text == "none" ? nil : ServerAddress.listenProblem(text).map { $0 + ", or none" }
            },
            decode: { reader, key throws(HTTPDNSError) in
                let text = try reader.string(key, default: value)
                return text.isEmpty || text == "none" ? nil : try ServerAddress(listening: text)
            },
            describe: { $0?.description ?? "none" })
    }

    /// A listener's own connection limit: 0 (the default) for none but the shared `serve.maxConnections`.
    private static func listenerLimit(
        _ path: String, _ field: any WritableKeyPath<Self, Int?> & Sendable, _ listener: String
    ) -> SettingField<Self> {
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
}
