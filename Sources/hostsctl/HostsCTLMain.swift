import ArgumentParser
import Foundation
import HostsCTLCommands

/// The `hostsctl` executable: everything lives in the `HostsCTLCommands` library so tests can run commands.
@main
enum HostsCTLMain {
    static func main() async {
        if let unknown = unknownHelpTopic(Array(CommandLine.arguments.dropFirst())) {
            // The parser's own `help` prints the root's help for a topic it does not know, and succeeds.
            FileHandle.standardError.write(
                Data("Error: no command '\(unknown)' to show help for; 'hostsctl help' lists them.\n".utf8))
            exit(ExitCode.validationFailure.rawValue)
        }
        await HostsCTLCommand.main()
    }

    /// The first topic of `hostsctl help TOPIC...` that names no command, `nil` when every one does (or when the
    /// arguments are not a help request).
    static func unknownHelpTopic(_ arguments: [String]) -> String? {
        guard arguments.first == "help" else { return nil }
        var command: any ParsableCommand.Type = HostsCTLCommand.self
        for topic in arguments.dropFirst() where !topic.hasPrefix("-") {
            guard let next = command.configuration.subcommands.first(where: { $0._commandName == topic }) else {
                return topic
            }
            command = next
        }
        return nil
    }
}
