import Foundation
import TestSupport
import Testing

/// Every command's `--help` and the synopsis of docs/hostsctl.md say the same: each option `--help` lists is in the
/// command's synopsis lines, and each option those lines name is one `--help` lists.
@Suite("hostsctl: --help and docs/hostsctl.md agree")
struct HelpAgreementTests {
    static let commands = [
        "resolve", "fetch", "bench", "probe", "cache show", "cache export", "cache clear", "config check",
        "config show", "config keys", "serve", "top", "control status", "control flush", "control reload",
    ]

    /// The options the synopsis's `[HTTP DNS options]` stands for.
    static let httpDNSOptions: Set<String> = [
        "--doh", "--doh-method", "--doh-json", "--httpdns", "--endpoint", "--account", "--provider", "--presets",
        "--bootstrap", "--trust-ca", "--allow-private-answers",
    ]

    /// Each option of a `--help` text's sections after its usage (`OPTIONS:`, a group's such as `HTTP DNS:`), as
    /// the set of its names (`-o`, `--output`).
    static func options(inHelp text: String) -> [Set<String>] {
        guard let start = text.range(of: "\nUSAGE: ") else { return [] }
        var options: [Set<String>] = []
        for line in text[start.upperBound...].split(separator: "\n") {
            // An option's line starts with two spaces and a dash; continuation lines are indented further.
            guard line.hasPrefix("  -") else { continue }
            let head = line.dropFirst(2).split(separator: " ").prefix { $0.hasPrefix("-") }
            let names = Set(head.map { $0.trimmingCharacters(in: CharacterSet(charactersIn: ",")) })
            if !names.isDisjoint(with: ["--help", "-h", "--version"]) { continue }
            options.append(names)
        }
        return options
    }

    /// The synopsis lines of `command` in the docs: its line and the continuation lines under it.
    static func synopsis(of command: String, in docs: String) -> String {
        guard
            let block = docs.components(separatedBy: "```text\n").dropFirst().first?.components(separatedBy: "```")
                .first
        else { return "" }
        var lines: [String] = []
        var inside = false
        for line in block.split(separator: "\n") {
            if line.hasPrefix("hostsctl ") {
                inside = line.hasPrefix("hostsctl \(command) ") || line == "hostsctl \(command)"
            }
            if inside { lines.append(String(line)) }
        }
        return lines.joined(separator: "\n")
    }

    /// The option names a synopsis names, `[HTTP DNS options]` expanded.
    static func options(inSynopsis text: String) -> Set<String> {
        let pattern = try! NSRegularExpression(pattern: #"(?<![A-Za-z0-9-])--?[a-zA-Z][a-z-]*"#)
        let range = NSRange(text.startIndex..., in: text)
        var names = Set(
            pattern.matches(in: text, range: range).compactMap { Range($0.range, in: text).map { String(text[$0]) } })
        if text.contains("[HTTP DNS options]") { names.formUnion(httpDNSOptions) }
        return names
    }

    @Test("every command's options are in its synopsis, and the synopsis names no option the command lacks")
    func agree() async throws {
        let docs = try String(contentsOfFile: "docs/hostsctl.md", encoding: .utf8)
        for command in Self.commands {
            let help = try await HostsCTLProcess.run(command.split(separator: " ").map(String.init) + ["--help"])
            #expect(help.status == 0, "\(command) --help")
            let listed = Self.options(inHelp: help.standardOutput)
            #expect(!listed.isEmpty || command == "config check", "\(command): no options parsed")
            let synopsis = Self.synopsis(of: command, in: docs)
            #expect(!synopsis.isEmpty, "docs/hostsctl.md has no synopsis for hostsctl \(command)")
            let named = Self.options(inSynopsis: synopsis)
            for option in listed {
                #expect(!option.isDisjoint(with: named), "\(command): \(option.sorted()) is not in the docs' synopsis")
            }
            let known = listed.reduce(into: Set<String>()) { $0.formUnion($1) }
            for name in named.subtracting(known) {
                Issue.record("\(command): the docs' synopsis names \(name), which --help does not list")
            }
        }
    }

    @Test("help for a command that does not exist fails, naming it; help for one that does succeeds")
    func unknownTopic() async throws {
        let unknown = try await HostsCTLProcess.run(["help", "nope"])
        #expect(unknown.status == 64)
        #expect(unknown.standardError.contains("no command 'nope'"), "\(unknown.standardError)")
        let nested = try await HostsCTLProcess.run(["help", "cache", "nope"])
        #expect(nested.status == 64)
        let known = try await HostsCTLProcess.run(["help", "cache", "show"])
        #expect(known.status == 0 && known.standardOutput.contains("USAGE: hostsctl cache show"))
    }

    @Test("bench --help gives one default for --queries and --duration: 3 seconds a source")
    func benchDefaults() async throws {
        let help = try await HostsCTLProcess.run(["bench", "--help"]).standardOutput
        #expect(!help.contains("default 1000"), "\(help)")
        #expect(help.contains("by default 3 seconds") || help.contains("by default each source runs for 3"))
    }
}
