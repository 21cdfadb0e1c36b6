import ArgumentParser
import Foundation
import HTTPDNS
import HTTPDNSSettings

/// `hostsctl config`: checks and shows configuration files.
struct ConfigCommand: AsyncParsableCommand {
    /// The subcommand's name, help and children.
    static let configuration = CommandConfiguration(
        commandName: "config",
        abstract: "Check and show configuration files.",
        subcommands: [ConfigCheckCommand.self, ConfigShowCommand.self, ConfigKeysCommand.self]
    )

    /// Creates the command (used by the argument parser).
    init() {}
}

/// `hostsctl config check [FILE...]`: validates settings (`.json`) and overrides files and prints every problem
/// with its position.
struct ConfigCheckCommand: AsyncParsableCommand {
    /// The subcommand's name and help.
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Validate settings files (.json) and overrides files (hosts format).",
        discussion: """
            Without files, checks the settings file $HOSTSCTL_CONFIG names, as the other commands read it, else \
            Config/hostsctl.json and Config/hosts. Settings files are checked for unknown keys (with the nearest \
            known one suggested), wrong types, bad values, and files they name that cannot be read, every section \
            in one run; environment overrides (HOSTSCTL_...) are checked with them.
            Prints one line per problem as FILE:LINE:COLUMN: error: MESSAGE, then a summary per file.
            Exit status: 0 when no file has errors, 1 when any has, 64 for bad arguments.
            """
    )

    /// The files to check.
    @Argument(
        help:
            "Settings files (.json) and overrides files (hosts format). Default: $HOSTSCTL_CONFIG, else Config/hostsctl.json Config/hosts."
    )
    var files: [String] = []

    /// Print JSON instead of text.
    @Flag(help: "Print a JSON array with one object per file.")
    var json = false

    /// Creates the command (used by the argument parser).
    init() {}

    /// The files checked when none is given.
    static let defaultFiles = ["Config/hostsctl.json", "Config/hosts"]

    /// Checks every file and prints the findings.
    func run() async throws {
        let chosen = files.isEmpty ? SettingsLoading.chosenPath(nil).map { [$0] } ?? Self.defaultFiles : files
        let results = chosen.map(Self.check)
        if json {
            print(JSONValue.array(results.map(\.json)).serialized())
        } else {
            for result in results { print(result.text, terminator: "") }
        }
        if results.contains(where: \.hasErrors) { throw ExitCode(1) }
    }

    struct Result {
        var file: String
        var kind = "hosts"
        var entries: Int
        var diagnostics: [ConfigDiagnostic]
        var unreadable: String?

        var hasErrors: Bool { unreadable != nil || diagnostics.contains { $0.severity == .error } }

        var text: String {
            if let unreadable { return "\(unreadable)\n" }
            let errors = diagnostics.filter { $0.severity == .error }.count
            let counted =
                kind == "settings"
                ? "\(entries) key\(entries == 1 ? "" : "s")" : "\(entries) entr\(entries == 1 ? "y" : "ies")"
            return diagnostics.map { "\($0)\n" }.joined()
                + "\(file): \(counted), \(errors) error\(errors == 1 ? "" : "s")\n"
        }

        var json: JSONValue {
            .object([
                ("file", .string(file)),
                ("kind", .string(kind)),
                ("ok", .bool(!hasErrors)),
                ("entries", .number(Double(entries))),
                ("error", unreadable.map(JSONValue.string) ?? .null),
                ("diagnostics", .array(diagnostics.map { $0.json })),
            ])
        }
    }

    static func check(_ file: String) -> Result {
        if file.hasSuffix(".json") {
            let settings = SettingsLoading.load(file)
            if settings.isUnreadable, let unreadable = settings.errors.first {
                return Result(
                    file: file, kind: "settings", entries: 0, diagnostics: [],
                    unreadable: "\(file): \(unreadable.message)")
            }
            return Result(
                file: file, kind: "settings", entries: settings.fileKeys.count, diagnostics: settings.diagnostics)
        }
        do {
            let hosts = try HostsFile(contentsOf: file)
            return Result(file: file, entries: hosts.entries.count, diagnostics: hosts.diagnostics)
        } catch {
            return Result(file: file, entries: 0, diagnostics: [], unreadable: error.message)
        }
    }
}

/// `hostsctl config show`: the effective settings (file, environment, defaults) with secrets masked.
struct ConfigShowCommand: AsyncParsableCommand {
    /// The subcommand's name and help.
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Print the effective settings and where each value comes from; secrets are masked.",
        discussion: "Exit status: 0, or 1 when the settings have errors (they are printed as by config check)."
    )

    /// The settings file.
    @Option(help: ArgumentHelp("Settings file; without it only defaults and environment apply.", valueName: "FILE"))
    var config: String?

    /// Print JSON instead of text.
    @Flag(help: "Print a JSON object.")
    var json = false

    /// Creates the command (used by the argument parser).
    init() {}

    /// Prints the settings.
    func run() async throws {
        let file = SettingsLoading.load(config)
        guard let settings = file.settings, file.errors.isEmpty else {
            for diagnostic in file.diagnostics { printToStandardError(diagnostic.description) }
            throw ExitCode(1)
        }
        for warning in file.diagnostics where warning.severity == .warning { printToStandardError(warning.description) }
        let rows = try SettingsReport.rows(settings, file: file)
        if json {
            print(
                JSONValue.object(
                    rows.map { ($0.key, .object([("value", .string($0.value)), ("from", .string($0.origin))])) }
                ).serialized())
        } else {
            let width = rows.map(\.key.count).max() ?? 0
            for row in rows {
                print("\(row.key.padding(toLength: width, withPad: " ", startingAt: 0))  \(row.value)  (\(row.origin))")
            }
        }
    }
}

/// `hostsctl config keys`: every settings key with its type, default, environment variable and meaning.
struct ConfigKeysCommand: ParsableCommand {
    /// The subcommand's name and help.
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "List every settings key with its type, default and environment variable."
    )

    /// Print a Markdown table.
    @Flag(help: "Print a Markdown table.")
    var markdown = false

    /// Creates the command (used by the argument parser).
    init() {}

    /// Prints the keys.
    func run() {
        if markdown {
            print("| key | type | default | environment variable | meaning |")
            print("| --- | --- | --- | --- | --- |")
        }
        for key in SettingsLoading.keys {
            let variable = SettingKey.environmentVariable(for: key.path.replacingOccurrences(of: "*", with: "NAME"))
            var meaning = key.help
            if let allowed = key.allowed { meaning += " (\(allowed.joined(separator: ", ")))" }
            if let range = key.range { meaning += " (\(range.lowerBound)...\(range.upperBound))" }
            if markdown {
                print("| `\(key.path)` | \(key.kind.rawValue) | \(key.defaultText) | `\(variable)` | \(meaning) |")
            } else {
                print("\(key.path)  [\(key.kind.rawValue), default \(key.defaultText), \(variable)]\n    \(meaning)")
            }
        }
    }
}

extension ConfigDiagnostic {
    var json: JSONValue {
        .object([
            ("line", .number(Double(line))),
            ("column", .number(Double(column))),
            ("severity", .string(severity.rawValue)),
            ("message", .string(message)),
        ])
    }
}
