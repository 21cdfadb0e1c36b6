import Configuration
import Foundation
import HTTPDNS
@testable import HTTPDNSCore
import HTTPDNSSettings
import TestSupport
import Testing

@testable import HTTPDNSURLProtocol

/// The `interception` section: the fronts own its keys and read them from the shared settings file, with the same
/// positioned checks as the resolver's keys, whether or not the loader was told about the section.
@Suite("interception settings")
struct InterceptionSettingsTests {
    static func settings(_ json: String, environment: [String: String] = [:]) throws -> Settings {
        try SettingsFile.load(path: try TemporaryFiles.file(json), environment: environment).get()
    }

    @Test("HTTPDNSInterceptor.Configuration() holds the defaults its interception keys document")
    func defaultsWrittenOnce() throws {
        let empty = ConfigReader(provider: InMemoryProvider(values: [:]))
        let fields = HTTPDNSInterceptor.Configuration.fields
        #expect(
            SettingField.values(fields, of: HTTPDNSInterceptor.Configuration())
                == SettingField.values(fields, of: try HTTPDNSInterceptor.Configuration(configReader: empty)))
    }

    @Test("the interceptor's trust roots are interception.trustCA, never httpdns.trustCA")
    func trustRootsAreSeparate() throws {
        // The files must exist: a settings file naming one that does not is refused.
        let doh = try TemporaryFiles.file("-----BEGIN CERTIFICATE-----\n", name: "doh-ca.pem")
        let app = try TemporaryFiles.file("-----BEGIN CERTIFICATE-----\n", name: "app-ca.pem")
        let both = try Self.settings(
            #"{"httpdns": {"trustCA": ["\#(doh)"]}, "interception": {"trustCA": ["\#(app)"]}}"#)
        #expect(try both.read(HTTPDNSInterceptor.Configuration.section).connection.additionalTrustRoots == [app])
        let dohOnly = try Self.settings(#"{"httpdns": {"trustCA": ["\#(doh)"]}}"#)
        #expect(try dohOnly.read(HTTPDNSInterceptor.Configuration.section).connection.additionalTrustRoots.isEmpty)
    }

    @Test("interception.connectTimeoutMs sets both fronts' connect timeout (2 s by default)")
    func connectTimeoutSetting() throws {
        #expect(
            try Self.settings("{}").read(HTTPDNSInterceptor.Configuration.section).connection.connectTimeout
                == .seconds(2)
        )
        let settings = try Self.settings(#"{"interception": {"connectTimeoutMs": 7500}}"#)
        #expect(
            try settings.read(HTTPDNSInterceptor.Configuration.section).connection.connectTimeout
                == .milliseconds(7_500))
        // The policy reads its keys alone too, from a reader scoped to the section.
        let section = ConfigReader(provider: InMemoryProvider(values: ["connectTimeoutMs": 7500]))
        #expect(try ConnectionPolicy(configReader: section).connectTimeout == .milliseconds(7_500))
    }

    @Test("the section's keys and HOSTSCTL_INTERCEPTION_ variables reach both fronts")
    func keysAndEnvironment() throws {
        let settings = try Self.settings(
            #"{"interception": {"proxy": "tunnel", "exclude": ["*.internal.test"], "connectionAttemptDelayMs": 0}}"#,
            environment: ["HOSTSCTL_INTERCEPTION_ALLOW_INSECURE_REDIRECTS": "true"])
        let configuration = try settings.read(HTTPDNSInterceptor.Configuration.section)
        #expect(configuration.proxyMode == .tunnel && configuration.connection.connectionAttemptDelay == .zero)
        #expect(configuration.connection.allowsInsecureRedirects)
        #expect(!configuration.connection.scope.intercepts(host: "api.internal.test", overrides: nil))
        #expect(try settings.read(HTTPDNSInterceptor.Configuration.section).connection.allowsInsecureRedirects)
    }

    @Test("a mistake in the section is reported at its line and column when a front reads it")
    func positionedMistakes() throws {
        let json = "{\n  \"interception\": {\n    \"conectTimeoutMs\": 5,\n    \"proxy\": \"socks\" }\n}"
        // The resolver alone does not know the section and leaves it to the fronts.
        let settings = try Self.settings(json)
        do {
            _ = try settings.read(HTTPDNSInterceptor.Configuration.section)
            Issue.record("a front read a section with mistakes")
        } catch {
            let found = error.diagnostics.map { "\($0.line):\($0.column) \($0.message)" }
            #expect(
                found.contains { $0.hasPrefix("3:5 ") && $0.contains("unknown key 'interception.conectTimeoutMs'") })
            #expect(found.contains { $0.hasPrefix("4:14 ") && $0.contains("'socks' is not one of bypass, tunnel") })
        }
        #expect(throws: HTTPDNSError.self) { try settings.read(HTTPDNSInterceptor.Configuration.section).connection }
        // Started from the file, the library checks the section before anything starts.
        let path = try TemporaryFiles.file(json)
        do {
            _ = try HTTPDNSRuntime.start(configurationFile: path)
            Issue.record("started with a section with mistakes")
        } catch let error as HTTPDNSError {
            #expect(error.diagnostics.contains { $0.line == 3 && $0.column == 5 }, "\(error.diagnostics)")
        }
        // A bad value from the environment names its variable.
        let bad = try Self.settings("{}", environment: ["HOSTSCTL_INTERCEPTION_CONNECT_TIMEOUT_MS": "10"])
        do {
            _ = try bad.read(HTTPDNSInterceptor.Configuration.section).connection
            Issue.record("took a 10 ms connect timeout")
        } catch {
            #expect(error.diagnostics.first?.message.contains("HOSTSCTL_INTERCEPTION_CONNECT_TIMEOUT_MS") == true)
        }
    }
}

/// A hop's target, read from its URL once for the scope check, the candidates, the spans and the trace.
@Suite("hop targets")
struct HopTargetTests {
    @Test("host, literal or not, port and Host header come from the URL once; the scope goes by them")
    func readOnce() throws {
        func target(_ text: String) throws -> HopTarget? { HopTarget(try #require(URL(string: text))) }
        let name = try #require(try target("https://api.test/v1"))
        #expect(name.host == "api.test" && !name.isLiteral && name.port == 443 && name.hostHeader == "api.test")
        #expect((try? name.name.get())?.name == "api.test")
        let six = try #require(try target("http://[2001:db8::1]:8080/"))
        #expect(six.host == "2001:db8::1" && six.isLiteral && six.port == 8080)
        #expect(six.hostHeader == "[2001:db8::1]:8080")
        let local = try #require(try target("http://localhost/"))
        #expect(local.isLiteral && local.port == 80)
        #expect(try target("file:///etc/hosts") == nil)
        // Literals and localhost are in scope only when an override names them; names by the patterns.
        let scope = InterceptionScope(exclude: [try HostPattern("*.internal.test")])
        #expect(scope.intercepts(name, overrides: nil))
        #expect(!scope.intercepts(local, overrides: nil))
        let excluded = try #require(try target("https://db.internal.test/"))
        #expect(!scope.intercepts(excluded, overrides: nil))
    }
}
