import ArgumentParser
import Foundation
import Testing

@testable import HostsCTLCommands

/// Expects `arguments` to be refused by the parser or a command's validation, with exit status 64.
func expectUsageError(_ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) {
    do {
        _ = try HostsCTLCommand.parseAsRoot(arguments)
        Issue.record("expected a usage error for \(arguments)", sourceLocation: sourceLocation)
    } catch {
        #expect(HostsCTLCommand.exitCode(for: error) == ExitCode(64), "\(arguments)", sourceLocation: sourceLocation)
    }
}

/// A directory removed when the value is released.
final class TemporaryDirectory: Sendable {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("hostsctl-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: url) }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    /// Writes `contents` to `name` and returns its path.
    func write(_ name: String, _ contents: String) throws -> String {
        let path = path(name)
        try contents.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}
