import CoreMetrics
import Foundation
package import HTTPDNS
import Logging
import Synchronization

extension HTTPDNSService {
    /// What the service answers and how; ``apply(_:)`` replaces it while serving.
    package struct Configuration: Sendable, Hashable {
        /// What the service does with DNS queries for types other than A and AAAA.
        package enum OtherTypes: String, Sendable, Hashable, CaseIterable {
            /// Answer NOTIMP.
            case notImplemented = "notimp"
            /// Send them through c-ares to its servers and relay the answer.
            case forward
        }

        /// The one header a trusted proxy names the client in; the other is never believed.
        package enum ProxyHeader: String, Sendable, Hashable, CaseIterable {
            /// `X-Forwarded-For`, which nginx, HAProxy and most cloud balancers append to.
            case xForwardedFor = "x-forwarded-for"
            /// RFC 7239 `Forwarded`, for proxies that append to it instead.
            case forwarded
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

        /// The most addresses in one answer (best first).
        package var maximumAnswers: Int
        /// Vendor accounts served on `/{account}/d` and `/{account}/sign_d`, each with its signing secret (for an
        /// account with a secret only signed requests are answered).
        package var accounts: [String: HTTPDNSSecret?]
        /// Requests per second each client network (``clientPrefixes``) may make over TCP, DNS over TLS, HTTP and
        /// UDP with a valid server cookie (sources that cannot be forged): 2,000 by default, about a sixteenth of two
        /// cores at the workload's cost per query (docs/security.md, "Rates"), so no one network takes more of the
        /// CPU than of any other bound; 0 turns the limit off.
        package var rateLimitPerSecond: Double
        /// How many requests a client may make at once before the rate applies (4,000 by default).
        package var rateLimitBurst: Double
        /// UDP queries per second each client network may make (a bucket apart from its other transports, since
        /// UDP sources can be forged); past it a query is dropped, or answered truncated one time in two so that a
        /// real client asks again over TCP. On by default, so that a plain DNS listener facing the internet is no
        /// open amplifier; 0 turns it off.
        package var udpRateLimitPerSecond: Double
        /// How many UDP queries a client network may send at once before ``udpRateLimitPerSecond`` applies.
        package var udpRateLimitBurst: Double
        /// What happens to DNS queries for other types.
        package var otherTypes: OtherTypes
        /// Whether access logs carry the whole client address rather than its network (/24 or /48).
        package var logFullClientAddresses: Bool
        /// Whether `POST /report` is accepted: connect times and failures that clients measured for an address the
        /// server answers for a host. Only reports signed for an account or sent from ``reportNetworks`` count, and
        /// they reach the server's scores only as the median of several client networks (see ``ReportAggregator``).
        package var acceptClientReports: Bool
        /// Networks whose clients may report without an account signature.
        package var reportNetworks: [IPNetwork]
        /// How far ahead a signed request's expiry may be (vendors sign for minutes, not forever).
        package var signatureWindow: Duration
        /// Whether the endpoints that carry no account (`/dns-query`, `/resolve`, `/d?dn=`) answer; without them
        /// every answer needs an account (signed, when its account is signed-only).
        package var publicEndpoints: Bool
        /// How much of a client's address names its network for the rate limit and for reports.
        package var clientPrefixes: ClientPrefixes
        /// The most queries of other types being forwarded at once; past it a query gets SERVFAIL at once.
        package var maximumForwardedQueries: Int
        /// The most requests waiting for an upstream at once (cache misses and forwarded queries); past it a
        /// request is answered 503 with `Retry-After` (SERVFAIL over DNS) at once.
        package var maximumUpstreamLookups: Int
        /// The most requests from one client network (its /24 or /48) waiting for an upstream at once.
        package var maximumUpstreamLookupsPerNetwork: Int
        /// How long a request past its network's share waits for one of that network's places before it is refused
        /// (as many as the share may wait; zero: refused at once). See `UpstreamBudget`.
        package var upstreamQueueWait: Duration
        /// Whether reverse lookups (PTR) into private, loopback, link-local and other guarded ranges are forwarded.
        package var forwardsGuardedReverseLookups: Bool
        /// Whether a relayed answer that hands out a guarded address (an A or AAAA record in any section, an SVCB or
        /// HTTPS address hint) is withheld: the client gets NXDOMAIN, as for a name that does not exist, so outsiders
        /// cannot tell internal names from missing ones. On by default; `serve.probeGuardedAddresses` turns it off.
        package var guardsForwardedAddresses: Bool
        /// Where a client's network for EDNS Client Subnet comes from, if anywhere.
        package var clientSubnetMode: ClientSubnetMode
        /// The most bits of a client's address sent upstream as its subnet (by default /24 and /56); a client that
        /// sends a shorter subnet is never given a longer one.
        package var clientSubnetPrefixes: ClientPrefixes
        /// Proxies (load balancers) whose ``trustedProxyHeader`` names the client: for a request from one of them,
        /// the client is the last address in that header that is not itself one of them, counted from the right
        /// (for rate limits, EDNS Client Subnet, reports and logs). Empty (the default): the headers are ignored.
        package var trustedProxies: [IPNetwork]
        /// The header the trusted proxies write (default `X-Forwarded-For`). Only that one is read: a proxy that
        /// appends to one header passes the other through as the client wrote it, so believing both would let a
        /// client choose its own address.
        package var trustedProxyHeader: ProxyHeader
        /// Regions for steering by client reports: a client inside one counts as that region (its reports order
        /// the answers of every client in it); any other client as its own network (``clientSubnetPrefixes``).
        package var steeringRegions: [IPNetwork]

        /// Creates a configuration.
        package init(
            maximumAnswers: Int = 8, accounts: [String: HTTPDNSSecret?] = [:], rateLimitPerSecond: Double = 2_000,
            rateLimitBurst: Double = 4_000, otherTypes: OtherTypes = .notImplemented,
            logFullClientAddresses: Bool = false,
            acceptClientReports: Bool = false, reportNetworks: [IPNetwork] = [],
            signatureWindow: Duration = .seconds(600), publicEndpoints: Bool = true,
            clientPrefixes: ClientPrefixes = ClientPrefixes(), maximumForwardedQueries: Int = 256,
            forwardsGuardedReverseLookups: Bool = false, clientSubnetMode: ClientSubnetMode = .on,
            clientSubnetPrefixes: ClientPrefixes = ClientPrefixes(ipv4: 24, ipv6: 56), trustedProxies: [IPNetwork] = [],
            trustedProxyHeader: ProxyHeader = .xForwardedFor, steeringRegions: [IPNetwork] = [],
            maximumUpstreamLookups: Int = 1_024, maximumUpstreamLookupsPerNetwork: Int = 64,
            guardsForwardedAddresses: Bool = true, udpRateLimitPerSecond: Double = 500,
            udpRateLimitBurst: Double = 1_000, upstreamQueueWait: Duration = .milliseconds(300)
        ) {
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

        var limits: RateLimiter.Limits {
            .init(
                perSecond: rateLimitPerSecond, burst: rateLimitBurst, udpPerSecond: udpRateLimitPerSecond,
                udpBurst: udpRateLimitBurst, prefixes: clientPrefixes)
        }
    }
}
