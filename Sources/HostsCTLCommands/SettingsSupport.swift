import ArgumentParser
import Foundation
import HTTPDNS
import HTTPDNSServer
import HTTPDNSSettings
import HTTPDNSURLProtocol

/// Finds and loads the settings for a command.
enum SettingsLoading {
    /// The environment variable naming a settings file when `--config` is not given.
    static let configVariable = "HOSTSCTL_CONFIG"

    /// The sections of the settings file that the modules above the resolver own: the fronts' `interception`, the
    /// server's `serve` and the commands' `otel`. `hostsctl` checks, lists and shows them with the resolver's keys.
    static let sections = [
        HTTPDNSInterceptor.Configuration.section.erased, ServeSettings.section.erased,
        Telemetry.Configuration.section.erased,
    ]

    /// Every documented key: the resolver's, then the sections'.
    static var keys: [SettingKey] { HostResolver.Configuration.keys + sections.flatMap(\.keys) }

    /// The command's own variables, which are not settings: the log level and the presets file.
    static let programVariables: Set<String> = [CommandLogging.levelVariable, HTTPDNSOptions.presetsVariable]

    /// Loads `path`, or the file `$HOSTSCTL_CONFIG` names, or the defaults with environment overrides; every
    /// section is checked. The command's own variables (``programVariables``) are not read as settings.
    static func load(_ path: String?) -> SettingsFile {
        let environment = ProcessInfo.processInfo.environment.filter { !programVariables.contains($0.key) }
        return SettingsFile.load(path: chosenPath(path), environment: environment, sections: sections)
    }

    /// The settings of `path` (see ``load(_:)``), with every diagnostic printed to standard error.
    /// - Throws: `ValidationError` when the settings have errors.
    static func settings(_ path: String?) throws -> Settings {
        let file = load(path)
        for diagnostic in file.diagnostics { printToStandardError(diagnostic.description) }
        guard let settings = file.settings, file.errors.isEmpty else {
            throw ValidationError("the settings have errors; see above (hostsctl config check)")
        }
        return settings
    }

    /// `settings` answering from the overrides file `hosts` (`--hosts`), first in the layers.
    static func useOverrides(_ hosts: String, in settings: inout HostResolver.Configuration) {
        settings.files.overridesFile = hosts
        if !settings.sources.contains(.overrides) { settings.sources.insert(.overrides, at: 0) }
    }

    /// The help of `--config`, which every command that reads the settings takes.
    static let configHelp = ArgumentHelp(
        "Settings file (JSON); default: $HOSTSCTL_CONFIG, else the built-in defaults.", valueName: "FILE")
    /// The help of `--hosts`.
    static let hostsHelp = ArgumentHelp(
        "Overrides file in hosts format (IP name [name...]; *.suffix wildcards).", valueName: "FILE")

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
    /// - Throws: `HTTPDNSError` when a section does not read (the file was checked, so it does).
    static func rows(_ settings: Settings, file: SettingsFile) throws -> [Row] {
        var rows: [Row] = []
        var values = settings.resolver.effectiveValues
        for section in SettingsLoading.sections { values += try section.values(settings) }
        for value in values {
            let origin =
                file.environmentOverrides[value.path] != nil
                ? "env \(SettingKey.environmentVariable(for: value.path))"
                : file.fileKeys[value.path] != nil ? "file" : "default"
            rows.append(Row(key: value.path, value: value.text, origin: origin))
            // What hostsctl serve does with the system resolver (ServeCommand.served): its answers never reach
            // getaddrinfo, whatever the file says.
            let system =
                value.path == "sources.systemFallback"
                || (value.path == "sources.order" && value.text.contains("system"))
            if system {
                rows.append(Row(key: value.path + " (serve)", value: "off", origin: "always under hostsctl serve"))
            }
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
