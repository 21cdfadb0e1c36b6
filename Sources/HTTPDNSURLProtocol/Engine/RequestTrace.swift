public import HTTPDNS
import HTTPDNSCore

/// What happened to one intercepted request: its hops (the first request and each redirect), the address each
/// hop reached, the attempts that failed over, the status and the timings.
public struct RequestTrace: Sendable {
    /// One connection attempt that failed before the hop got an answer.
    public struct FailedAttempt: Sendable {
        /// The address tried; `nil` when the host was not rewritten.
        public var address: IPAddress?
        /// Why it failed.
        public var error: HTTPDNSError
        /// How long the attempt took.
        public var elapsed: Duration
    }

    /// One request on the wire: the original one or a redirect hop.
    public struct Hop: Sendable {
        /// The hop's URL with the real host.
        public var url: String
        /// The method sent.
        public var method: String
        /// The `Host` header sent.
        public var hostHeader: String
        /// The address that answered, or `nil` when the host was not rewritten (outside the scope, or a literal).
        public var address: IPAddress?
        /// Where the address came from (`override`, `cache`, `stale`, `upstream`, `local`); `nil` when not rewritten.
        public var freshness: RankedResolution.Freshness?
        /// The status of the answer; `nil` when the hop failed.
        public var status: Int?
        /// Attempts on other addresses that failed first.
        public var failedAttempts: [FailedAttempt]
        /// The time to resolve the host.
        public var resolveTime: Duration
        /// The time from the first attempt to the whole answer.
        public var elapsed: Duration
        /// Whether a connection race chose the address (the best one had not proven itself).
        public var raced: Bool = false
        /// For an address synthesized under the network's NAT64 prefix (a host without an IPv4 route), the IPv4
        /// address of the answer it reaches.
        public var synthesizedFrom: IPAddress? = nil
    }

    /// A reserved header whose value the URL protocol copies into ``tag`` and never sends: the way to match traces
    /// to requests when many run at once. Set it only on requests the protocol takes
    /// (``HTTPDNSInterceptor/intercepts(_:)``): URLSession's own HTTP support would send it as it is.
    public static let tagHeader = "X-HTTPDNS-Trace-Tag"

    /// The URL the application asked for.
    public var url: String
    /// The hops, in order.
    public var hops: [Hop]
    /// The final status; `nil` when the request failed.
    public var status: Int?
    /// The size of the final response body.
    public var bytes: Int
    /// From the start of the load to the whole answer.
    public var elapsed: Duration
    /// The error the request ended with, if any.
    public var error: HTTPDNSError?
    /// The value of the request's ``tagHeader``, so a caller making many
    /// requests at once can match each trace to its request; the header itself never goes on the wire.
    public var tag: String? = nil

    /// The address that gave the final answer.
    public var address: IPAddress? { hops.last?.address }
}
