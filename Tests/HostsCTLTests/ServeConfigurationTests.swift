import Configuration
import Foundation
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCore
@testable import HTTPDNSServer
@testable import HTTPDNSSettings
@testable import HostsCTLCommands

/// The `serve` section: `hostsctl serve` owns its keys; the shared settings file keeps the section for it, and
/// checks it with positions when the command's section is named.
@Suite("serve configuration")
struct ServeConfigurationTests {
    static func load(_ path: String, environment: [String: String] = [:]) -> SettingsFile {
        SettingsFile.load(path: path, environment: environment, sections: [ServeSettings.section.erased])
    }

    static func serve(_ path: String) throws -> ServeSettings {
        try load(path).get().read(ServeSettings.section)
    }

    @Test(
        "the Kubernetes example's settings are valid: a server on every interface with limits, forwarding and an account"
    )
    func deploymentFile() throws {
        let file = SettingsFile.load(
            path: "Config/deploy/kubernetes/hostsctl.json", environment: [:],
            sections: [ServeSettings.section.erased])
        #expect(file.diagnostics.isEmpty, "\(file.diagnostics)")
        let settings = try file.get()
        let serve = try settings.read(ServeSettings.section)
        #expect(serve.server.listen.description == "0.0.0.0:8053" && serve.service.otherTypes == .forward)
        #expect(serve.service.rateLimitPerSecond > 0 && serve.service.accounts.keys.sorted() == ["demo"])
        #expect(settings.resolver.files.overridesFile == "Config/deploy/kubernetes/hosts")
    }

    @Test("the Kubernetes TLS overlay's environment turns on HTTPS and DNS over TLS with the base's settings")
    func deploymentTLSOverlay() throws {
        let yaml = try String(contentsOfFile: "Config/deploy/kubernetes/tls/tls-deployment.yaml", encoding: .utf8)
        // `- { name: HOSTSCTL_…, value: … }` lines, as the kubelet would set them.
        var environment: [String: String] = [:]
        for line in yaml.split(separator: "\n") where line.contains("name: HOSTSCTL_SERVE_") {
            let fields = line.split(separator: ",").map { $0.split(separator: ":", maxSplits: 1) }
            let name = fields[0][1].trimmingCharacters(in: .whitespaces.union(["{", "-"]))
            let value = fields[1][1].trimmingCharacters(in: .whitespaces.union(["}", "\""]))
            environment[name] = value
        }
        #expect(environment.count == 3, "\(environment)")
        let file = SettingsFile.load(
            path: "Config/deploy/kubernetes/hostsctl.json", environment: environment,
            sections: [ServeSettings.section.erased])
        #expect(file.diagnostics.isEmpty, "\(file.diagnostics)")
        let serve = try file.get().read(ServeSettings.section)
        #expect(serve.server.certificatePath == "/etc/hostsctl-tls/tls.crt")
        #expect(serve.server.privateKeyPath == "/etc/hostsctl-tls/tls.key")
        #expect(serve.server.dotListen?.description == "0.0.0.0:8853")
        #expect(serve.server.dnsListen?.description == "0.0.0.0:5353")
    }

    @Test("serve.dns.listen and serve.dot.listen: unset by default, IP:PORT, DNS over TLS only with a certificate")
    func dnsListeners() throws {
        let defaults = try Self.serve(try TemporaryFiles.file("{}"))
        #expect(defaults.server.dnsListen == nil && defaults.server.dotListen == nil)
        let both = try TemporaryFiles.file(
            #"{"serve": {"dns": {"listen": "127.0.0.1:5300"}, "dot": {"listen": "[::1]:8853"}, "#
                + #""certificate": "c.pem", "privateKey": "k.pem"}}"#)
        let settings = try Self.serve(both)
        #expect(settings.server.dnsListen?.description == "127.0.0.1:5300")
        #expect(settings.server.dotListen?.port == 8853)
        let noCertificate = try TemporaryFiles.file(#"{"serve": {"dot": {"listen": "127.0.0.1:8853"}}}"#)
        #expect(
            Self.load(noCertificate).errors.first?.message.contains(
                "DNS over TLS needs serve.certificate") == true)
        let bad = try TemporaryFiles.file(#"{"serve": {"dns": {"listen": "localhost:53"}}}"#)
        #expect(
            Self.load(bad).errors.first?.message.contains("a listen address is an IP address, not a host name") == true)
    }

    @Test("a mistake in the serve section is reported at its line and column, by the loader and by the server's read")
    func positionedMistakes() throws {
        let path = try TemporaryFiles.file("{\n  \"serve\": { \"maxAnswers\": 99,\n    \"listn\": \"127.0.0.1:1\" }\n}")
        let checked = Self.load(path)
        #expect(checked.settings == nil)
        let messages = checked.errors.map { "\($0.line):\($0.column) \($0.message)" }
        #expect(messages.contains { $0.hasPrefix("2:28 ") && $0.contains("99 is outside 1...64") }, "\(messages)")
        #expect(messages.contains { $0.hasPrefix("3:5 ") && $0.contains("unknown key 'serve.listn'") }, "\(messages)")
        // Loaded without the server's section (as a resolver-only adopter does), the file is fine for the
        // resolver, and the server's read finds the same mistakes.
        let unchecked = try SettingsFile.load(path: path, environment: [:]).get()
        do {
            _ = try unchecked.read(ServeSettings.section)
            Issue.record("read a serve section with mistakes")
        } catch {
            #expect(error.diagnostics.map(\.line).sorted() == [2, 3], "\(error.diagnostics)")
        }
    }

    @Test("HOSTSCTL_SERVE_ variables override the file; unknown ones are a warning when the section is checked")
    func environment() throws {
        let path = try TemporaryFiles.file(#"{"serve": {"maxAnswers": 4}}"#)
        let environment = ["HOSTSCTL_SERVE_MAX_ANSWERS": "6", "HOSTSCTL_SERVE_NOT_A_KEY": "1"]
        let file = Self.load(path, environment: environment)
        #expect(try file.get().read(ServeSettings.section).service.maximumAnswers == 6)
        #expect(file.environmentOverrides["serve.maxAnswers"] == "6")
        #expect(file.diagnostics.map(\.severity) == [.warning], "\(file.diagnostics)")
        #expect(file.diagnostics.first?.message.contains("HOSTSCTL_SERVE_NOT_A_KEY") == true)
        // The resolver alone does not know the server's variables and leaves them to it.
        #expect(SettingsFile.load(path: path, environment: environment).diagnostics.isEmpty)
        let bad = Self.load(path, environment: ["HOSTSCTL_SERVE_MAX_ANSWERS": "0", "HOSTSCTL_SERVE_NOT_A_KEY": "1"])
        #expect(bad.settings == nil && bad.errors.first?.message.contains("HOSTSCTL_SERVE_MAX_ANSWERS") == true)
        // Each problem once: the unknown variable's warning and the bad value's error.
        #expect(bad.diagnostics.map(\.severity.rawValue).sorted() == ["error", "warning"], "\(bad.diagnostics)")
    }

    @Test("the keys read straight into the listener's and the service's configurations")
    func componentsFromKeys() throws {
        let path = try TemporaryFiles.file(
            #"{"serve": {"listen": "[::1]:9053", "idleTimeoutMs": 1500, "clientPrefixV4": 24, "rateLimitPerSecond": 50,"#
                + #" "signatureWindowSeconds": 60, "accounts": ["a", "b:B_SECRET"],"#
                + #" "trustedProxies": { "networks": ["10.0.0.0/8"], "header": "forwarded" },"#
                + #" "publicEndpoints": "auto", "probeGuardedAddresses": true}}"#)
        let serve = try Self.serve(path)
        #expect(serve.server.host == "::1" && serve.server.port == 9053)
        #expect(serve.server.idleTimeout == .milliseconds(1_500))
        // One key counts clients by network for the listener's connection limit and the service's rate limit.
        #expect(serve.server.clientPrefixes.ipv4 == 24 && serve.service.clientPrefixes.ipv4 == 24)
        #expect(serve.service.rateLimitPerSecond == 50 && serve.service.signatureWindow == .seconds(60))
        #expect(serve.service.trustedProxies.map(\.description) == ["10.0.0.0/8"])
        #expect(serve.service.trustedProxyHeader == .forwarded)
        // The secret of a signed-only account comes from its variable, unset here: that account is not served.
        #expect(serve.service.accounts.keys.sorted() == ["a"] && serve.service.secretVariables == ["b": "B_SECRET"])
        #expect(serve.service.accountsWithoutSecret == ["b"])
        #expect(serve.service.probesGuardedAddresses && serve.service.forwardsGuardedReverseLookups)
        // auto: a signed-only account, even one whose secret is missing, closes the public endpoints.
        #expect(serve.service.publicEndpoints == .auto && !serve.service.answersPublicEndpoints)
        // Every effective value prints as it was written.
        let shown = Dictionary(
            uniqueKeysWithValues: ServeSettings.section.values(serve).map { ($0.path, $0.text) })
        #expect(shown["serve.listen"] == "[::1]:9053" && shown["serve.idleTimeoutMs"] == "1500")
        #expect(shown["serve.rateLimitPerSecond"] == "50" && shown["serve.trustedProxies.networks"] == "[10.0.0.0/8]")
        #expect(shown["serve.accounts"] == "[a, b:B_SECRET]")
    }

    @Test("an account listed twice is refused: whether it is signed-only is never the last entry's guess")
    func accountTwice() throws {
        let path = try TemporaryFiles.file(#"{"serve": {"accounts": ["acme", "acme:ACME_SECRET"]}}"#)
        #expect(throws: HTTPDNSError.self) { try Self.serve(path) }
        // The service's own reader refuses a client prefix out of range as the listener's does.
        let prefix = ConfigReader(provider: InMemoryProvider(values: ["clientPrefixV4": -1]))
        #expect(throws: HTTPDNSError.self) { try HTTPDNSService.Configuration(configReader: prefix) }
    }

    @Test("serve.publicEndpoints: auto answers unless an account is signed-only; on and off decide alone")
    func publicEndpoints() {
        let signedOnly: [String: HTTPDNSSecret?] = ["acct": HTTPDNSSecret("s3cret")]
        let unsigned: [String: HTTPDNSSecret?] = ["acct": HTTPDNSSecret?.none]
        var service = ServeSettings.default.service
        #expect(service.publicEndpoints == .auto)
        func answers(_ accounts: [String: HTTPDNSSecret?]) -> Bool {
            var configuration = service
            configuration.accounts = accounts
            return configuration.answersPublicEndpoints
        }
        #expect(!answers(signedOnly) && answers(unsigned) && answers([:]))
        service.publicEndpoints = .on
        #expect(answers(signedOnly))
        service.publicEndpoints = .off
        #expect(!answers(unsigned))
    }

    @Test("the listener's and the service's Configuration() hold the defaults their serve keys document")
    func defaultsWrittenOnce() throws {
        let empty = ServeSettings.default
        let coded = ServeSettings(server: HTTPDNSServer.Configuration(), service: HTTPDNSService.Configuration())
        var rows = Dictionary(uniqueKeysWithValues: ServeSettings.section.values(coded).map { ($0.path, $0.text) })
        // The one difference, on purpose: a server embedded in code opens no admin listener unless given one.
        #expect(rows["serve.admin.listen"] == "none")
        rows["serve.admin.listen"] = "127.0.0.1:8054"
        #expect(
            ServeSettings.section.values(empty).map(\.text)
                == ServeSettings.section.values(coded).map {
                    rows[$0.path] ?? "?"
                })
        #expect(empty.service == coded.service)
    }
}
