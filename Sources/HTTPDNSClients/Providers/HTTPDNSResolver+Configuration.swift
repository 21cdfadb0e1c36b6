extension HTTPDNSResolver {
    /// The wire protocol of an HTTP DNS service.
    public struct API: Sendable, CustomStringConvertible {
        enum Kind: Sendable {
            case dnsMessage(DoHMethod)
            case dnsJSON
            case alibaba(account: String, secret: HTTPDNSSecret?, signatureLifetime: Duration)
            case tencent(account: String?, key: HTTPDNSSecret?)
        }

        /// How RFC 8484 queries are sent.
        public enum DoHMethod: String, Sendable, CaseIterable {
            /// `GET ?dns=` with the query in unpadded base64url.
            case get
            /// `POST` with the query as an `application/dns-message` body.
            case post
        }

        let kind: Kind

        /// DNS-over-HTTPS, RFC 8484 wire format (`application/dns-message`).
        public static func dnsMessage(method: DoHMethod = .get) -> API { API(kind: .dnsMessage(method)) }

        /// The JSON DNS API (`application/dns-json`, `?name=&type=`) of Google and Cloudflare.
        public static let dnsJSON = API(kind: .dnsJSON)

        /// The Alibaba-style HTTPDNS API: `/{account}/d`, or `/{account}/sign_d` when a secret is given.
        /// - Parameters:
        ///   - account: The account ID (letters, digits, `-`, `_`).
        ///   - secret: The signing secret; requests are signed when present.
        ///   - signatureLifetime: How long a signature stays valid after it is made (default 10 minutes).
        public static func alibaba(
            account: String,
            secret: HTTPDNSSecret? = nil,
            signatureLifetime: Duration = .seconds(600)
        ) -> API {
            API(kind: .alibaba(account: account, secret: secret, signatureLifetime: signatureLifetime))
        }

        /// The Tencent DNSPod-style API: `/d?dn=`. With a key, names and answers are AES-CBC encrypted and
        /// the account ID is sent as `id`.
        /// - Parameters:
        ///   - account: The account ID, required with a key.
        ///   - key: The AES key (16, 24 or 32 bytes of text).
        public static func tencent(account: String? = nil, key: HTTPDNSSecret? = nil) -> API {
            API(kind: .tencent(account: account, key: key))
        }

        /// A short name for the API: `doh`, `doh-json`, `alibaba`, `tencent`; used as the default source name.
        public var description: String {
            switch kind {
            case .dnsMessage: "doh"
            case .dnsJSON: "doh-json"
            case .alibaba: "alibaba"
            case .tencent: "tencent"
            }
        }
    }

    /// What a resolver talks to and how.
    public struct Configuration: Sendable {
        /// The name answers are tagged with (`ResolutionSource`); the API's name when not set.
        public var name: String
        /// The wire protocol.
        public var api: API
        /// The endpoints, tried in order.
        public var endpoints: [HTTPDNSEndpoint]
        /// Accept answers with private, loopback, link-local or unspecified addresses (default `false`).
        public var allowNonPublicAddresses: Bool
        /// The most one lookup may take across every endpoint and bootstrap address (and both families), after
        /// which it fails with `HTTPDNSError.Code.timeout` so the pipeline asks its next source; `nil` (the default)
        /// leaves only the transport's per-exchange timeout. A blackholed endpoint then costs at most this, not a
        /// connect timeout per address in a row.
        public var budget: Duration?
        /// The time one HTTP exchange may take, from sending the request to the last byte of the body (default
        /// 5 s). A server that stalls, even one that drips bytes, fails with `HTTPDNSError.Code.timeout`.
        public var requestTimeout: Duration
        /// The time a TCP connect plus TLS handshake may take (default 2 s).
        public var connectTimeout: Duration
        /// PEM files with extra trusted CA certificates, added to the system roots (for a private CA); certificate
        /// verification itself is never turned off.
        public var additionalTrustRoots: [String]

        /// Creates a configuration.
        public init(
            name: String? = nil,
            api: API,
            endpoints: [HTTPDNSEndpoint],
            allowNonPublicAddresses: Bool = false,
            budget: Duration? = nil,
            requestTimeout: Duration = .seconds(5),
            connectTimeout: Duration = .seconds(2),
            additionalTrustRoots: [String] = []
        ) {
            self.name = name ?? api.description
            self.api = api
            self.endpoints = endpoints
            self.allowNonPublicAddresses = allowNonPublicAddresses
            self.budget = budget
            self.requestTimeout = requestTimeout
            self.connectTimeout = connectTimeout
            self.additionalTrustRoots = additionalTrustRoots
        }
    }
}
