import Foundation
import Logging

/// The persisted cache: a small JSON document written atomically.
///
/// ```json
/// {"format": "swift-httpdns-cache", "version": 1, "savedAt": 1763700000.5,
///  "hosts": [{"name": "api.example.com", "probePort": 443,
///             "answers": [{"family": "any", "origin": "cares", "ttl": 300, "expiresAt": 1763700290.1,
///                          "addresses": ["192.0.2.10", "2001:db8::10"]}],
///             "scores": [{"ip": "192.0.2.10", "latencyMs": 12.5, "penaltyMs": 0, "successes": 3, "failures": 0,
///                         "firstByteMs": 20.1}],
///             "overrides": []}]}
/// ```
struct CacheFile: Codable, Sendable {
    static let formatName = "swift-httpdns-cache"
    static let currentVersion = 1
    /// Files larger than this are not read.
    static let maximumSize = 64 << 20

    struct Host: Codable, Sendable {
        var name: String
        var probePort: Int?
        var answers: [Answer]
        var scores: [Score]
        /// Addresses the overrides gave the host, whose scores are kept (absent in files of older releases).
        var overrides: [String]?
    }

    struct Answer: Codable, Sendable {
        var family: String
        var origin: String
        var ttl: UInt32
        var expiresAt: Double
        var addresses: [String]
    }

    struct Score: Codable, Sendable {
        var ip: String
        var latencyMs: Double?
        var penaltyMs: Double
        var successes: Int
        var failures: Int
        /// The average time to the first response byte (absent in files of older releases).
        var firstByteMs: Double?
    }

    var format: String
    var version: Int
    var savedAt: Double
    var hosts: [Host]
}

extension CacheFile {
    /// Reads and checks a cache file.
    /// - Throws: ``DNSError/Code/fileError`` when the file cannot be read, is too large, is not JSON of this
    ///   format (corrupt, truncated, another program's) or has another version.
    static func read(from path: String) throws(DNSError) -> CacheFile {
        let data: Data
        do {
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            if let size = attributes[.size] as? NSNumber, size.intValue > maximumSize {
                throw DNSError(code: .fileError, message: "cache file \(path) is larger than \(maximumSize >> 20) MiB")
            }
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch let error as DNSError {
            throw error
        } catch {
            throw DNSError(code: .fileError, message: "cannot read cache file \(path): \(error.localizedDescription)")
        }
        guard data.count <= maximumSize else {
            throw DNSError(code: .fileError, message: "cache file \(path) is larger than \(maximumSize >> 20) MiB")
        }
        // Check the envelope first, so another program's JSON gets a message saying so.
        struct Envelope: Decodable {
            var format: String?
            var version: Int?
        }
        let envelope: Envelope
        do {
            envelope = try JSONDecoder().decode(Envelope.self, from: data)
        } catch {
            throw DNSError(code: .fileError, message: "cache file \(path) is not valid JSON (corrupt or truncated)")
        }
        guard envelope.format == formatName else {
            throw DNSError(code: .fileError, message: "cache file \(path) is not a swift-httpdns cache")
        }
        guard envelope.version == currentVersion else {
            throw DNSError(
                code: .fileError,
                message: "cache file \(path) has version \(envelope.version.map(String.init) ?? "none"), expected \(currentVersion)"
            )
        }
        do {
            return try JSONDecoder().decode(CacheFile.self, from: data)
        } catch {
            throw DNSError(code: .fileError, message: "cache file \(path) has malformed entries")
        }
    }

    /// Writes the file atomically: a temporary file in the same directory (mode 0600), flushed, then renamed over
    /// `path`. Missing directories are created (mode 0700).
    /// - Throws: ``DNSError/Code/fileError``.
    func write(to path: String) throws(DNSError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data: Data
        do {
            data = try encoder.encode(self)
        } catch {
            throw DNSError(code: .internalError, message: "cannot encode the cache: \(error)")
        }
        let url = URL(fileURLWithPath: path)
        let directory = url.deletingLastPathComponent().path
        do {
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700]
            )
        } catch {
            throw DNSError(code: .fileError, message: "cannot create directory \(directory): \(error.localizedDescription)")
        }
        let temporary = "\(path).tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw DNSError(code: .fileError, message: "cannot create \(temporary): \(String(cString: strerror(errno)))")
        }
        var failure: String?
        data.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = Foundation.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    failure = String(cString: strerror(errno))
                    return
                }
                offset += written
            }
        }
        if failure == nil, fsync(descriptor) != 0 { failure = String(cString: strerror(errno)) }
        close(descriptor)
        if failure == nil, rename(temporary, path) != 0 { failure = String(cString: strerror(errno)) }
        if let failure {
            unlink(temporary)
            throw DNSError(code: .fileError, message: "cannot write cache file \(path): \(failure)")
        }
    }
}
