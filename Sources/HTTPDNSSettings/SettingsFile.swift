import Configuration
import Foundation
public import HTTPDNS

/// A settings file (`Config/hostsctl.json`), checked with positions and read through swift-configuration with
/// environment-variable overrides.
///
/// The file is parsed once with positions: unknown keys, values of the wrong type and values out of range are
/// reported as `file:line:column` diagnostics. The valid values go into an in-memory provider; environment
/// variables (`HOSTSCTL_` + the key in upper case, e.g. `HOSTSCTL_CARES_TIMEOUT_MS=500`) are a provider in
/// front of it, so they win. A file with errors gives no settings: callers keep what they had.
public struct SettingsFile: Sendable {
    /// The path as given.
    var path: String
    /// The settings, when the file (and the environment) had no errors.
    package var settings: Settings?
    /// Every problem found, errors and warnings.
    public var diagnostics: [ConfigDiagnostic]
    /// The keys the file set, as dotted paths, with their line and column.
    package var fileKeys: [String: (line: Int, column: Int)]
    /// The environment variables that override keys, by dotted path.
    package var environmentOverrides: [String: String]
    /// Whether the file could not be read at all (missing, not a regular file, too large).
    package var isUnreadable = false
    /// The sections other modules own, as the file wrote them: kept even when the resolver's keys have errors, so
    /// that those sections are checked too.
    private var otherSections: Sections?

    /// The largest settings file read (1 MiB).
    static let maximumFileSize = 1 << 20

    /// The errors among ``diagnostics``.
    package var errors: [ConfigDiagnostic] { diagnostics.filter { $0.severity == .error } }

    /// The settings, or the reason there are none.
    /// - Throws: `HTTPDNSError` with every diagnostic.
    public func get() throws(HTTPDNSError) -> Settings {
        guard let settings, errors.isEmpty else {
            throw HTTPDNSError(
                code: .invalidConfiguration,
                message: "\(path): \(errors.count) error\(errors.count == 1 ? "" : "s")",
                diagnostics: diagnostics
            )
        }
        return settings
    }

    /// Reads and checks a settings file.
    /// - Parameters:
    ///   - path: The JSON file; `nil` for the defaults with environment overrides only.
    ///   - environment: The environment whose `HOSTSCTL_…` variables override the file; `nil` for the process's.
    ///
    /// The sections other modules own (`interception`, `serve`, `grpc`, `otel`) are kept for those modules, which
    /// check them when they read them (``Settings/read(_:)``).
    public static func load(path: String?, environment: [String: String]? = nil) -> SettingsFile {
        load(path: path, environment: environment, sections: [])
    }

    /// Reads and checks a settings file, and checks `sections` (other modules' sections) in it as well, so their
    /// problems are among the ``diagnostics`` too.
    package static func load(
        path: String?, environment: [String: String]? = nil, sections: [AnySettingsSection]
    ) -> SettingsFile {
        var file = load(unchecked: path, environment: environment ?? ProcessInfo.processInfo.environment)
        file.check(sections)
        return file
    }

    private static func load(unchecked path: String?, environment: [String: String]) -> SettingsFile {
        guard let path else {
            var result = SettingsFile(
                path: "defaults", settings: nil, diagnostics: [], fileKeys: [:], environmentOverrides: [:])
            result.applyEnvironment(environment, values: [:], deferred: [:])
            return result
        }
        let bytes: [UInt8]
        do {
            bytes = try FileBytes.contents(of: path, limit: maximumFileSize)
        } catch {
            var result = SettingsFile(
                path: path, settings: nil, diagnostics: [], fileKeys: [:], environmentOverrides: [:])
            result.diagnostics.append(
                ConfigDiagnostic(
                    file: path, line: 0, column: 0, message: "cannot read the settings file: \(error.message)",
                    severity: .error))
            result.isUnreadable = true
            return result
        }
        return parse(unchecked: bytes, path: path, environment: environment)
    }

    /// Checks and reads the bytes of a settings file that `path` names (for positions and relative paths), with
    /// `sections` of other modules checked as well.
    package static func parse(
        _ bytes: [UInt8], path: String, environment: [String: String], sections: [AnySettingsSection] = []
    ) -> SettingsFile {
        var result = parse(unchecked: bytes, path: path, environment: environment)
        result.check(sections)
        return result
    }

    private static func parse(unchecked bytes: [UInt8], path: String, environment: [String: String]) -> SettingsFile {
        var values: [AbsoluteConfigKey: ConfigValue] = [:]
        var result = SettingsFile(
            path: path, settings: nil, diagnostics: [], fileKeys: [:], environmentOverrides: [:])
        func diagnose(
            _ position: PositionedJSON.Position?, _ message: String, _ severity: ConfigDiagnostic.Severity = .error
        ) {
            result.diagnostics.append(
                ConfigDiagnostic(
                    file: path, line: position?.line ?? 0, column: position?.column ?? 0, message: message,
                    severity: severity))
        }
        let document: PositionedJSON
        do {
            document = try PositionedJSON.parse(bytes)
        } catch {
            diagnose(error.position, "invalid JSON: \(error.message)")
            return result
        }
        guard case .object = document.value else {
            diagnose(document.position, "the settings file must hold a JSON object, not \(document.value.typeName)")
            return result
        }
        var positions: [String: PositionedJSON.Position] = [:]
        var deferred: [String: PositionedJSON] = [:]
        SettingsCheck.check(
            document, components: [], table: HostResolver.Configuration.keys, values: &values, keys: &positions,
            deferred: &deferred, diagnose: diagnose)
        result.fileKeys = positions.mapValues { ($0.line, $0.column) }

        // Relative paths in the file are relative to the file's directory.
        let directory = path.lastIndex(of: "/").map { String(path[...$0]) } ?? ""
        for key in ["overrides.file", "cache.path"] {
            let absolute = AbsoluteConfigKey(key.split(separator: ".").map(String.init))
            if case .string(let text)? = values[absolute]?.content, !text.isEmpty, !text.hasPrefix("/") {
                values[absolute] = ConfigValue(.string(directory + text), isSecret: false)
            }
        }
        SettingsCheck.checkFiles(
            table: HostResolver.Configuration.keys, values: values, positions: positions, environment: environment,
            diagnose: diagnose)

        result.applyEnvironment(environment, values: values, deferred: deferred)
        return result
    }

    /// Adds the environment's overrides and builds the settings when there are no errors so far.
    private mutating func applyEnvironment(
        _ environment: [String: String], values: [AbsoluteConfigKey: ConfigValue], deferred: [String: PositionedJSON]
    ) {
        let path = self.path
        // Environment variables for known keys; unknown HOSTSCTL_ variables are worth a warning.
        var known: [String: String] = [:]
        for key in HostResolver.Configuration.keys where !key.path.contains("*") {
            known[key.environmentVariable] = key.path
        }
        let providerNames =
            (values[AbsoluteConfigKey(["httpdns", "providers"])]?.content).flatMap { content -> [String]? in
                if case .stringArray(let names) = content { return names }
                return nil
            } ?? []
        // The variables of other modules' sections are theirs to check.
        let otherPrefixes = Settings.sectionsOfOtherModules.map {
            SettingKey.environmentVariable(for: $0) + "_"
        }
        var otherVariables: [String: String] = [:]
        var secretVariables: Set<String> = ["HOSTSCTL_HTTPDNS_SECRET", "HOSTSCTL_CONFIG"]
        for name in providerNames {
            for key in HostResolver.Configuration.keys where key.path.hasPrefix("httpdns.provider.*.") {
                let concrete = key.path.replacingOccurrences(of: "*", with: name)
                known[SettingKey.environmentVariable(for: concrete)] = concrete
            }
            if case .string(let variable)? = values[AbsoluteConfigKey(["httpdns", "provider", name, "secretEnv"])]?
                .content
            {
                secretVariables.insert(variable)
            }
        }
        for (variable, value) in environment.sorted(by: { $0.key < $1.key }) where variable.hasPrefix("HOSTSCTL_") {
            if let key = known[variable] {
                environmentOverrides[key] = value
            } else if otherPrefixes.contains(where: variable.hasPrefix) {
                otherVariables[variable] = value
            } else if !secretVariables.contains(variable) {
                diagnostics.append(
                    ConfigDiagnostic(
                        file: "environment", line: 0, column: 0,
                        message: "\(variable) is not a known setting; it is ignored", severity: .warning))
            }
        }
        // Kept whatever the resolver's keys say, so that the other sections are checked too: one run of `config
        // check` reports every problem of every section.
        otherSections = Sections(path: path, trees: deferred, environment: otherVariables)
        guard errors.isEmpty else { return }
        let reader = Self.reader(values, environment: environment.filter { known[$0.key] != nil }, path: path)
        do {
            settings = Settings(
                resolver: try HostResolver.Configuration(configReader: reader),
                origin: .file(Sections(path: path, trees: deferred, environment: otherVariables)))
        } catch {
            diagnostics.append(ConfigDiagnostic(file: path, line: 0, column: 0, message: error.message))
        }
    }

    /// A reader of checked file values with environment variables in front.
    fileprivate static func reader(
        _ values: [AbsoluteConfigKey: ConfigValue], environment: [String: String], path: String
    ) -> ConfigReader {
        ConfigReader(providers: [
            KeyMappingProvider(upstream: EnvironmentVariablesProvider(environmentVariables: environment)) { key in
                AbsoluteConfigKey(["hostsctl"] + key.components, context: key.context)
            },
            InMemoryProvider(name: path, values: values),
        ])
    }

    /// Checks other modules' sections, adding their diagnostics, key positions and environment overrides.
    private mutating func check(_ sections: [AnySettingsSection]) {
        guard let kept = otherSections else { return }
        // The sections' values are read against the resolver's settings, or its defaults when those have errors
        // (the sections' own problems are reported either way).
        let settings = settings ?? Settings(resolver: HostResolver.Configuration(), origin: .file(kept))
        for section in sections {
            let checked = kept.check(section.name, keys: section.keys)
            diagnostics += checked.diagnostics
            fileKeys.merge(checked.positions) { first, _ in first }
            environmentOverrides.merge(checked.environmentOverrides) { first, _ in first }
            if checked.diagnostics.allSatisfy({ $0.severity != .error }) {
                do throws(HTTPDNSError) {
                    _ = try section.values(settings)
                } catch {
                    // The check's warnings are in already; the read adds the errors of values it refused.
                    diagnostics += error.diagnostics.filter { $0.severity == .error }
                }
            }
        }
        if !errors.isEmpty { self.settings = nil }
    }

    /// The sections of a file that other modules own, as the file wrote them, and the environment variables under
    /// their prefixes; ``Settings/read(_:)`` checks one against its module's keys.
    struct Sections: Sendable {
        /// The file's path, for diagnostics.
        let path: String
        /// Each section's JSON object, by top-level key.
        let trees: [String: PositionedJSON]
        /// The `HOSTSCTL_` variables under the sections' prefixes.
        let environment: [String: String]

        /// A section checked against `keys`: its values with the environment in front, what was wrong, the
        /// positions of its keys and the keys the environment set.
        func check(_ name: String, keys table: [SettingKey]) -> (
            reader: ConfigReader, diagnostics: [ConfigDiagnostic], positions: [String: (line: Int, column: Int)],
            environmentOverrides: [String: String]
        ) {
            var diagnostics: [ConfigDiagnostic] = []
            var values: [AbsoluteConfigKey: ConfigValue] = [:]
            var positions: [String: PositionedJSON.Position] = [:]
            var deferred: [String: PositionedJSON] = [:]
            if let tree = trees[name] {
                func diagnose(
                    _ position: PositionedJSON.Position?, _ message: String, _ severity: ConfigDiagnostic.Severity
                ) {
                    diagnostics.append(
                        ConfigDiagnostic(
                            file: path, line: position?.line ?? 0, column: position?.column ?? 0, message: message,
                            severity: severity))
                }
                SettingsCheck.check(
                    tree, components: [name], table: table, values: &values, keys: &positions, deferred: &deferred,
                    diagnose: diagnose)
                SettingsCheck.checkFiles(
                    table: table, section: [name], values: values, positions: positions, environment: environment,
                    diagnose: diagnose)
            }
            var known: [String: String] = [:]
            for key in table { known[key.environmentVariable] = key.path }
            let prefix = SettingKey.environmentVariable(for: name) + "_"
            var overrides: [String: String] = [:]
            for (variable, value) in environment.sorted(by: { $0.key < $1.key }) where variable.hasPrefix(prefix) {
                if let key = known[variable] {
                    overrides[key] = value
                } else {
                    diagnostics.append(
                        ConfigDiagnostic(
                            file: "environment", line: 0, column: 0,
                            message: "\(variable) is not a known setting; it is ignored", severity: .warning))
                }
            }
            let reader = SettingsFile.reader(
                values, environment: environment.filter { known[$0.key] != nil }, path: path)
            return (reader, diagnostics, positions.mapValues { ($0.line, $0.column) }, overrides)
        }
    }
}
