public import ArgumentParser
import Foundation

/// The root of the `hostsctl` command tree.
public struct HostsCTLCommand: AsyncParsableCommand {
    /// The command's name, version and subcommands.
    public static let configuration = CommandConfiguration(
        commandName: "hostsctl",
        abstract: "Resolve host names fast and reliably: c-ares, HTTP DNS, a scored IP cache.",
        version: HostsCTLVersion.current,
        subcommands: [
            ResolveCommand.self, BenchCommand.self, ProbeCommand.self, CacheCommand.self, FetchCommand.self,
            ConfigCommand.self, ServeCommand.self, TopCommand.self, ControlCommand.self,
        ],
        defaultSubcommand: nil
    )

    /// Creates the command (used by the argument parser).
    public init() {}
}

/// The version `hostsctl --version` prints.
enum HostsCTLVersion {
    /// The package version.
    static let current = "0.1.0"
}

/// Writes a line to standard error.
func printToStandardError(_ line: String) {
    var stream = StandardError()
    print(line, to: &stream)
}

private struct StandardError: TextOutputStream {
    mutating func write(_ string: String) {
        FileHandle.standardError.write(Data(string.utf8))
    }
}
