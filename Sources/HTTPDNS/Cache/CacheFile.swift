import Foundation
import Logging
import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients

/// The persisted cache: a small JSON document written atomically.
///
/// ```json
/// {"format": "swift-httpdns-cache", "version": 1, "savedAt": 1763700000.5,
///  "bootID": "1e2f014f-2b8e-4c15-8874-e0fcebddc077", "bootSeconds": 86412.25,
///  "hosts": [{"name": "api.example.com", "probePort": 443,
///             "answers": [{"family": "any", "origin": "cares", "ttl": 300, "expiresAt": 1763700290.1,
///                          "addresses": ["192.0.2.10", "2001:db8::10"]}],
///             "scores": [{"ip": "192.0.2.10", "latencyMs": 12.5, "penaltyMs": 0, "successes": 3, "failures": 0,
///                         "firstByteMs": 20.1}],
///             "overrides": []}]}
/// ```
///
/// Time that passed between saving and loading is measured so that a stepped wall clock neither keeps answers
/// alive nor kills them (``elapsed(at:)``): an answer's life left at saving is `expiresAt - savedAt`, both written
/// from one reading of the wall clock, so a skewed wall clock at saving does not change it.
package struct CacheFile: Codable, Sendable {
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

        init(name: String, probePort: Int?, answers: [Answer], scores: [Score], overrides: [String]?) {
            self.name = name
            self.probePort = probePort
            self.answers = answers
            self.scores = scores
            self.overrides = overrides
        }

        /// Reads a host, skipping malformed answers and scores rather than the whole host.
        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            name = try container.decode(String.self, forKey: .name)
            probePort = try? container.decodeIfPresent(Int.self, forKey: .probePort)
            answers = try container.decode(Lossy<Answer>.self, forKey: .answers).elements
            scores = (try? container.decode(Lossy<Score>.self, forKey: .scores).elements) ?? []
            overrides = try? container.decodeIfPresent([String].self, forKey: .overrides)
        }
    }

    /// An array read element by element: an element that does not decode is skipped, not the whole array.
    struct Lossy<Element: Decodable>: Decodable {
        var elements: [Element] = []
        var skipped = 0

        private struct Skip: Decodable {
            init(from decoder: any Decoder) throws {}
        }

        init(from decoder: any Decoder) throws {
            var container = try decoder.unkeyedContainer()
            while !container.isAtEnd {
                if let element = try? container.decode(Element.self) {
                    elements.append(element)
                } else {
                    // Decoding a value that reads nothing still moves past the malformed element.
                    _ = try container.decode(Skip.self)
                    skipped += 1
                }
            }
        }
    }

    struct Answer: Codable, Sendable {
        var family: String
        var origin: String
        var ttl: UInt32
        var expiresAt: Double
        var addresses: [String]
        /// The upstream that gave the answer (absent in files of older releases).
        var upstream: String?
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

    /// An instant by the clocks that outlive a process: the wall clock, and the boot clock with the boot's id.
    package struct Moment: Sendable {
        /// Wall-clock seconds since 1970.
        package var wall: Double
        /// Seconds since boot, suspended time included (`CLOCK_BOOTTIME`).
        var boot: Double
        /// The boot's identity; `nil` where the system has none.
        package var bootID: String?

        package init(wall: Double, boot: Double, bootID: String?) {
            self.wall = wall
            self.boot = boot
            self.bootID = bootID
        }

        /// A moment as a file stores it: the wall time, and the boot clock with its boot's id, both absent in files
        /// of older releases (and where the system has no boot id).
        package init(wall: Double, bootID: String?, bootSeconds: Double?) {
            self.init(wall: wall, boot: bootSeconds ?? -1, bootID: bootSeconds == nil ? nil : bootID)
        }

        /// The boot clock as a file stores it: `nil` without a boot id, which it could not be compared under.
        package var storedBootSeconds: Double? { bootID == nil ? nil : boot }
    }

    /// How much later than ``savedAt`` by the wall clock a file may seem written before it counts as written "in
    /// the future" (clocks of two processes, rounding).
    static let futureTolerance = 60.0

    var format: String
    var version: Int
    /// The wall clock at saving.
    var savedAt: Double
    /// The boot the file was saved in (absent in files of older releases).
    var bootID: String?
    /// The boot clock at saving (absent in files of older releases).
    var bootSeconds: Double?
    var hosts: [Host]
    /// Hosts skipped when reading because they were malformed.
    var skippedHosts = 0

    private enum CodingKeys: String, CodingKey {
        case format, version, savedAt, bootID, bootSeconds, hosts
    }

    init(format: String, version: Int, saved: Moment, hosts: [Host]) {
        self.format = format
        self.version = version
        self.savedAt = saved.wall
        self.bootID = saved.bootID
        self.bootSeconds = saved.storedBootSeconds
        self.hosts = hosts
    }

    /// Reads the file; a malformed host is skipped, not the whole file.
    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        format = try container.decode(String.self, forKey: .format)
        version = try container.decode(Int.self, forKey: .version)
        savedAt = (try? container.decode(Double.self, forKey: .savedAt)) ?? 0
        bootID = (try? container.decodeIfPresent(String.self, forKey: .bootID)).flatMap { $0 }
        bootSeconds = (try? container.decodeIfPresent(Double.self, forKey: .bootSeconds)).flatMap { $0 }
        let hosts = try container.decode(Lossy<Host>.self, forKey: .hosts)
        self.hosts = hosts.elements
        skippedHosts = hosts.skipped
    }

    /// The seconds that passed since the file was saved, as seen at `moment`; `nil` when the file was written "in
    /// the future" (``Moment/elapsed(since:)``), whose answers count as stale rather than fresh.
    func elapsed(at moment: Moment) -> Double? {
        moment.elapsed(since: Moment(wall: savedAt, bootID: bootID, bootSeconds: bootSeconds))
    }
}

extension CacheFile.Moment {
    /// The seconds from `saved` to this moment; `nil` when `saved` lies "in the future" (the wall clock has been
    /// stepped back since, or the writer's clock ran ahead) by more than ``CacheFile/futureTolerance``.
    ///
    /// In the boot that saved, the boot clock measures it, whatever the wall clock did in between; after a restart
    /// only the wall clock is left.
    package func elapsed(since saved: CacheFile.Moment) -> Double? {
        if let bootID, bootID == saved.bootID, saved.boot.isFinite, saved.boot >= 0, saved.boot <= boot {
            return boot - saved.boot
        }
        guard saved.wall.isFinite else { return .infinity }
        let elapsed = wall - saved.wall
        if elapsed < -CacheFile.futureTolerance { return nil }
        return max(elapsed, 0)
    }
}

extension CacheFile {
    /// Reads and checks a cache file.
    /// - Throws: `HTTPDNSError.Code.fileError` when the file cannot be read, is too large, is not JSON of this
    ///   format (corrupt, truncated, another program's) or has another version.
    static func read(from path: String) throws(HTTPDNSError) -> CacheFile {
        let data: Data
        do {
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            if let size = attributes[.size] as? NSNumber, size.intValue > maximumSize {
                throw HTTPDNSError(
                    code: .fileError, message: "cache file \(path) is larger than \(maximumSize >> 20) MiB")
            }
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch let error as HTTPDNSError {
            throw error
        } catch {
            throw HTTPDNSError(
                code: .fileError, message: "cannot read cache file \(path): \(error.localizedDescription)")
        }
        guard data.count <= maximumSize else {
            throw HTTPDNSError(code: .fileError, message: "cache file \(path) is larger than \(maximumSize >> 20) MiB")
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
            throw HTTPDNSError(code: .fileError, message: "cache file \(path) is not valid JSON (corrupt or truncated)")
        }
        guard envelope.format == formatName else {
            throw HTTPDNSError(code: .fileError, message: "cache file \(path) is not a swift-httpdns cache")
        }
        guard envelope.version == currentVersion else {
            throw HTTPDNSError(
                code: .fileError,
                message:
                    "cache file \(path) has version \(envelope.version.map(String.init) ?? "none"), expected \(currentVersion)"
            )
        }
        do {
            return try JSONDecoder().decode(CacheFile.self, from: data)
        } catch {
            throw HTTPDNSError(code: .fileError, message: "cache file \(path) has malformed entries")
        }
    }

    /// The file's JSON, within the reader's size limit: when the whole cache would be larger, the least recently
    /// used hosts (at the end of ``hosts``) are left out until it fits, so the writer never writes what the reader
    /// would reject.
    func encoded(limit: Int = maximumSize) throws(HTTPDNSError) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        var file = self
        while true {
            let data: Data
            do {
                data = try encoder.encode(file)
            } catch {
                throw HTTPDNSError(code: .internalError, message: "cannot encode the cache: \(error)")
            }
            if data.count <= limit { return data }
            guard !file.hosts.isEmpty else {
                throw HTTPDNSError(code: .fileError, message: "the cache does not fit in \(limit) bytes")
            }
            file.hosts.removeLast(max(file.hosts.count / 4, 1))
        }
    }

    /// Writes the file atomically: a temporary file in the same directory (mode 0600), flushed, renamed over
    /// `path`, and the directory flushed so the rename survives a crash. Missing directories are created (mode
    /// 0700); temporary files that an interrupted writer left behind (older than 10 minutes) are removed.
    /// - Throws: `HTTPDNSError.Code.fileError`.
    func write(to path: String) throws(HTTPDNSError) {
        let data = try encoded()
        let url = URL(fileURLWithPath: path)
        let directory = url.deletingLastPathComponent().path
        do {
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700]
            )
        } catch {
            throw HTTPDNSError(
                code: .fileError, message: "cannot create directory \(directory): \(error.localizedDescription)")
        }
        let temporary = "\(path).tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw HTTPDNSError(
                code: .fileError, message: "cannot create \(temporary): \(String(cString: strerror(errno)))")
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
            throw HTTPDNSError(code: .fileError, message: "cannot write cache file \(path): \(failure)")
        }
        let directoryDescriptor = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryDescriptor >= 0 {
            _ = fsync(directoryDescriptor)
            close(directoryDescriptor)
        }
        Self.removeStaleTemporaries(of: path)
    }

    /// Removes `path.tmp-*` files older than 10 minutes: what a writer killed between create and rename leaves.
    static func removeStaleTemporaries(of path: String) {
        let url = URL(fileURLWithPath: path)
        let directory = url.deletingLastPathComponent().path
        let prefix = url.lastPathComponent + ".tmp-"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return }
        let cutoff = Date().addingTimeInterval(-600)
        for name in names where name.hasPrefix(prefix) {
            let full = directory + "/" + name
            if let modified = (try? FileManager.default.attributesOfItem(atPath: full))?[.modificationDate] as? Date,
                modified < cutoff
            {
                unlink(full)
            }
        }
    }

    /// Runs `body` holding an exclusive advisory lock (`flock`) on `path.lock`, so that processes sharing one
    /// cache file take turns reading and writing it. Without a lock file (an unwritable directory) `body` runs
    /// unlocked.
    static func withLock<T>(on path: String, _ body: () throws(HTTPDNSError) -> T) throws(HTTPDNSError) -> T {
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        try? FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let descriptor = open(path + ".lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return try body() }
        defer { close(descriptor) }
        while flock(descriptor, LOCK_EX) != 0, errno == EINTR {}
        defer { flock(descriptor, LOCK_UN) }
        return try body()
    }
}

extension CacheFile {
    /// This file with the hosts of `other` that it lacks added after its own (a save merges what another process
    /// wrote since this one loaded), up to `maximumHosts`.
    func merging(_ other: CacheFile, maximumHosts: Int) -> CacheFile {
        var merged = self
        var names = Set(hosts.map(\.name))
        for host in other.hosts where merged.hosts.count < maximumHosts && names.insert(host.name).inserted {
            merged.hosts.append(host)
        }
        return merged
    }
}
