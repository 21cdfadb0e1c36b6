import Foundation
import HTTPDNS

/// Finds and loads the settings for a command.
enum SettingsLoading {
    /// The environment variable naming a settings file when `--config` is not given.
    static let configVariable = "HOSTSCTL_CONFIG"

    /// Loads `path`, or the file `$HOSTSCTL_CONFIG` names, or the defaults with environment overrides.
    static func load(_ path: String?) -> SettingsFile {
        let environment = ProcessInfo.processInfo.environment
        let chosen = path ?? environment[configVariable].flatMap { $0.isEmpty ? nil : $0 }
        return SettingsFile.load(path: chosen, environment: environment)
    }
}

/// The rows of `hostsctl config show`.
enum SettingsReport {
    struct Row {
        var key: String
        var value: String
        var origin: String
    }

    /// Every effective value with where it came from; after each provider's `secretEnv` row, whether that
    /// variable is set (never its value).
    static func rows(_ settings: ResolverSettings, file: SettingsFile) -> [Row] {
        var rows: [Row] = []
        for value in settings.effectiveValues {
            let origin =
                file.environmentOverrides[value.path] != nil
                ? "env \(SettingKey.environmentVariable(for: value.path))"
                : file.fileKeys[value.path] != nil ? "file" : "default"
            rows.append(Row(key: value.path, value: value.text, origin: origin))
            if value.path.hasPrefix("httpdns.provider."), value.path.hasSuffix(".secretEnv") {
                let isSet = HTTPDNSSecret(environmentVariable: value.text) != nil
                rows.append(
                    Row(
                        key: String(value.path.dropLast("Env".count)),
                        value: isSet ? "******** (set)" : "(not set)", origin: "env \(value.text)"))
            }
        }
        return rows
    }
}
