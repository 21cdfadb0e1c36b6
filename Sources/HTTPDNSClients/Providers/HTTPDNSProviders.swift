package import Configuration
package import HTTPDNSCore

/// The HTTP DNS layer of the pipeline, the `httpdns` section of the settings file: the providers in the order they
/// are asked, their endpoints and APIs, and the time limits and trust roots their exchanges share. The pipeline
/// builds one ``HTTPDNSResolver`` per provider (``Provider/resolverConfiguration(allowingPrivateAnswers:)``) over one
/// shared transport.
///
/// Package access: code that builds HTTP DNS resolvers itself uses ``HTTPDNSResolver/Configuration``; this type is
/// the file's description of several, and the settings file reaches every field.
package struct HTTPDNSProviders: Sendable, Hashable {
    /// One HTTP DNS provider (`httpdns.provider.NAME.*`).
    package struct Provider: Sendable, Hashable {
        /// The provider's name; answers carry it as their source.
        package var name: String
        /// `doh`, `doh-json`, `alibaba` or `tencent`.
        package var api: String
        /// Endpoint URLs, tried in order.
        package var urls: [String]
        /// Bootstrap IPs for the endpoints' host names.
        var bootstrap: [IPAddress]
        /// RFC 8484 method for `doh`.
        var method: HTTPDNSResolver.API.DoHMethod
        /// The vendor account ID.
        var account: String?
        /// The environment variable that holds the provider's secret.
        var secretVariable: String
        /// Accept private, loopback and link-local answers; `nil` takes the pipeline's `guard.allowPrivateAnswers`.
        var allowPrivateAnswers: Bool?

        /// A provider configured in code, with the defaults of its settings keys for what is not given.
        init(
            name: String, api: String, urls: [String], bootstrap: [IPAddress] = [],
            method: HTTPDNSResolver.API.DoHMethod = .get, account: String? = nil,
            secretVariable: String = "HOSTSCTL_HTTPDNS_SECRET", allowPrivateAnswers: Bool? = nil
        ) {
            self.name = name
            self.api = api
            self.urls = urls
            self.bootstrap = bootstrap
            self.method = method
            self.account = account
            self.secretVariable = secretVariable
            self.allowPrivateAnswers = allowPrivateAnswers
        }
    }

    /// The HTTP DNS providers, in order.
    package var providers: [Provider]
    /// The time one HTTP DNS exchange may take, in milliseconds.
    package var timeoutMilliseconds: Int
    /// The time a TCP connect plus TLS handshake to an endpoint may take, in milliseconds.
    package var connectTimeoutMilliseconds: Int
    /// The time one HTTP DNS lookup may take across a provider's endpoints and bootstrap addresses, in milliseconds.
    package var budgetMilliseconds: Int
    /// Extra trusted CA files for HTTP DNS endpoints only (`interception.trustCA` is for application
    /// traffic).
    package var trustCA: [String]

    /// The shared transport's configuration: the exchange and connect time limits and the trust roots.
    package var transport: HTTPDNSTransport.Configuration {
        HTTPDNSTransport.Configuration(
            requestTimeout: .milliseconds(timeoutMilliseconds),
            connectTimeout: .milliseconds(connectTimeoutMilliseconds),
            additionalTrustRoots: trustCA)
    }

    /// The defaults: no provider, 2 s per connect, 5 s per exchange and per lookup, the system's trust roots.
    static var `default`: HTTPDNSProviders {
        // Reading from an empty provider gives every default; it cannot fail.
        try! HTTPDNSProviders(configReader: defaultsReader)
    }

    /// Reads the `httpdns` section from `config`, a reader scoped to it; missing keys take their defaults.
    /// - Throws: `HTTPDNSError.Code.invalidConfiguration` naming the key for a bad value, a listed provider without
    ///   an API or URLs.
    package init(configReader config: ConfigReader) throws(HTTPDNSError) {
        // Placeholders only: every field below overwrites its property.
        providers = []
        timeoutMilliseconds = 0
        connectTimeoutMilliseconds = 0
        budgetMilliseconds = 0
        trustCA = []
        try SettingField.readAll(Self.fields, from: config, scope: Self.scope, into: &self)
    }

    /// The section of the settings file these keys live in.
    package static let scope = "httpdns"

    /// The `httpdns` keys, bound to the properties they set: `init(configReader:)` reads through them and
    /// `hostsctl config keys` and `config show` list them.
    package static let fields: [SettingField<HTTPDNSProviders>] = [
        .custom(
            "providers", .stringArray, \.providers, shown: "[]",
            "HTTP DNS providers in the order they are tried",
            check: { text in
                text.isEmpty
                    || !text.utf8.allSatisfy {
                        $0.isASCIIAlphanumeric || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_")
                    }
                    ? "provider names are letters, digits, - and _" : nil
            },
            decode: { reader, key throws(HTTPDNSError) in
                try reader.strings(key, default: []).map { name throws(HTTPDNSError) in
                    try Provider(name: name, reader: reader)
                }
            },
            describe: { SettingsReader.list($0.map(\.name)) }
        ).showing { settings in settings.providers.flatMap(\.rows) },
        .int(
            "timeoutMs", \.timeoutMilliseconds, default: 5000,
            "the time one HTTP exchange may take, milliseconds",
            range: 1...600_000),
        .int(
            "connectTimeoutMs", \.connectTimeoutMilliseconds, default: 2000,
            "the time a TCP connect plus TLS handshake to an endpoint may take, milliseconds", range: 1...120_000),
        .int(
            "budgetMs", \.budgetMilliseconds, default: 5000,
            "the time one lookup may take across a provider's endpoints and bootstrap addresses, milliseconds",
            range: 1...600_000),
        .strings("trustCA", \.trustCA, "extra trusted CA PEM files (certificates are always verified)"),
        .documented(Provider.keys.api),
        .documented(Provider.keys.urls),
        .documented(Provider.keys.bootstrap),
        .documented(Provider.keys.method),
        .documented(Provider.keys.account),
        .documented(Provider.keys.secretEnv),
        .documented(Provider.keys.allowPrivateAnswers),
    ]
}

extension HTTPDNSProviders.Provider {
    /// The `httpdns.provider.*.…` keys.
    static let keys = (
        api: SettingKey(
            "provider.*.api", .string, default: "required", "doh, doh-json, alibaba or tencent",
            allowed: HTTPDNSPreset.apiNames),
        urls: SettingKey(
            "provider.*.urls", .stringArray, default: "required", "endpoint URLs, tried in order",
            check: { text in
                do { _ = try HTTPDNSEndpoint(text); return nil } catch let error as HTTPDNSError {
                    return error.message
                } catch { return "\(error)" }
            }),
        bootstrap: SettingKey(
            "provider.*.bootstrap", .stringArray, default: "[]", "fixed IPs for the endpoints' host names",
            check: { text in IPAddress(text) == nil ? "'\(HostName.printable(text))' is not an IP address" : nil }),
        method: SettingKey(
            "provider.*.method", .string, default: "get", "RFC 8484 method", allowed: ["get", "post"]),
        account: SettingKey("provider.*.account", .string, default: "none", "vendor account ID"),
        secretEnv: SettingKey(
            "provider.*.secretEnv", .string, default: "HOSTSCTL_HTTPDNS_SECRET",
            "the environment variable holding the provider's secret (never the secret itself)"),
        allowPrivateAnswers: SettingKey(
            "provider.*.allowPrivateAnswers", .bool, default: "guard.allowPrivateAnswers",
            "accept private, loopback and link-local answers from this provider")
    )

    /// Reads provider `name`'s keys from `reader`, scoped to the `httpdns` section.
    init(name: String, reader: SettingsReader) throws(HTTPDNSError) {
        let prefix = "provider.\(name)."
        let keys = Self.keys
        guard reader.config.string(forKey: ConfigKey(prefix + "api")) != nil else {
            throw reader.invalid(prefix + "api", "provider \(name) is listed in httpdns.providers but has no api")
        }
        let api = try reader.string(keys.api, at: prefix + "api", default: "")
        let urls = try reader.strings(keys.urls, at: prefix + "urls", default: [])
        guard !urls.isEmpty else { throw reader.invalid(prefix + "urls", "provider \(name) needs at least one URL") }
        let methodText = try reader.string(keys.method, at: prefix + "method", default: "get")
        self.init(
            name: name,
            api: api,
            urls: urls,
            bootstrap: try reader.strings(keys.bootstrap, at: prefix + "bootstrap", default: []).compactMap(
                IPAddress.init),
            method: HTTPDNSResolver.API.DoHMethod(rawValue: methodText) ?? .get,
            account: reader.config.string(forKey: ConfigKey(prefix + "account")),
            secretVariable: try reader.string(
                keys.secretEnv, at: prefix + "secretEnv", default: "HOSTSCTL_HTTPDNS_SECRET"),
            allowPrivateAnswers: reader.isSet(prefix + "allowPrivateAnswers")
                ? try reader.bool(keys.allowPrivateAnswers, at: prefix + "allowPrivateAnswers", default: false) : nil
        )
    }

    /// This provider's effective values, relative to the `httpdns` section (never its secret, only the variable
    /// that holds it).
    var rows: [(String, String)] {
        let prefix = "provider.\(name)."
        return [
            (prefix + "api", api),
            (prefix + "urls", SettingsReader.list(urls)),
            (prefix + "bootstrap", SettingsReader.list(bootstrap.map(\.description))),
            (prefix + "method", method.rawValue),
            (prefix + "account", account ?? "none"),
            (prefix + "secretEnv", secretVariable),
            (prefix + "allowPrivateAnswers", allowPrivateAnswers.map { "\($0)" } ?? "guard.allowPrivateAnswers"),
        ]
    }

    /// The resolver configuration this provider describes, with its secret read from ``secretVariable``;
    /// `guardDefault` is whether private answers are accepted when the provider does not say.
    /// - Throws: `HTTPDNSError.Code.invalidConfiguration` for a bad URL or a vendor API without an account.
    package func resolverConfiguration(allowingPrivateAnswers guardDefault: Bool) throws(HTTPDNSError)
        -> HTTPDNSResolver.Configuration
    {
        let secret = HTTPDNSSecret(environmentVariable: secretVariable)
        let api: HTTPDNSResolver.API
        switch self.api {
        case "doh": api = .dnsMessage(method: method)
        case "doh-json": api = .dnsJSON
        case "alibaba":
            guard let account else {
                throw HTTPDNSError(code: .invalidConfiguration, message: "provider \(name): alibaba needs an account")
            }
            api = .alibaba(account: account, secret: secret)
        default: api = .tencent(account: account, key: secret)
        }
        var endpoints: [HTTPDNSEndpoint] = []
        for url in urls {
            let literal = (try? HTTPDNSEndpoint(url))?.hostIsIPAddress ?? false
            endpoints.append(try HTTPDNSEndpoint(url, bootstrapAddresses: literal ? [] : bootstrap))
        }
        return HTTPDNSResolver.Configuration(
            name: name, api: api, endpoints: endpoints, allowNonPublicAddresses: allowPrivateAnswers ?? guardDefault)
    }
}
