import Foundation

#if canImport(Glibc)
    public import Glibc
#endif

/// A child process started with `posix_spawn`, for the servers the tests run.
///
/// Foundation's `Process` is avoided on purpose: on Linux its monitor thread and `waitUntilExit` can deadlock when
/// several tests start and stop children at once, and children inherit the blocked signal mask of the dispatch
/// thread that spawns them (so they ignore SIGTERM). Here the mask and signal dispositions are reset.
public final class ChildProcess: Sendable {
    /// The child's process id.
    public let pid: pid_t

    /// Starts `path` with `arguments`; standard input, output and error go to /dev/null unless `logPath` is given,
    /// in which case output and error are appended there (error to `errorPath` when that is given).
    /// `environment` entries are added to (or replace) this process's environment.
    public init(
        path: String,
        arguments: [String],
        logPath: String? = nil,
        errorPath: String? = nil,
        environment: [String: String] = [:]
    ) throws {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        let output = logPath ?? "/dev/null"
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        if let errorPath {
            posix_spawn_file_actions_addopen(&actions, 2, errorPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        } else {
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        }
        Self.closeInheritedDescriptors(&actions)
        var variables: [String] = []
        var index = 0
        while let entry = environ[index] {
            let text = String(cString: entry)
            let name = String(text.prefix { $0 != "=" })
            if environment[name] == nil { variables.append(text) }
            index += 1
        }
        variables += environment.map { "\($0.key)=\($0.value)" }
        let envp = variables.map { strdup($0) } + [nil]
        defer { envp.forEach { free($0) } }

        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid = pid_t()
        let status = posix_spawn(&pid, path, &actions, &attributes, argv, envp)
        guard status == 0 else { throw TestServerError("cannot start \(path): error \(status)") }
        self.pid = pid
    }

    /// Adds an action that closes every descriptor from 3 up in the child. A test's socket must die when the test
    /// closes it: a listener that a test closes to see connects refused would otherwise live on in a server or
    /// `hostsctl` that a test running in parallel spawned meanwhile. Test sockets are also opened close-on-exec;
    /// this covers any descriptor that is not. (glibc only exports the action to C with `_GNU_SOURCE`, hence dlsym.)
    private static func closeInheritedDescriptors(_ actions: inout posix_spawn_file_actions_t) {
        typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32
        guard let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else { return }
        let addCloseFrom = unsafeBitCast(symbol, to: AddCloseFrom.self)
        _ = addCloseFrom(&actions, 3)
    }

    /// Whether the child is still running (it is reaped if it has exited).
    public var isRunning: Bool {
        var status: Int32 = 0
        return waitpid(pid, &status, WNOHANG) == 0
    }

    /// Waits for the child to exit and returns its exit status (128 + signal when killed, -1 if already reaped).
    public func wait() -> Int32 {
        var status: Int32 = 0
        guard waitpid(pid, &status, 0) == pid else { return -1 }
        if status & 0x7f == 0 { return (status >> 8) & 0xff }
        return 128 + (status & 0x7f)
    }

    /// Sends `signal` and waits for the child to exit; SIGKILL after 3 s if it is still there. Idempotent.
    public func stop(signal: Int32 = SIGTERM) {
        guard isRunning else { return }
        _ = kill(pid, signal)
        for _ in 0..<300 {
            guard isRunning else { return }
            usleep(10_000)
        }
        _ = kill(pid, SIGKILL)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
    }
}

/// Runs blocking `work` (waiting for a child process, polling a server until it is up) on a thread of its own and
/// awaits the result.
///
/// Swift Testing runs the tests in parallel on the cooperative pool, which has one thread per core: two tests
/// blocked in `waitpid` on a two-core machine would stall every other test, and timeouts elsewhere would then fire
/// for no reason of their own.
public func offThePool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try work() }) }.start()
    }
}
