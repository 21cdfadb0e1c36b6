import CoreMetrics
import Foundation
public import HTTPDNS
import Logging
import Synchronization
public import Configuration

extension HTTPDNSService {
    /// What the service answers and how; ``apply(_:)`` replaces it while serving.
    public struct Configuration: Sendable, Hashable {
        /// What the service does with DNS queries for types other than A and AAAA.
        public enum OtherTypes: String, Sendable, Hashable, CaseIterable {
            /// Answer NOTIMP.
            case notImplemented = "notimp"
            /// Send them through c-ares to its servers and relay the answer.
            case forward
        }

        /// The one header a trusted proxy names the client in; the other is never believed.
        public enum ProxyHeader: String, Sendable, Hashable, CaseIterable {
            /// `X-Forwarded-For`, which nginx, HAProxy and most cloud balancers append to.
            case xForwardedFor = "x-forwarded-for"
            /// RFC 7239 `Forwarded`, for proxies that append to it instead.
            case forwarded
        }

        /// Whether the endpoints that carry no account (`/dns-query`, `/resolve`, `/d?dn=`) answer.
        public enum PublicEndpoints: String, Sendable, Hashable, CaseIterable {
            /// They answer unless an account is signed-only (which says the service is not for everyone).
            case auto
            /// They answer.
            case on
            /// They answer 403.
            case off
        }

        /// Where the client's network for EDNS Client Subnet (RFC 7871) comes from.
        public enum ClientSubnetMode: String, Sendable, Hashable, CaseIterable {
            /// What the client says (an ECS option in its query, `ip=` of the vendor APIs, `edns_client_subnet=` of the
            /// JSON API), else its connection's address.
            case on
            /// The connection's address only: whatever the client says is ignored (and not echoed).
            case connection
            /// No client subnet: upstreams see the server's own network, and clients' options are ignored.
            case off
        }

        /// The most addresses in one answer (best first).
        public var maximumAnswers: Int
        /// Vendor accounts served on `/{account}/d` and `/{account}/sign_d`, each with its signing secret (for an
        /// account with a secret only signed requests are answered).
        public var accounts: [String: HTTPDNSSecret?]
        /// Requests per second each client network (``clientPrefixes``) may make over TCP, DNS over TLS, HTTP and
        /// UDP with a valid server cookie (sources that cannot be forged): 2,000 by default, about a sixteenth of two
        /// cores at the workload's cost per query (docs/security.md, "Rates"), so no one network takes more of the
        /// CPU than of any other bound; 0 turns the limit off.
        public var rateLimitPerSecond: Double
        /// How many requests a client may make at once before the rate applies (4,000 by default).
        public var rateLimitBurst: Double
        /// UDP queries per second each client network may make (a bucket apart from its other transports, since
        /// UDP sources can be forged); past it a query is dropped, or answered truncated one time in two so that a
        /// real client asks again over TCP. On by default, so that a plain DNS listener facing the internet is no
        /// open amplifier; 0 turns it off.
        public var udpRateLimitPerSecond: Double
        /// How many UDP queries a client network may send at once before ``udpRateLimitPerSecond`` applies.
        public var udpRateLimitBurst: Double
        /// What happens to DNS queries for other types.
        public var otherTypes: OtherTypes
        /// Whether access logs carry the whole client address rather than its network (/24 or /48).
        public var logFullClientAddresses: Bool
        /// Whether `POST /report` is accepted: connect times and failures that clients measured for an address the
        /// server answers for a host. Only reports signed for an account or sent from ``reportNetworks`` count, and
        /// they reach the server's scores only as the median of several client networks (see `ReportAggregator`).
        public var acceptClientReports: Bool
        /// Networks whose clients may report without an account signature.
        public var reportNetworks: [IPNetwork]
        /// How far ahead a signed request's expiry may be (vendors sign for minutes, not forever).
        public var signatureWindow: Duration
        /// Whether the endpoints that carry no account (`/dns-query`, `/resolve`, `/d?dn=`) answer (default `auto`:
        /// unless an account is signed-only); without them every answer needs an account (signed, when its account
        /// is signed-only).
        public var publicEndpoints: PublicEndpoints
        /// How much of a client's address names its network for the rate limit and for reports.
        public var clientPrefixes: ClientPrefixes
        /// The most queries of other types being forwarded at once; past it a query gets SERVFAIL at once.
        public var maximumForwardedQueries: Int
        /// The most requests waiting for an upstream at once (cache misses and forwarded queries); past it a
        /// request is answered 503 with `Retry-After` (SERVFAIL over DNS) at once.
        public var maximumUpstreamLookups: Int
        /// The most requests from one client network (its /24 or /48) waiting for an upstream at once.
        public var maximumUpstreamLookupsPerNetwork: Int
        /// How long a request past its network's share waits for one of that network's places before it is refused
        /// (as many as the share may wait; zero: refused at once). See `UpstreamBudget`.
        public var upstreamQueueWait: Duration
        /// Whether reverse lookups (PTR) into private, loopback, link-local and other guarded ranges are forwarded.
        public var forwardsGuardedReverseLookups: Bool
        /// Whether a relayed answer that hands out a guarded address (an A or AAAA record in any section, an SVCB or
        /// HTTPS address hint) is withheld: the client gets NXDOMAIN, as for a name that does not exist, so outsiders
        /// cannot tell internal names from missing ones. On by default; `serve.probeGuardedAddresses` turns it off.
        public var guardsForwardedAddresses: Bool
        /// The environment variables the accounts' secrets were read from (`serve.accounts` entries
        /// `ACCOUNT:SECRET_ENV`), which `hostsctl config show` prints in place of the secrets; empty in code.
        package var secretVariables: [String: String] = [:]
        /// Signed-only accounts whose secret variable was not set when the settings were read: they are not served
        /// (every request for them is refused as badly signed), and `hostsctl serve` refuses to start.
        package var accountsWithoutSecret: [String] = []
        /// Where a client's network for EDNS Client Subnet comes from, if anywhere.
        public var clientSubnetMode: ClientSubnetMode
        /// The most bits of a client's address sent upstream as its subnet (by default /24 and /56); a client that
        /// sends a shorter subnet is never given a longer one.
        public var clientSubnetPrefixes: ClientPrefixes
        /// Proxies (load balancers) whose ``trustedProxyHeader`` names the client: for a request from one of them,
        /// the client is the last address in that header that is not itself one of them, counted from the right
        /// (for rate limits, EDNS Client Subnet, reports and logs). Empty (the default): the headers are ignored.
        public var trustedProxies: [IPNetwork]
        /// The header the trusted proxies write (default `X-Forwarded-For`). Only that one is read: a proxy that
        /// appends to one header passes the other through as the client wrote it, so believing both would let a
        /// client choose its own address.
        public var trustedProxyHeader: ProxyHeader
        /// The ALPN identifiers (`h2`, `h3`, ...) of the HTTPS and SVCB record the service makes for an overridden
        /// name (whose hints are the override's addresses); none by default.
        public var httpsRecordALPN: [String]
        /// The port of that record; 0, the default, for none (the scheme's).
        public var httpsRecordPort: Int
        /// Regions for steering by client reports: a client inside one counts as that region (its reports order
        /// the answers of every client in it); any other client as its own network (``clientSubnetPrefixes``).
        public var steeringRegions: [IPNetwork]

        /// Creates a configuration; every parameter has the default `hostsctl serve` documents for its key.
        public init(
            maximumAnswers: Int = 8, accounts: [String: HTTPDNSSecret?] = [:], rateLimitPerSecond: Double = 2_000,
            rateLimitBurst: Double = 4_000, otherTypes: OtherTypes = .notImplemented,
            logFullClientAddresses: Bool = false,
            acceptClientReports: Bool = false, reportNetworks: [IPNetwork] = [],
            signatureWindow: Duration = .seconds(600), publicEndpoints: PublicEndpoints = .auto,
            clientPrefixes: ClientPrefixes = ClientPrefixes(), maximumForwardedQueries: Int = 256,
            forwardsGuardedReverseLookups: Bool = false, clientSubnetMode: ClientSubnetMode = .on,
            clientSubnetPrefixes: ClientPrefixes = ClientPrefixes(ipv4: 24, ipv6: 56), trustedProxies: [IPNetwork] = [],
            trustedProxyHeader: ProxyHeader = .xForwardedFor, steeringRegions: [IPNetwork] = [],
            maximumUpstreamLookups: Int = 1_024, maximumUpstreamLookupsPerNetwork: Int = 64,
            guardsForwardedAddresses: Bool = true, udpRateLimitPerSecond: Double = 500,
            udpRateLimitBurst: Double = 1_000, upstreamQueueWait: Duration = .milliseconds(300),
            httpsRecordALPN: [String] = [], httpsRecordPort: Int = 0
        ) {
            self.httpsRecordALPN = httpsRecordALPN.filter { !$0.isEmpty && $0.utf8.count <= 255 }
            self.httpsRecordPort = min(max(httpsRecordPort, 0), 65_535)
            self.upstreamQueueWait = max(upstreamQueueWait, .zero)
            self.udpRateLimitPerSecond = max(udpRateLimitPerSecond, 0)
            self.udpRateLimitBurst = max(udpRateLimitBurst, udpRateLimitPerSecond > 0 ? 1 : 0)
            self.guardsForwardedAddresses = guardsForwardedAddresses
            self.maximumUpstreamLookups = max(maximumUpstreamLookups, 1)
            self.maximumUpstreamLookupsPerNetwork = max(maximumUpstreamLookupsPerNetwork, 1)
            self.trustedProxies = trustedProxies
            self.trustedProxyHeader = trustedProxyHeader
            self.steeringRegions = steeringRegions
            self.clientSubnetMode = clientSubnetMode
            self.clientSubnetPrefixes = clientSubnetPrefixes
            self.maximumAnswers = max(maximumAnswers, 1)
            self.accounts = accounts
            self.rateLimitPerSecond = max(rateLimitPerSecond, 0)
            self.rateLimitBurst = max(rateLimitBurst, rateLimitPerSecond > 0 ? 1 : 0)
            self.otherTypes = otherTypes
            self.logFullClientAddresses = logFullClientAddresses
            self.acceptClientReports = acceptClientReports
            self.reportNetworks = reportNetworks
            self.signatureWindow = signatureWindow
            self.publicEndpoints = publicEndpoints
            self.clientPrefixes = clientPrefixes
            self.maximumForwardedQueries = max(maximumForwardedQueries, 1)
            self.forwardsGuardedReverseLookups = forwardsGuardedReverseLookups
        }

        /// Whether the endpoints that carry no account answer now: ``publicEndpoints``, with `auto` decided by the
        /// accounts (signed-only ones, even those whose secret is missing, close them).
        var answersPublicEndpoints: Bool {
            switch publicEndpoints {
            case .on: true
            case .off: false
            case .auto: secretVariables.isEmpty && !accounts.values.contains { $0 != nil }
            }
        }

        /// Whether the server may probe (and rank by probing) private, loopback, link-local and other guarded
        /// addresses that answers name, forward reverse lookups into them and relay answers that hand them out
        /// (`serve.probeGuardedAddresses`): ``forwardsGuardedReverseLookups`` and not ``guardsForwardedAddresses``.
        public var probesGuardedAddresses: Bool {
            get { forwardsGuardedReverseLookups && !guardsForwardedAddresses }
            set {
                forwardsGuardedReverseLookups = newValue
                guardsForwardedAddresses = !newValue
            }
        }

        var limits: RateLimiter.Limits {
            .init(
                perSecond: rateLimitPerSecond, burst: rateLimitBurst, udpPerSecond: udpRateLimitPerSecond,
                udpBurst: udpRateLimitBurst, prefixes: clientPrefixes)
        }
    }
}

extension HTTPDNSService.Configuration {
    /// Reads the service's keys of the `serve` section (what it answers, its accounts, rate limits, upstream bounds,
    /// EDNS Client Subnet, trusted proxies, reports and steering; `clientPrefixV4`/`V6` as the listener reads them)
    /// from `config`, a reader scoped to that section; missing keys take the defaults of
    /// `HTTPDNSService.Configuration()`. The secrets of signed-only accounts (`ACCOUNT:SECRET_ENV`) are read from the
    /// environment, never from the file; an account whose variable is unset is listed in `accountsWithoutSecret` and
    /// not served.
    /// - Throws: `HTTPDNSError.Code.invalidConfiguration` naming the key for a bad value.
    public init(configReader config: ConfigReader) throws(HTTPDNSError) {
        self.init()
        try SettingField.readAll(Self.fields + Self.sharedFields, from: config, scope: "serve", into: &self)
    }

    /// The defaults of the memberwise initializer, which the keys' rows print: each default is written once.
    private static let standard = HTTPDNSService.Configuration()

    /// The keys the listener lists and the service reads as well (how much of an address names a client network).
    private static let sharedFields: [SettingField<Self>] = [
        .int("clientPrefixV4", \.clientPrefixes.ipv4, default: standard.clientPrefixes.ipv4, "", range: 8...32),
        .int("clientPrefixV6", \.clientPrefixes.ipv6, default: standard.clientPrefixes.ipv6, "", range: 16...128),
    ]

    /// The service's keys, relative to the `serve` section.
    package static let fields: [SettingField<Self>] = [
        .int(
            "maxAnswers", \.maximumAnswers, default: standard.maximumAnswers, "most addresses in one answer",
            range: 1...64),
        .seconds(
            "signatureWindowSeconds", \.signatureWindow, default: Int(standard.signatureWindow.components.seconds),
            "a signed request's expiry t may be at most this far ahead, seconds", range: 1...86_400),
        .choice(
            "publicEndpoints", \.publicEndpoints, default: standard.publicEndpoints,
            "whether /dns-query, /resolve and /d?dn= answer: auto (unless an account is signed-only), on, off"),
        .bool(
            "probeGuardedAddresses", \.probesGuardedAddresses, default: standard.probesGuardedAddresses,
            "let the server probe private, loopback, link-local and other guarded addresses that answers name"),
        networks(
            "reportNetworks", \.reportNetworks,
            "networks (CIDR) whose clients may POST /report without an account signature"),
        .int(
            "maxForwardedQueries", \.maximumForwardedQueries, default: standard.maximumForwardedQueries,
            "most queries of other types being forwarded at once; past it SERVFAIL", range: 1...100_000),
        .int(
            "maxUpstreamLookups", \.maximumUpstreamLookups, default: standard.maximumUpstreamLookups,
            "most requests waiting for an upstream at once; past it 503 with Retry-After (SERVFAIL over DNS)",
            range: 1...1_000_000),
        .int(
            "maxUpstreamLookupsPerNetwork", \.maximumUpstreamLookupsPerNetwork,
            default: standard.maximumUpstreamLookupsPerNetwork,
            "most requests of one client network (/24 or /48) waiting for an upstream at once", range: 1...1_000_000),
        .milliseconds(
            "upstreamQueueMs", \.upstreamQueueWait, default: Int(standard.upstreamQueueWait.roundedUpMilliseconds),
            "a request past its network's share waits this long for one of its places (four shares "
                + "may wait; 0: refused at once), milliseconds", range: 0...5_000),
        accountsField,
        perSecond(
            "rateLimitPerSecond", \.rateLimitPerSecond,
            "requests per second per client network (serve.clientPrefixV4/V6) over TCP, DoT, HTTP and cookie-verified UDP; 0 turns the limit off",
            range: 0...10_000_000),
        perSecond(
            "rateLimitBurst", \.rateLimitBurst, "requests a client may make at once before the rate applies",
            range: 1...10_000_000),
        perSecond(
            "udpRateLimitPerSecond", \.udpRateLimitPerSecond,
            "UDP queries per second per client network, apart from its other transports (past it dropped, or TC one in two); 0 turns it off",
            range: 0...10_000_000),
        perSecond(
            "udpRateLimitBurst", \.udpRateLimitBurst,
            "UDP queries a client network may send at once before serve.udpRateLimitPerSecond applies",
            range: 1...10_000_000),
        .choice(
            "otherTypes", \.otherTypes, default: standard.otherTypes,
            "queries for types other than A and AAAA: notimp answers NOTIMP, forward sends them through c-ares"),
        .bool(
            "logFullClientAddresses", \.logFullClientAddresses, default: standard.logFullClientAddresses,
            "access logs show whole client addresses instead of their /24 or /48"),
        .bool(
            "clientReports", \.acceptClientReports, default: standard.acceptClientReports,
            "accept POST /report: clients' connect times and failures for addresses the server answered feed its scores"
        ),
        .choice(
            "ecs.mode", \.clientSubnetMode, default: standard.clientSubnetMode,
            "EDNS Client Subnet: on (the client's ECS option, ip= or edns_client_subnet=, else its address), "
                + "connection (its address only), off"),
        .int(
            "ecs.prefixV4", \.clientSubnetPrefixes.ipv4, default: standard.clientSubnetPrefixes.ipv4,
            "most bits of an IPv4 client's address sent upstream as its subnet", range: 8...32),
        .int(
            "ecs.prefixV6", \.clientSubnetPrefixes.ipv6, default: standard.clientSubnetPrefixes.ipv6,
            "most bits of an IPv6 client's address sent upstream as its subnet", range: 16...128),
        networks(
            "trustedProxies.networks", \.trustedProxies,
            "proxies (CIDR) whose serve.trustedProxies.header names the client (limits, ECS, reports, logs)"),
        .choice(
            "trustedProxies.header", \.trustedProxyHeader, default: standard.trustedProxyHeader,
            "the one header trusted proxies write, read from the right: x-forwarded-for or forwarded (RFC 7239)"),
        networks(
            "steeringRegions", \.steeringRegions,
            "regions (CIDR) whose clients' reports order the answers of every client in them (else by /24 or /56)"),
        .strings(
            "httpsRecords.alpn", \.httpsRecordALPN, default: standard.httpsRecordALPN,
            "ALPN identifiers (h2, h3) of the HTTPS/SVCB record serve makes for an overridden name; [] for none",
            check: { $0.isEmpty || $0.utf8.count > 255 ? "an ALPN identifier is 1 to 255 bytes" : nil }),
        .int(
            "httpsRecords.port", \.httpsRecordPort, default: standard.httpsRecordPort,
            "the port of that record; 0 for none (the scheme's)", range: 0...65_535),
    ]

    /// `serve.accounts`: `ACCOUNT` (answers unsigned requests) or `ACCOUNT:SECRET_ENV` (signed only, its secret in
    /// that environment variable).
    private static let accountsField = SettingField<Self>.compound(
        "accounts", .stringArray, shown: "[]",
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
        read: { reader, key, configuration throws(HTTPDNSError) in
            configuration.accounts = [:]
            configuration.secretVariables = [:]
            configuration.accountsWithoutSecret = []
            var seen = Set<String>()
            for text in try reader.strings(key, default: []) {
                let parts = text.split(separator: ":").map(String.init)
                // Listed twice, an account would be whichever entry came last: signed-only or not is never a guess.
                guard seen.insert(parts[0]).inserted else {
                    throw reader.invalid(key.path, "lists account \(parts[0]) twice")
                }
                guard parts.count > 1 else {
                    configuration.accounts[parts[0]] = .some(nil)
                    continue
                }
                configuration.secretVariables[parts[0]] = parts[1]
                if let secret = HTTPDNSSecret(environmentVariable: parts[1]) {
                    configuration.accounts[parts[0]] = secret
                } else {
                    configuration.accountsWithoutSecret.append(parts[0])
                }
            }
        },
        describe: { configuration in
            let names = Set(configuration.accounts.keys).union(configuration.secretVariables.keys).sorted()
            return SettingsReader.list(names.map { $0 + (configuration.secretVariables[$0].map { ":" + $0 } ?? "") })
        })

    /// A key holding networks (CIDR), e.g. `10.0.0.0/8`.
    private static func networks(
        _ path: String, _ field: any WritableKeyPath<Self, [IPNetwork]> & Sendable, _ help: String
    ) -> SettingField<Self> {
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

    /// An integer key held as a rate (requests per second, a burst of requests), whose default is the memberwise
    /// initializer's.
    private static func perSecond(
        _ path: String, _ field: any WritableKeyPath<Self, Double> & Sendable, _ help: String,
        range: ClosedRange<Int>
    ) -> SettingField<Self> {
        let value = Int(standard[keyPath: field])
        return .custom(
            path, .int, field, shown: "\(value)", help, range: range,
            decode: { reader, key throws(HTTPDNSError) in Double(try reader.int(key, default: value)) },
            describe: { "\(Int($0))" })
    }
}
