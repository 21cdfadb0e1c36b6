import Foundation
import HTTPDNS

/// Finds and loads the settings for a command.
enum SettingsLoading {
    /// The environment variable naming a settings file when `--config` is not given.
    static let configVariable = "HOSTSCTL_CONFIG"

    /// Loads `path`, or the file `$HOSTSCTL_CONFIG` names, or the defaults with environment overrides.
    static func load(_ path: String?) -> SettingsFile {
        SettingsFile.load(path: chosenPath(path), environment: ProcessInfo.processInfo.environment)
    }

    /// `path`, or the file `$HOSTSCTL_CONFIG` names; `nil` for the defaults.
    static func chosenPath(_ path: String?) -> String? {
        path ?? ProcessInfo.processInfo.environment[configVariable].flatMap { $0.isEmpty ? nil : $0 }
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
