public import ArgumentParser
import HTTPDNS

/// `hostsctl config`: checks and shows configuration files.
public struct ConfigCommand: AsyncParsableCommand {
    /// The subcommand's name, help and children.
    public static let configuration = CommandConfiguration(
        commandName: "config",
        abstract: "Check configuration files.",
        subcommands: [ConfigCheckCommand.self]
    )

    /// Creates the command (used by the argument parser).
    public init() {}
}

/// `hostsctl config check FILE...`: validates overrides files and prints every problem with its position.
public struct ConfigCheckCommand: AsyncParsableCommand {
    /// The subcommand's name and help.
    public static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Validate overrides files (hosts format).",
        discussion: """
            Prints one line per problem as FILE:LINE:COLUMN: error: MESSAGE, then a summary per file.
            Exit status: 0 when no file has errors, 1 when any has, 64 for bad arguments.
            """
    )

    /// The files to check.
    @Argument(help: "Overrides files in hosts format.")
    public var files: [String] = []

    /// Print JSON instead of text.
    @Flag(help: "Print a JSON array with one object per file.")
    public var json = false

    /// Creates the command (used by the argument parser).
    public init() {}

    /// Requires at least one file.
    public func validate() throws {
        guard !files.isEmpty else { throw ValidationError("Give at least one file to check.") }
    }

    /// Checks every file and prints the findings.
    public func run() async throws {
        let results = files.map(Self.check)
        if json {
            print(JSONValue.array(results.map(\.json)).serialized())
        } else {
            for result in results { print(result.text, terminator: "") }
        }
        if results.contains(where: \.hasErrors) { throw ExitCode(1) }
    }

    struct Result {
        var file: String
        var entries: Int
        var diagnostics: [ConfigDiagnostic]
        var unreadable: String?

        var hasErrors: Bool { unreadable != nil || diagnostics.contains { $0.severity == .error } }

        var text: String {
            if let unreadable { return "\(unreadable)\n" }
            let errors = diagnostics.filter { $0.severity == .error }.count
            return diagnostics.map { "\($0)\n" }.joined()
                + "\(file): \(entries) entr\(entries == 1 ? "y" : "ies"), \(errors) error\(errors == 1 ? "" : "s")\n"
        }

        var json: JSONValue {
            .object([
                ("file", .string(file)),
                ("ok", .bool(!hasErrors)),
                ("entries", .number(Double(entries))),
                ("error", unreadable.map(JSONValue.string) ?? .null),
                ("diagnostics", .array(diagnostics.map { $0.json })),
            ])
        }
    }

    static func check(_ file: String) -> Result {
        do {
            let hosts = try HostsFile(contentsOf: file)
            return Result(file: file, entries: hosts.entries.count, diagnostics: hosts.diagnostics)
        } catch {
            return Result(file: file, entries: 0, diagnostics: [], unreadable: error.message)
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
