public import Foundation

/// A temporary directory removed when the value is released, readable by servers that drop privileges.
public final class TemporaryFiles {
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
}
