import Configuration
import Foundation
import Logging
import Synchronization
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSSettings
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore

/// The settings file: positions of every kind of mistake, environment overrides, and hot reload.
@Suite("settings and hot reload")
struct SettingsTests {
    @Test("the shipped Config/hostsctl.json is valid and keeps the offline defaults")
    func shippedFile() throws {
        let file = SettingsFile.load(path: "Config/hostsctl.json", environment: [:])
        #expect(file.diagnostics.isEmpty, "\(file.diagnostics)")
        let settings = try file.get().resolver
        #expect(settings.sources == [.overrides, .hosts, .cache, .cares])
        #expect(settings.files.hostsFile == "/etc/hosts" && settings.systemFallback)
        #expect(settings.files.overridesFile == "Config/hosts")
        #expect(settings.cares.servers.isEmpty)
        #expect(settings.httpDNSProviders.isEmpty)
        #expect(file.fileKeys["cares.timeoutMs"] != nil)
    }

    @Test("each component's Configuration() has the defaults its keys document: config show of an empty file")
    func defaultsWrittenOnce() throws {
        /// The rows `fields` show for a component made in code and for one read from no keys.
        func same<Part>(_ fields: [SettingField<Part>], _ coded: Part, _ read: (ConfigReader) throws -> Part) throws {
            let empty = ConfigReader(provider: InMemoryProvider(values: [:]))
            #expect(SettingField.values(fields, of: coded) == SettingField.values(fields, of: try read(empty)))
        }
        try same(CAresResolver.Configuration.fields, CAresResolver.Configuration()) {
            try CAresResolver.Configuration(configReader: $0)
        }
        try same(HTTPDNSTransport.Configuration.fields, HTTPDNSTransport.Configuration()) {
            try HTTPDNSTransport.Configuration(configReader: $0)
        }
        try same(HostCache.Configuration.fields, HostCache.Configuration()) {
            try HostCache.Configuration(configReader: $0)
        }
        try same(HostResolver.Probing.fields, HostResolver.Probing()) { try HostResolver.Probing(configReader: $0) }
        try same(HostOverrides.Configuration.fields, HostOverrides.Configuration()) {
            try HostOverrides.Configuration(configReader: $0)
        }
        try same(HostNetwork.Configuration.fields, HostNetwork.Configuration()) {
            try HostNetwork.Configuration(configReader: $0)
        }
        try same(SystemResolver.Configuration.fields, SystemResolver.Configuration()) {
            try SystemResolver.Configuration(configReader: $0)
        }
        // The whole resolver: `hostsctl config show` of an empty file is what `HostResolver.Configuration()` holds.
        let file = try TemporaryFiles.file("{}")
        #expect(
            try SettingsFile.load(path: file, environment: [:]).get().resolver.effectiveValues
                == HostResolver.Configuration().effectiveValues)
    }

    @Test("defaults without a file")
    func defaults() throws {
        let settings = try SettingsFile.load(path: nil, environment: [:]).get().resolver
        #expect(settings.effectiveValues == HostResolver.Configuration.default.effectiveValues)
        #expect(settings.cares.timeout == .seconds(2) && settings.cares.tries == 2)
        #expect(settings.cache.dualStack == .fastest && settings.probe.ports == [443])

        let missing = SettingsFile.load(path: "/nonexistent/hostsctl.json", environment: [:])
        #expect(missing.isUnreadable && missing.settings == nil)
        do {
            _ = try missing.get()
            Issue.record("expected an error")
        } catch {
            #expect(error.code == .invalidConfiguration && error.diagnostics.count == 1)
        }
    }

    @Test(
        "every kind of mistake is reported at its line and column",
        arguments: [
            ("{\n  \"cares\": { \"timeout\": 5 }\n}", 2, 14, "unknown key 'cares.timeout'"),
            ("{\n  \"cares\": { \"tries\": \"two\" }\n}", 2, 23, "must be an integer, not a string"),
            ("{ \"cares\": { \"tries\": 99 } }", 1, 23, "99 is outside 1...16"),
            ("{ \"cares\": { \"tcp\": 1 } }", 1, 21, "must be true or false"),
            ("{ \"cares\": { \"servers\": [\"dns.example\"] } }", 1, 26, "is not IP[:PORT]"),
            ("{ \"sources\": { \"order\": [\"cares\", 5] } }", 1, 35, "must hold strings, not an integer"),
            ("{ \"dualStack\": { \"policy\": \"ipv4\" } }", 1, 28, "'ipv4' is not one of"),
            (
                "{ \"httpdns\": { \"provider\": { \"p\": { \"secret\": \"s3cr3t\" } } } }", 1, 37,
                "secrets are never read from files"
            ),
            (
                "{ \"httpdns\": { \"provider\": { \"p\": { \"urls\": [\"ftp://x\"] } } } }", 1, 46,
                "scheme must be https or http"
            ),
            ("{ \"cares\": 5 }", 1, 12, "'cares' must be an object"),
            ("{ \"cares\": { } ", 1, 16, "invalid JSON"),
            ("{ \"a\": 1, \"a\": 2 }", 1, 11, "duplicate key"),
            ("[1, 2]", 1, 1, "must hold a JSON object"),
            ("// comment\n{ \"bogus\": true }", 2, 3, "unknown key 'bogus'"),
            ("{ \"bogus\": true }", 1, 3, "httpdns, interception, nat64"),
            ("{ \"serve\": [1] }", 1, 12, "'serve' must be an object, not an array"),
            ("{ \"cares\": { \"timeoutMs\": 1.5 } }", 1, 27, "must be an integer, not a number"),
            (String(repeating: "[", count: 200), 1, 66, "nesting deeper"),
        ]
    )
    func diagnostics(text: String, line: Int, column: Int, message: String) throws {
        let path = try TemporaryFiles.file(text)
        let file = SettingsFile.load(path: path, environment: [:])
        #expect(file.settings == nil)
        let first = try #require(file.errors.first)
        #expect(first.file == path)
        #expect(first.line == line && first.column == column, "\(first)")
        #expect(first.message.contains(message), "\(first)")
        #expect(throws: HTTPDNSError.self) { try file.get().resolver }
    }

    @Test("each section reads its own keys, and the key table, config show and the sections agree")
    func sections() throws {
        let values: [AbsoluteConfigKey: ConfigValue] = [
            "cares.tries": 5, "cares.search": .init(.stringArray(["corp.test"]), isSecret: false),
            "cache.maxHosts": 7, "dualStack.policy": "preferIPv6",
            "probe.ports": .init(.intArray([80, 8443]), isSecret: false),
            "overrides.ttl": 9, "system.threads": 3, "guard.everyUpstream": true,
            "httpdns.timeoutMs": 900, "httpdns.providers": .init(.stringArray(["p1"]), isSecret: false),
            "httpdns.provider.p1.api": "doh",
            "httpdns.provider.p1.urls":
                .init(.stringArray(["https://127.0.0.1:1/dns-query"]), isSecret: false),
        ]
        let reader = ConfigReader(provider: InMemoryProvider(values: values))
        // A subsystem can be configured from the same source without the whole HostResolver.Configuration.
        #expect(try CAresResolver.Configuration(configReader: reader.scoped(to: "cares")).tries == 5)
        #expect(
            try CAresResolver.Configuration(configReader: reader.scoped(to: "cares")).searchPolicy.domains.map(\.name)
                == ["corp.test"])
        #expect(try HostCache.Configuration(configReader: reader).maximumHosts == 7)
        #expect(try HostCache.Configuration(configReader: reader).dualStack == .preferIPv6)
        #expect(try HostResolver.Probing(configReader: reader.scoped(to: "probe")).ports == [80, 8443])
        #expect(try HostOverrides.Configuration(configReader: reader).overridesTTL == 9)
        #expect(try SystemResolver.Configuration(configReader: reader.scoped(to: "system")).threads == 3)
        let httpDNS = reader.scoped(to: "httpdns")
        #expect(try HTTPDNSTransport.Configuration(configReader: httpDNS).requestTimeout == .milliseconds(900))
        // A provider configured in code is the same as one read from its keys.
        let read = try HTTPDNSResolver.Configuration(configReader: httpDNS.scoped(to: "provider.p1"), name: "p1")
        let coded = HTTPDNSResolver.Configuration(
            name: "p1", api: .dnsMessage(), endpoints: [try HTTPDNSEndpoint("https://127.0.0.1:1/dns-query")])
        #expect(read.rows.map(\.1) == coded.rows.dropLast(2).map(\.1) + ["HOSTSCTL_HTTPDNS_SECRET", "false"])
        #expect(read.endpoints == coded.endpoints && read.name == coded.name)
        #expect(try HostCache.Configuration(configReader: reader).maximumHosts == 7)

        let settings = try HostResolver.Configuration(configReader: reader)
        #expect(settings.cares == (try CAresResolver.Configuration(configReader: reader.scoped(to: "cares"))))
        #expect(settings.httpDNSTransport.requestTimeout == .milliseconds(900))
        #expect(settings.guardsEveryUpstream && !settings.allowsPrivateAnswers)
        // One key table: no key twice, and config show prints every concrete key exactly once.
        let paths = HostResolver.Configuration.keys.map(\.path)
        #expect(Set(paths).count == paths.count)
        let shown = settings.effectiveValues.map(\.path)
        #expect(Set(shown).count == shown.count)
        let concrete = paths.map { $0.replacingOccurrences(of: ".*.", with: ".p1.") }
        #expect(Set(shown) == Set(concrete))
        let text = Dictionary(uniqueKeysWithValues: settings.effectiveValues.map { ($0.path, $0.text) })
        #expect(text["cares.tries"] == "5" && text["probe.ports"] == "[80, 8443]" && text["cares.ndots"] == "(system)")
        #expect(text["httpdns.provider.p1.secretEnv"] == "HOSTSCTL_HTTPDNS_SECRET")
        #expect(text["httpdns.provider.p1.urls"] == "[https://127.0.0.1:1/dns-query]")
        // The defaults come from the same fields: an empty source gives the documented defaults.
        let defaults = Dictionary(
            uniqueKeysWithValues: HostResolver.Configuration.default.effectiveValues.map { ($0.path, $0.text) })
        for key in HostResolver.Configuration.keys where key.kind == .int && !key.path.contains("*") {
            if let number = Int(key.defaultText) { #expect(defaults[key.path] == "\(number)", "\(key.path)") }
        }
        // A bad value is reported by the section that owns the key, naming it.
        let bad = ConfigReader(
            provider: InMemoryProvider(values: ["probe.ports": .init(.intArray([0]), isSecret: false)]))
        #expect(throws: HTTPDNSError.self) { try HostResolver.Probing(configReader: bad.scoped(to: "probe")) }
        do {
            _ = try HostResolver.Configuration(configReader: bad)
            Issue.record("accepted port 0")
        } catch { #expect(error.message.contains("probe.ports")) }
        // A component reads its section from a scoped reader; its errors still name the whole key and its variable.
        let badTries = ConfigReader(provider: InMemoryProvider(values: ["cares.tries": 99]))
        do {
            _ = try CAresResolver.Configuration(configReader: badTries.scoped(to: "cares"))
            Issue.record("accepted 99 tries")
        } catch {
            #expect(error.message.contains("cares.tries") && error.message.contains("HOSTSCTL_CARES_TRIES"))
        }
        // The HTTP DNS connect timeout is a key, and it reaches the transport the pipeline builds.
        let connect = ConfigReader(provider: InMemoryProvider(values: ["httpdns.connectTimeoutMs": 750]))
        #expect(
            try HostResolver.Configuration(configReader: connect).httpDNSTransport.connectTimeout == .milliseconds(750)
        )
        #expect(HostResolver.Configuration().httpDNSTransport.connectTimeout == .seconds(2))
    }

    @Test("environment variables override the file, and bad or unknown ones are reported")
    func environment() throws {
        let path = try TemporaryFiles.file(
            "{ \"cares\": { \"timeoutMs\": 900, \"tries\": 3 }, \"sources\": { \"order\": [\"cares\"] } }")
        let file = SettingsFile.load(
            path: path,
            environment: [
                "HOSTSCTL_CARES_TIMEOUT_MS": "250", "HOSTSCTL_SOURCES_ORDER": "overrides,cares",
                "HOSTSCTL_DUAL_STACK_POLICY": "preferIPv6", "HOSTSCTL_NOT_A_SETTING": "x", "PATH": "/usr/bin",
            ]
        )
        let settings = try file.get().resolver
        #expect(settings.cares.timeout == .milliseconds(250))
        #expect(settings.cares.tries == 3, "from the file")
        #expect(settings.sources == [.overrides, .cares])
        #expect(settings.cache.dualStack == .preferIPv6)
        #expect(file.environmentOverrides["cares.timeoutMs"] == "250")
        #expect(file.diagnostics.map(\.severity) == [.warning])
        #expect(file.diagnostics.first?.message.contains("HOSTSCTL_NOT_A_SETTING") == true)

        for (variable, value) in [
            ("HOSTSCTL_CARES_TRIES", "many"), ("HOSTSCTL_CARES_TRIES", "0"), ("HOSTSCTL_CARES_TCP", "maybe"),
            ("HOSTSCTL_DUAL_STACK_POLICY", "ipv4"),
        ] {
            let bad = SettingsFile.load(path: path, environment: [variable: value])
            #expect(bad.settings == nil, "\(variable)=\(value)")
            #expect(bad.errors.first?.message.contains(variable) == true, "\(bad.diagnostics)")
        }
        #expect(SettingKey.environmentVariable(for: "cache.maxStaleSeconds") == "HOSTSCTL_CACHE_MAX_STALE_SECONDS")
    }

    @Test("providers are read with their secret variable, never a secret")
    func providers() throws {
        let path = try TemporaryFiles.file(
            """
            { "sources": { "order": ["httpdns", "cares"] },
              "httpdns": { "providers": ["local"], "provider": { "local": {
                "api": "alibaba", "urls": ["https://dns.example/"], "bootstrap": ["192.0.2.53"], "account": "42",
                "secretEnv": "MY_SECRET", "allowPrivateAnswers": true } } } }
            """)
        let settings = try SettingsFile.load(path: path, environment: ["MY_SECRET": "x"]).get().resolver
        let provider = try #require(settings.httpDNSProviders.first)
        #expect(provider.name == "local" && provider.api.description == "alibaba")
        #expect(provider.rows.first { $0.0 == "account" }?.1 == "42")
        #expect(provider.secretVariable == "MY_SECRET" && provider.allowNonPublicAddresses)
        #expect(provider.endpoints.first?.bootstrapAddresses == [IPAddress("192.0.2.53")!])

        let missing = try TemporaryFiles.file("{ \"sources\": { \"order\": [\"httpdns\"] } }")
        #expect(
            SettingsFile.load(path: missing, environment: [:]).errors.first?.message.contains(
                "httpdns.providers is empty") == true)
    }

    @Test("the JSON reader handles escapes, unicode and comments")
    func json() throws {
        let document = try PositionedJSON.parse(
            Array(
                #"// c\n{"k": "a\"b\u00e9\ud83d\ude00", "n": -1.5e2, "t": [true, null]}"#.replacingOccurrences(
                    of: "\\n", with: "\n"
                ).utf8))
        guard case .object(let members) = document.value, case .string(let text) = members[0].value.value,
            case .number(let number, let isInteger) = members[1].value.value
        else {
            Issue.record("unexpected shape")
            return
        }
        #expect(text == "a\"bé😀")
        #expect(number == -150 && !isInteger)
        #expect(members[0].keyPosition == .init(line: 2, column: 2))
        for bad in ["{\"a\": 01}", "{\"a\": \"\\ud800\"}", "{\"a\": \"x", "{\"a\" 1}", "{\"a\": tru}", "\"\u{01}\""] {
            #expect(throws: PositionedJSON.SyntaxError.self) { try PositionedJSON.parse(Array(bad.utf8)) }
        }
    }

    @Test("hot reload: a good edit is applied, a broken edit keeps the last good settings and is logged")
    func reload() async throws {
        let path = try TemporaryFiles.file("{ \"cares\": { \"tries\": 3 } }")
        let store = LogStore()
        let applied = Counter()
        let watcher = try FileWatcher(
            path: path,
            logger: Logger(label: "test", factory: { _ in RecordingLogHandler(store: store) }),
            load: { path in try SettingsFile.load(path: path, environment: [:]).get().resolver },
            onChange: { _ in applied.increment() }
        )
        #expect(watcher.value.cares.tries == 3)
        #expect(!watcher.checkNow(), "nothing changed")

        try "{ \"cares\": { \"tries\": 5 } }".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(watcher.checkNow())
        #expect(watcher.value.cares.tries == 5)

        try "{ \"cares\": { \"tries\": \"five\" ".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(!watcher.checkNow())
        #expect(watcher.value.cares.tries == 5, "the last good settings stay")
        #expect(
            store.lines.withLock {
                $0.contains { $0.contains("kept the last good configuration") && $0.contains(path) }
            })

        try FileManager.default.removeItem(atPath: path)
        #expect(!watcher.checkNow())
        #expect(watcher.value.cares.tries == 5, "a deleted file keeps the last good settings")

        try "{ \"cares\": { \"tries\": 7 } }".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(watcher.checkNow())
        #expect(watcher.value.cares.tries == 7)
        #expect(watcher.counts.reloads == 2 && watcher.counts.failures == 2)
        #expect(applied.value == 2)

        // The background task picks up edits by itself.
        watcher.start(interval: .milliseconds(20))
        try "{ \"cares\": { \"tries\": 9 } }".write(toFile: path, atomically: true, encoding: .utf8)
        for _ in 0..<500 where watcher.value.cares.tries != 9 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(watcher.value.cares.tries == 9)
        watcher.stop()
    }

    @Test("hot reload of the overrides file: edits apply, an edit with a bad line is rejected whole")
    func overridesReload() async throws {
        let path = try TemporaryFiles.file("192.0.2.1 a.test\n", name: "hosts")
        let overrides = HostOverrides()
        let watcher = try overrides.watch(
            path: path, interval: .zero, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        let name = try HostName("a.test")
        #expect(overrides.resolve(name, family: .ipv4)?.addresses.map(\.ip.description) == ["192.0.2.1"])

        try "192.0.2.2 a.test\n192.0.2.3 b.test\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(watcher.checkNow())
        #expect(overrides.resolve(name, family: .ipv4)?.addresses.map(\.ip.description) == ["192.0.2.2"])

        try "192.0.2.4 a.test\nnot-an-ip b.test\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(!watcher.checkNow())
        #expect(overrides.resolve(name, family: .ipv4)?.addresses.map(\.ip.description) == ["192.0.2.2"])
        #expect(overrides.resolve(try HostName("b.test"), family: .ipv4) != nil, "the whole last good table stays")
    }
}

/// A thread-safe counter for callbacks.
final class Counter: Sendable {
    private let count = Locked(0)
    func increment() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}

@Suite("layer order")
struct LayerOrderTests {
    @Test(
        "overrides come first and the cache before the upstreams; no layer twice",
        arguments: [
            (["overrides", "cache", "httpdns", "cares"], true), (["cache", "cares"], true), (["cares"], true),
            (["cares", "overrides"], false), (["overrides", "cares", "cache"], false), (["cares", "cares"], false),
            ([String](), false),
        ])
    func order(layers: [String], valid: Bool) throws {
        let sources = layers.compactMap(HostResolver.Configuration.Source.init(rawValue:))
        #expect((HostResolver.Configuration.orderProblem(sources) == nil) == valid, "\(layers)")
    }
}
