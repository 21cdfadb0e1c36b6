package import Logging
import Synchronization
import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Keeps a value loaded from a file and reloads it when the file changes: hot reload for the settings and
/// overrides files.
///
/// The file's identity (device, inode, size, modification time) is checked every `interval`; a change,
/// including an editor's save-by-rename, triggers a reload. When the new contents fail to load (a syntax error,
/// a bad line, a missing file) the last good value stays in effect and the error is logged, so a broken edit
/// never takes a running service down. Checking `stat` once every few seconds costs nothing measurable.
package final class FileWatcher<Value: Sendable>: Sendable {
    private struct Identity: Equatable {
        var device: UInt64
        var inode: UInt64
        var size: Int64
        var seconds: Int
        var nanoseconds: Int
    }

    private struct State {
        var value: Value
        var identity: Identity?
        var task: Task<Void, Never>?
        var reloads = 0
        var failures = 0
    }

    /// The watched path.
    let path: String
    private let load: @Sendable (String) throws -> Value
    private let onChange: @Sendable (Value) -> Void
    private let logger: Logger
    private let state: Locked<State>

    /// Loads the file once and returns a watcher holding the value; call ``start(interval:)`` to watch.
    /// - Parameters:
    ///   - path: The file.
    ///   - logger: Receives one error per failed reload and one notice per applied one.
    ///   - load: Reads and validates the file; throws to reject it.
    ///   - onChange: Called with each newly loaded value (not for the first load).
    /// - Throws: Whatever `load` throws for the first load.
    convenience init(
        path: String,
        logger: Logger,
        load: @escaping @Sendable (String) throws -> Value,
        onChange: @escaping @Sendable (Value) -> Void = { _ in }
    ) throws {
        let identity = Self.identity(of: path)
        self.init(
            path: path, initial: try load(path), identity: identity, logger: logger, load: load, onChange: onChange)
    }

    /// Starts from a value the caller already loaded (for example leniently, skipping bad lines) and reloads with
    /// `load` on each later change, so a file that was imperfect at start-up is still followed.
    package convenience init(
        path: String,
        initial: Value,
        logger: Logger,
        load: @escaping @Sendable (String) throws -> Value,
        onChange: @escaping @Sendable (Value) -> Void = { _ in }
    ) {
        self.init(
            path: path, initial: initial, identity: Self.identity(of: path), logger: logger, load: load,
            onChange: onChange)
    }

    private init(
        path: String,
        initial: Value,
        identity: Identity?,
        logger: Logger,
        load: @escaping @Sendable (String) throws -> Value,
        onChange: @escaping @Sendable (Value) -> Void
    ) {
        self.path = path
        self.load = load
        self.onChange = onChange
        self.logger = logger
        self.state = Locked(State(value: initial, identity: identity))
    }

    deinit { state.withLock { $0.task?.cancel() } }

    /// The last good value.
    var value: Value { state.withLock { $0.value } }

    /// How many edits were applied and how many were rejected.
    var counts: (reloads: Int, failures: Int) { state.withLock { ($0.reloads, $0.failures) } }

    /// Starts checking the file every `interval` in a background task. Calling it again restarts the task.
    package func start(interval: Duration) {
        let task = Task { [weak self] in
            while !Task.isCancelled {
                do { try await Task.sleep(for: interval) } catch { return }
                guard let self else { return }
                self.checkNow()
            }
        }
        state.withLock { state in
            state.task?.cancel()
            state.task = task
        }
    }

    /// Stops watching.
    package func stop() {
        state.withLock { state in
            state.task?.cancel()
            state.task = nil
        }
    }

    /// Checks the file now and reloads it if it changed.
    /// - Returns: `true` when a new value was applied.
    @discardableResult
    func checkNow() -> Bool {
        let identity = Self.identity(of: path)
        let changed = state.withLock { state in
            guard state.identity != identity else { return false }
            state.identity = identity
            return true
        }
        guard changed else { return false }
        do {
            let value = try load(path)
            state.withLock { state in
                state.value = value
                state.reloads += 1
            }
            logger.notice("reloaded \(path)")
            onChange(value)
            return true
        } catch {
            state.withLock { $0.failures += 1 }
            logger.error(
                "kept the last good configuration; \(path) was not applied: \(error)", metadata: ["file": "\(path)"])
            return false
        }
    }

    private static func identity(of path: String) -> Identity? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        let modified = TimeSpecWords(info.st_mtim)
        return Identity(
            device: UInt64(info.st_dev), inode: UInt64(info.st_ino), size: Int64(info.st_size),
            seconds: modified.seconds, nanoseconds: modified.nanoseconds)
    }
}

extension HostOverrides {
    /// Loads `path` into the file table and keeps it in step with edits of the file.
    ///
    /// At start the lines that parse are used and the others logged, and the file is watched either way, so fixing
    /// a bad line is picked up. With `strict` (the overrides file), a later edit with any bad line is rejected as a
    /// whole (the previous table stays, the diagnostics are logged), so a half-written file cannot drop overrides;
    /// without it (the system hosts file, read like the C library reads it) bad lines are skipped.
    /// - Parameters:
    ///   - path: The hosts-format file.
    ///   - interval: How often the file is checked; zero loads once without watching.
    ///   - strict: Whether an edit with a bad line is rejected as a whole (default `true`).
    ///   - logger: Receives the result of each reload.
    /// - Returns: The watcher; keep it alive as long as the overrides should follow the file.
    /// - Throws: `HTTPDNSError` when the file cannot be read the first time.
    func watch(path: String, interval: Duration, strict: Bool = true, logger: Logger) throws -> FileWatcher<
        OverrideTable
    > {
        let first = try HostsFile(contentsOf: path)
        // A bad line is skipped, the rest used: a warning, once, not labelled an error (`config check` is where a
        // file with bad lines fails).
        for diagnostic in first.diagnostics {
            logger.warning(
                "hosts-format file line skipped",
                metadata: [
                    "line": "\(diagnostic.file):\(diagnostic.line):\(diagnostic.column)",
                    "reason": "\(diagnostic.message)",
                ])
        }
        let watcher = FileWatcher(
            path: path,
            initial: first.table,
            logger: logger,
            load: { path in
                let file = try HostsFile(contentsOf: path)
                guard !strict || file.diagnostics.filter({ $0.severity == .error }).isEmpty else {
                    throw HTTPDNSError(
                        code: .invalidConfiguration, message: "\(path) has errors", diagnostics: file.diagnostics)
                }
                return file.table
            },
            onChange: { [weak self] table in self?.replaceFileTable(table) }
        )
        replaceFileTable(first.table)
        if interval > .zero { watcher.start(interval: interval) }
        return watcher
    }
}
