public import ArgumentParser
import Foundation
import HTTPDNS

/// The options that select an HTTP DNS service instead of c-ares, shared by the commands that resolve.
///
/// Secrets are never taken on the command line (every user of the machine can read arguments): the Alibaba
/// signing secret or the Tencent AES key comes from ``secretVariable``.
struct HTTPDNSOptions: ParsableArguments {
    /// The environment variable holding the HTTPDNS secret.
    static let secretVariable = "HOSTSCTL_HTTPDNS_SECRET"

    /// The vendor APIs `--httpdns` accepts.
    enum Vendor: String, ExpressibleByArgument, CaseIterable, Sendable {
        /// Alibaba-style `/{account}/d` and `/sign_d`.
        case alibaba
        /// Tencent DNSPod-style `/d?dn=`.
        case tencent
    }

    /// A DoH URL (RFC 8484, or the JSON API with `--doh-json`).
    @Option(help: ArgumentHelp("Resolve through this DNS-over-HTTPS URL instead of c-ares.", valueName: "URL"))
    var doh: String?

    /// GET or POST for RFC 8484.
    @Option(name: .customLong("doh-method"), help: "RFC 8484 method: get or post.")
    var dohMethod: HTTPDNSResolver.API.DoHMethod = .get

    /// Use the JSON API.
    @Flag(name: .customLong("doh-json"), help: "Use the JSON API (application/dns-json) at the --doh URL.")
    var dohJSON = false

    /// A vendor HTTPDNS API.
    @Option(help: "Resolve through a vendor HTTPDNS API: alibaba or tencent (with --endpoint).")
    var httpdns: Vendor?

    /// The vendor endpoints.
    @Option(
        name: .customLong("endpoint"),
        help: ArgumentHelp("HTTPDNS endpoint base URL; repeatable, tried in order.", valueName: "URL"))
    var endpoints: [String] = []

    /// The vendor account ID.
    @Option(
        help: ArgumentHelp(
            "HTTPDNS account ID. The secret comes only from $\(HTTPDNSOptions.secretVariable).", valueName: "ID"))
    var account: String?

    /// A preset from the presets file.
    @Option(
        help: ArgumentHelp("Use a named service from the presets file (see Config/providers.json).", valueName: "NAME"))
    var provider: String?

    /// The presets file; by default `$HOSTSCTL_PRESETS`, else the one installed with `hostsctl`.
    @Option(
        help: ArgumentHelp(
            "Presets file for --provider. Default: $HOSTSCTL_PRESETS, else the providers.json installed with hostsctl "
                + "(never one from the current directory).", valueName: "FILE"))
    var presets: String?

    /// The environment variable naming the presets file.
    static let presetsVariable = "HOSTSCTL_PRESETS"

    /// The presets file to read: `--presets`, else `$HOSTSCTL_PRESETS`, else ``installedPresets(executable:)``.
    /// A file in the current directory is never picked up by default: it could be anyone's.
    func presetsPath(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> String {
        if let presets { return presets }
        if let path = environment[Self.presetsVariable], !path.isEmpty { return path }
        guard let installed = Self.installedPresets() else {
            throw ValidationError(
                "No presets file is installed with hostsctl; give one with --presets or $HOSTSCTL_PRESETS.")
        }
        return installed
    }

    /// The presets installed with the executable: `../share/swift-httpdns/providers.json` next to its directory, or,
    /// for a build inside the source tree (`.build/…/hostsctl`), the tree's `Config/providers.json`.
    static func installedPresets(executable: String? = nil) -> String? {
        let path =
            executable ?? (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments[0]
        var directory = URL(fileURLWithPath: path).standardizedFileURL.deletingLastPathComponent()
        let shared = directory.deletingLastPathComponent().appendingPathComponent("share/swift-httpdns/providers.json")
            .path
        if FileManager.default.isReadableFile(atPath: shared) { return shared }
        for _ in 0..<5 {
            if directory.lastPathComponent.hasPrefix(".build") {
                let tree = directory.deletingLastPathComponent().appendingPathComponent("Config/providers.json").path
                return FileManager.default.isReadableFile(atPath: tree) ? tree : nil
            }
            directory = directory.deletingLastPathComponent()
        }
        return nil
    }

    /// Bootstrap addresses for the endpoint host names.
    @Option(
        name: .customLong("bootstrap"),
        help: ArgumentHelp(
            "Connect to this IP for the endpoint's host name (TLS still checks the name); repeatable.", valueName: "IP"),
        transform: { text in
            guard let ip = IPAddress(text) else {
                throw ValidationError("--bootstrap: '\(text)' is not an IP address.")
            }
            return ip
        }
    )
    var bootstrap: [IPAddress] = []

    /// Extra trust roots.
    @Option(
        name: .customLong("trust-ca"),
        help: ArgumentHelp(
            "Also trust the CA certificates in this PEM file (for private CAs); repeatable. Certificates are always verified.",
            valueName: "FILE")
    )
    var trustCA: [String] = []

    /// Accept private addresses in answers.
    @Flag(
        name: .customLong("allow-private-answers"),
        help: "Accept HTTP DNS answers with private, loopback or link-local addresses.")
    var allowPrivateAnswers = false

    /// Creates the options (used by the argument parser).
    init() {}

    /// Whether any HTTP DNS service was selected.
    var isSelected: Bool { doh != nil || httpdns != nil || provider != nil }

    /// Checks combinations.
    func validate() throws {
        let selections = [doh != nil, httpdns != nil, provider != nil].filter { $0 }.count
        guard selections <= 1 else { throw ValidationError("Choose one of --doh, --httpdns and --provider.") }
        if doh == nil, provider == nil, dohJSON || dohMethod != .get {
            throw ValidationError("--doh-json and --doh-method need --doh.")
        }
        if httpdns != nil, endpoints.isEmpty { throw ValidationError("--httpdns needs at least one --endpoint URL.") }
        if httpdns == nil, provider == nil, !endpoints.isEmpty { throw ValidationError("--endpoint needs --httpdns.") }
        if httpdns == .alibaba, account == nil { throw ValidationError("--httpdns alibaba needs --account.") }
        if !isSelected, !bootstrap.isEmpty || !trustCA.isEmpty || allowPrivateAnswers {
            throw ValidationError(
                "--bootstrap, --trust-ca and --allow-private-answers need --doh, --httpdns or --provider.")
        }
    }

    /// Builds the resolver the options describe, with a transport the caller shuts down.
    /// - Parameters:
    ///   - timeout: The time one HTTP exchange may take.
    ///   - budget: The time one lookup may take across the endpoints and bootstrap addresses.
    /// - Throws: `ValidationError` with the reason for a bad URL, account, presets file or trust root.
    func makeResolver(timeout: Duration, budget: Duration? = nil) throws -> (HTTPDNSResolver, HTTPDNSTransport) {
        let secret = HTTPDNSSecret(environmentVariable: Self.secretVariable)
        do {
            let api: HTTPDNSResolver.API
            var endpoints: [HTTPDNSEndpoint]
            var name: String?
            if let doh {
                api = dohJSON ? .dnsJSON : .dnsMessage(method: dohMethod)
                endpoints = [try HTTPDNSEndpoint(doh, bootstrapAddresses: bootstrap)]
            } else if let provider {
                let presets = try presetsPath()
                let all = try HTTPDNSPreset.load(contentsOf: presets)
                guard let preset = all.first(where: { $0.name == provider }) else {
                    throw ValidationError(
                        "No preset '\(provider)' in \(presets); known: \(all.map(\.name).joined(separator: ", ")).")
                }
                name = preset.name
                endpoints = [preset.endpoint]
                guard
                    let named = HTTPDNSResolver.API(
                        named: preset.api, method: dohMethod, account: account, secret: secret)
                else { throw ValidationError("Preset '\(provider)' needs --account.") }
                api = named
            } else {
                let vendor = httpdns ?? .tencent
                endpoints = try self.endpoints.map { try HTTPDNSEndpoint($0, bootstrapAddresses: bootstrap) }
                api =
                    vendor == .alibaba
                    ? .alibaba(account: account ?? "", secret: secret) : .tencent(account: account, key: secret)
            }
            let transport = try HTTPDNSTransport(
                configuration: .init(requestTimeout: timeout, additionalTrustRoots: trustCA))
            do {
                let resolver = try HTTPDNSResolver(
                    configuration: .init(
                        name: name, api: api, endpoints: endpoints, allowNonPublicAddresses: allowPrivateAnswers,
                        budget: budget),
                    transport: transport
                )
                return (resolver, transport)
            } catch {
                Task { await transport.shutdown() }
                throw error
            }
        } catch let error as HTTPDNSError {
            throw ValidationError(error.message)
        }
    }
}

extension HTTPDNSResolver.API.DoHMethod: ExpressibleByArgument {}
