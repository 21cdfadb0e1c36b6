import Configuration
import Foundation
import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients

/// A settings file (`Config/hostsctl.json`), checked with positions and read through swift-configuration with
/// environment-variable overrides.
///
/// The file is parsed once with positions: unknown keys, values of the wrong type and values out of range are
/// reported as `file:line:column` diagnostics. The valid values go into an in-memory provider; environment
/// variables (`HOSTSCTL_` + the key in upper case, e.g. `HOSTSCTL_CARES_TIMEOUT_MS=500`) are a provider in
/// front of it, so they win. A file with errors gives no settings: callers keep what they had.
public struct SettingsFile: Sendable {
    /// The path as given.
    package var path: String
    /// The settings, when the file (and the environment) had no errors.
    package var settings: ResolverSettings?
    /// Every problem found, errors and warnings.
    public var diagnostics: [ConfigDiagnostic]
    /// The keys the file set, as dotted paths, with their line and column.
    package var fileKeys: [String: (line: Int, column: Int)] {
        keyPositions.mapValues { ($0.line, $0.column) }
    }
    var keyPositions: [String: PositionedJSON.Position]
    /// The environment variables that override keys, by dotted path.
    package var environmentOverrides: [String: String]
    /// Whether the file could not be read at all (missing, not a regular file, too large).
    package var isUnreadable = false

    /// The largest settings file read (1 MiB).
    package static let maximumFileSize = 1 << 20

    /// The errors among ``diagnostics``.
    package var errors: [ConfigDiagnostic] { diagnostics.filter { $0.severity == .error } }

    /// The settings, or the reason there are none.
    /// - Throws: ``ConfigurationError`` with every diagnostic.
    public func get() throws(ConfigurationError) -> ResolverSettings {
        guard let settings, errors.isEmpty else {
            throw ConfigurationError(
                code: isUnreadable ? .unreadable : .invalid,
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
    public static func load(path: String?, environment: [String: String]? = nil) -> SettingsFile {
        let environment = environment ?? ProcessInfo.processInfo.environment
        guard let path else {
            var result = SettingsFile(
                path: "defaults", settings: nil, diagnostics: [], keyPositions: [:], environmentOverrides: [:])
            result.applyEnvironment(environment, values: [:])
            return result
        }
        let bytes: [UInt8]
        do {
            bytes = try FileBytes.contents(of: path, limit: maximumFileSize)
        } catch {
            var result = SettingsFile(
                path: path, settings: nil, diagnostics: [], keyPositions: [:], environmentOverrides: [:])
            result.diagnostics.append(
                ConfigDiagnostic(
                    file: path, line: 0, column: 0, message: "cannot read the settings file: \(error.message)",
                    severity: .error))
            result.isUnreadable = true
            return result
        }
        return parse(bytes, path: path, environment: environment)
    }

    /// Checks and reads the bytes of a settings file that `path` names (for positions and relative paths).
    package static func parse(_ bytes: [UInt8], path: String, environment: [String: String]) -> SettingsFile {
        var values: [AbsoluteConfigKey: ConfigValue] = [:]
        var result = SettingsFile(
            path: path, settings: nil, diagnostics: [], keyPositions: [:], environmentOverrides: [:])
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
        check(document, components: [], values: &values, keys: &positions, diagnose: diagnose)
        result.keyPositions = positions

        // Relative paths in the file are relative to the file's directory.
        let directory = path.lastIndex(of: "/").map { String(path[...$0]) } ?? ""
        for key in ["overrides.file", "cache.path"] {
            let absolute = AbsoluteConfigKey(key.split(separator: ".").map(String.init))
            if case .string(let text)? = values[absolute]?.content, !text.isEmpty, !text.hasPrefix("/") {
                values[absolute] = ConfigValue(.string(directory + text), isSecret: false)
            }
        }

        result.applyEnvironment(environment, values: values)
        return result
    }

    /// Adds the environment's overrides and builds the settings when there are no errors so far.
    private mutating func applyEnvironment(_ environment: [String: String], values: [AbsoluteConfigKey: ConfigValue]) {
        let path = self.path
        // Environment variables for known keys; unknown HOSTSCTL_ variables are worth a warning.
        var known: [String: String] = [:]
        for key in ResolverSettings.keys where !key.path.contains("*") { known[key.environmentVariable] = key.path }
        let providerNames =
            (values[AbsoluteConfigKey(["httpdns", "providers"])]?.content).flatMap { content -> [String]? in
                if case .stringArray(let names) = content { return names }
                return nil
            } ?? []
        var secretVariables: Set<String> = ["HOSTSCTL_HTTPDNS_SECRET", "HOSTSCTL_CONFIG"]
        for name in providerNames {
            for key in ResolverSettings.keys where key.path.hasPrefix("httpdns.provider.*.") {
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
            } else if !secretVariables.contains(variable) {
                diagnostics.append(
                    ConfigDiagnostic(
                        file: "environment", line: 0, column: 0,
                        message: "\(variable) is not a known setting; it is ignored", severity: .warning))
            }
        }
        guard errors.isEmpty else { return }
        let relevant = environment.filter { known[$0.key] != nil }
        let reader = ConfigReader(providers: [
            KeyMappingProvider(upstream: EnvironmentVariablesProvider(environmentVariables: relevant)) { key in
                AbsoluteConfigKey(["hostsctl"] + key.components, context: key.context)
            },
            InMemoryProvider(name: path, values: values),
        ])
        do {
            settings = try ResolverSettings(configReader: reader)
        } catch {
            diagnostics.append(ConfigDiagnostic(file: path, line: 0, column: 0, message: error.message))
        }
    }

    /// Checks one JSON node against the key table, collecting valid leaves.
    private static func check(
        _ node: PositionedJSON,
        components: [String],
        values: inout [AbsoluteConfigKey: ConfigValue],
        keys: inout [String: PositionedJSON.Position],
        diagnose: (PositionedJSON.Position?, String, ConfigDiagnostic.Severity) -> Void
    ) {
        guard case .object(let members) = node.value else { return }
        for member in members {
            let path = components + [member.key]
            let dotted = path.joined(separator: ".")
            if member.key.lowercased() == "secret" || member.key.lowercased() == "key" && components.count == 3 {
                diagnose(
                    member.keyPosition,
                    "'\(dotted)': secrets are never read from files; set secretEnv to the name of "
                        + "an environment variable that holds it", .error)
                continue
            }
            if let spec = ResolverSettings.keys.first(where: { $0.matches(path) }) {
                keys[dotted] = member.keyPosition
                if let content = leaf(member.value, spec: spec, key: dotted, diagnose: diagnose) {
                    values[AbsoluteConfigKey(path)] = ConfigValue(content, isSecret: false)
                }
            } else if ResolverSettings.keys.contains(where: { $0.hasPrefix(path) }) {
                guard case .object = member.value.value else {
                    diagnose(
                        member.value.position, "'\(dotted)' must be an object, not \(member.value.value.typeName)",
                        .error)
                    continue
                }
                check(member.value, components: path, values: &values, keys: &keys, diagnose: diagnose)
            } else {
                let siblings = ResolverSettings.keys.filter { $0.hasPrefix(components) }
                    .map { $0.path.split(separator: ".")[components.count] }
                let known = Array(Set(siblings)).sorted().joined(separator: ", ")
                diagnose(
                    member.keyPosition, "unknown key '\(HostName.printable(dotted))'; known here: \(known)", .error)
            }
        }
    }

    /// The value of a leaf key, or `nil` after a diagnostic.
    private static func leaf(
        _ node: PositionedJSON,
        spec: SettingKey,
        key: String,
        diagnose: (PositionedJSON.Position?, String, ConfigDiagnostic.Severity) -> Void
    ) -> ConfigContent? {
        func wrongType() -> ConfigContent? {
            diagnose(
                node.position,
                "'\(key)' must be \(spec.kind == .int ? "an integer" : spec.kind == .bool ? "true or false" : "a \(spec.kind.rawValue)"), not \(node.value.typeName)",
                .error)
            return nil
        }
        switch (spec.kind, node.value) {
        case (.string, .string(let text)):
            if let problem = spec.problem(with: text) {
                diagnose(node.position, "'\(key)': \(problem)", .error); return nil
            }
            return .string(text)
        case (.int, .number(let number, true)):
            let value = Int(number)
            if let problem = spec.problem(with: value) {
                diagnose(node.position, "'\(key)': \(problem)", .error); return nil
            }
            return .int(value)
        case (.bool, .bool(let flag)):
            return .bool(flag)
        case (.stringArray, .array(let elements)):
            var out: [String] = []
            for element in elements {
                guard case .string(let text) = element.value else {
                    diagnose(element.position, "'\(key)' must hold strings, not \(element.value.typeName)", .error)
                    return nil
                }
                if let problem = spec.problem(with: text) {
                    diagnose(element.position, "'\(key)': \(problem)", .error); return nil
                }
                out.append(text)
            }
            return .stringArray(out)
        case (.intArray, .array(let elements)):
            var out: [Int] = []
            for element in elements {
                guard case .number(let number, true) = element.value else {
                    diagnose(element.position, "'\(key)' must hold integers, not \(element.value.typeName)", .error)
                    return nil
                }
                if let problem = spec.problem(with: Int(number)) {
                    diagnose(element.position, "'\(key)': \(problem)", .error); return nil
                }
                out.append(Int(number))
            }
            return .intArray(out)
        default:
            return wrongType()
        }
    }
}
