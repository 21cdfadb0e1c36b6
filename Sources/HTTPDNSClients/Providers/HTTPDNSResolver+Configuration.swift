public import Configuration
public import HTTPDNSCore

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

        private init(kind: Kind) { self.kind = kind }

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

        /// The API a settings file or a preset names (`doh`, `doh-json`, `alibaba`, `tencent`; the names were
        /// checked against `HTTPDNSPreset.apiNames`); `nil` for `alibaba` without the account it needs.
        package init?(named name: String, method: DoHMethod, account: String?, secret: HTTPDNSSecret?) {
            switch name {
            case "doh": self = .dnsMessage(method: method)
            case "doh-json": self = .dnsJSON
            case "alibaba":
                guard let account else { return nil }
                self = .alibaba(account: account, secret: secret)
            default: self = .tencent(account: account, key: secret)
            }
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

    /// What a resolver talks to and how: one provider (`httpdns.provider.NAME` in a settings file). The time limits
    /// of each exchange and the trust roots are the transport's (``HTTPDNSTransport/Configuration``), which the
    /// providers of one `HostResolver` share.
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
        /// connect timeout per address in a row. A `HostResolver` gives providers without one its
        /// `httpdns.budgetMs`.
        public var budget: Duration?
        /// The environment variable the secret was read from (`secretEnv`), shown by `hostsctl config show` in place
        /// of the secret; `nil` for a secret given in code.
        package var secretVariable: String?

        /// Creates a configuration.
        public init(
            name: String? = nil,
            api: API,
            endpoints: [HTTPDNSEndpoint],
            allowNonPublicAddresses: Bool = false,
            budget: Duration? = nil
        ) {
            self.name = name ?? api.description
            self.api = api
            self.endpoints = endpoints
            self.allowNonPublicAddresses = allowNonPublicAddresses
            self.budget = budget
        }
    }
}

extension HTTPDNSResolver.Configuration {
    /// Reads provider `name` from `config`, a reader scoped to its section (`httpdns.provider.NAME`): `api`,
    /// `urls`, `bootstrap`, `method`, `account`, `secretEnv` (the environment variable holding its secret, never the
    /// secret) and `allowPrivateAnswers`.
    /// - Parameters:
    ///   - config: The provider's section.
    ///   - name: The provider's name, which answers carry as their source.
    ///   - allowsPrivateAnswers: Whether private answers are accepted when the provider does not say (a
    ///     `HostResolver` passes its `guard.allowPrivateAnswers`).
    /// - Throws: `HTTPDNSError.Code.invalidConfiguration` naming the key for a missing API or URL, a bad URL or
    ///   address, or a vendor API without the account it needs.
    public init(configReader config: ConfigReader, name: String, allowsPrivateAnswers: Bool = false)
        throws(HTTPDNSError)
    {
        let reader = SettingsReader(config: config, scope: "httpdns.provider.\(name)")
        let keys = Self.keys
        guard config.string(forKey: "api") != nil else {
            throw reader.invalid("api", "provider \(name) is listed in httpdns.providers but has no api")
        }
        let apiName = try reader.string(keys.api, default: "")
        let urls = try reader.strings(keys.urls, default: [])
        guard !urls.isEmpty else { throw reader.invalid("urls", "provider \(name) needs at least one URL") }
        let bootstrap = try reader.strings(keys.bootstrap, default: []).compactMap(IPAddress.init)
        let method = HTTPDNSResolver.API.DoHMethod(rawValue: try reader.string(keys.method, default: "get")) ?? .get
        let account = config.string(forKey: "account")
        let variable = try reader.string(keys.secretEnv, default: "HOSTSCTL_HTTPDNS_SECRET")
        let secret = HTTPDNSSecret(environmentVariable: variable)
        guard let api = HTTPDNSResolver.API(named: apiName, method: method, account: account, secret: secret) else {
            throw reader.invalid("account", "provider \(name): \(apiName) needs an account")
        }
        var endpoints: [HTTPDNSEndpoint] = []
        for url in urls {
            // Bootstrap addresses are for host names; an endpoint written with an IP literal is dialled as written.
            let literal = (try? HTTPDNSEndpoint(url))?.hostIsIPAddress ?? false
            endpoints.append(try HTTPDNSEndpoint(url, bootstrapAddresses: literal ? [] : bootstrap))
        }
        self.init(
            name: name, api: api, endpoints: endpoints,
            allowNonPublicAddresses: reader.isSet("allowPrivateAnswers")
                ? try reader.bool(keys.allowPrivateAnswers, default: false) : allowsPrivateAnswers)
        secretVariable = variable
    }

    /// A provider's keys, relative to its section (`httpdns.provider.*`).
    package static let keys = (
        api: SettingKey(
            "api", .string, default: "required", "doh, doh-json, alibaba or tencent", allowed: HTTPDNSPreset.apiNames),
        urls: SettingKey(
            "urls", .stringArray, default: "required", "endpoint URLs, tried in order",
            check: { text in
                do { _ = try HTTPDNSEndpoint(text); return nil } catch let error as HTTPDNSError {
                    return error.message
                } catch { return "\(error)" }
            }),
        bootstrap: SettingKey(
            "bootstrap", .stringArray, default: "[]", "fixed IPs for the endpoints' host names",
            check: { text in IPAddress(text) == nil ? "'\(HostName.printable(text))' is not an IP address" : nil }),
        method: SettingKey("method", .string, default: "get", "RFC 8484 method", allowed: ["get", "post"]),
        account: SettingKey("account", .string, default: "none", "vendor account ID"),
        secretEnv: SettingKey(
            "secretEnv", .string, default: "HOSTSCTL_HTTPDNS_SECRET",
            "the environment variable holding the provider's secret (never the secret itself)"),
        allowPrivateAnswers: SettingKey(
            "allowPrivateAnswers", .bool, default: "guard.allowPrivateAnswers",
            "accept private, loopback and link-local answers from this provider")
    )

    /// The keys in the order `hostsctl config keys` lists them.
    package static var keyList: [SettingKey] {
        let keys = Self.keys
        return [
            keys.api, keys.urls, keys.bootstrap, keys.method, keys.account, keys.secretEnv, keys.allowPrivateAnswers,
        ]
    }

    /// This provider's effective values, relative to its section (never its secret, only the variable that
    /// holds it).
    package var rows: [(String, String)] {
        var method = "get"
        var account = "none"
        switch api.kind {
        case .dnsMessage(let chosen): method = chosen.rawValue
        case .dnsJSON: break
        case .alibaba(let name, _, _): account = name
        case .tencent(let name, _): account = name ?? "none"
        }
        var bootstrap: [String] = []
        for endpoint in endpoints {
            for address in endpoint.bootstrapAddresses where !bootstrap.contains(address.description) {
                bootstrap.append(address.description)
            }
        }
        return [
            ("api", api.description),
            ("urls", SettingsReader.list(endpoints.map(\.url))),
            ("bootstrap", SettingsReader.list(bootstrap)),
            ("method", method),
            ("account", account),
            ("secretEnv", secretVariable ?? "none"),
            ("allowPrivateAnswers", "\(allowNonPublicAddresses)"),
        ]
    }

    /// Whether the provider's "no such name" and "no data" answers are believed: DNS servers' are; vendor APIs
    /// answer an empty list when they throttle too.
    package var negativeAnswersAreAuthoritative: Bool {
        switch api.kind {
        case .dnsMessage, .dnsJSON: true
        case .alibaba, .tencent: false
        }
    }
}
