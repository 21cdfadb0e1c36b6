public import Foundation

/// A temporary directory removed when the value is released, readable by servers that drop privileges.
///
/// Tests that only need a file or a path, with no value to keep, use ``file(_:name:)`` and ``path(_:)``: each call
/// gets a fresh subdirectory of one process-wide directory that is removed when the test process exits.
public final class TemporaryFiles: Sendable {
    /// The directory.
    public let directory: URL

    /// Creates the directory (mode 755).
    public init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-\(UUID().uuidString)")
        try FileManager.default.createDirectory(
            at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    /// Writes `contents` to `name` in the directory and returns its path.
    public func write(_ name: String, _ contents: String) throws -> String {
        let path = directory.appendingPathComponent(name).path
        try contents.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// The path `name` in the directory; nothing is created.
    public func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    /// The process-wide directory behind ``file(_:name:)`` and ``path(_:)``, removed at exit.
    private static let scratch: TemporaryFiles = {
        let files = try! TemporaryFiles()
        atexit { try? FileManager.default.removeItem(at: TemporaryFiles.scratch.directory) }
        return files
    }()

    /// Writes `contents` to `name` in a fresh directory of its own (so files it names relative to itself can sit
    /// next to it) and returns its path.
    public static func file(_ contents: String, name: String = "file") throws -> String {
        let directory = scratch.directory.appendingPathComponent(UUID().uuidString)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent(name).path
        try contents.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// A fresh path ending in `name` whose directory exists; nothing is created at the path itself.
    public static func path(_ name: String) -> String {
        let directory = scratch.directory.appendingPathComponent(UUID().uuidString)
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory.appendingPathComponent(name).path
    }
}
