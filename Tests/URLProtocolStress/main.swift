// httpdns-stress: many requests at once through one URLSession with HTTPDNSURLProtocol in front, as an adopter's
// application makes them, every answer checked. The URL protocol tests run it as a child process, so a crash in
// URLSession (the failure this guards against) fails one test instead of killing the test runner.
//
//   httpdns-stress --port P --live IP --dead IP --session shared|custom --concurrency N --requests M
//                  [--cancel-every K] [--failover-every K] [--callers async,completion,delegate]
//
// The server on `live:P` (started by the test) answers `/echo/I` with "echo I host=HOST" and `/slow/I` the same way
// 300 ms later. `stress.test` is pinned to the live address, `failover.test` to the dead one first (connections
// refused) and then the live one. Request I goes to `/slow/I` and is cancelled mid-flight when I % K == K - 1 for
// --cancel-every K, to failover.test when I % K == 0 for --failover-every K; callers take turns.
// Prints one JSON object: {"ok", "cancelled", "failed", "mismatched", "failovers", "errors"}; exits 0 when every
// request either got its own answer or was cancelled, 1 otherwise, 2 for bad arguments, 3 when the run stalls.

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Foundation
import HTTPDNS
import HTTPDNSURLProtocol
import Synchronization

struct Options {
    var port = 0
    var live = "127.0.0.1"
    var dead = "127.0.0.2"
    var shared = true
    var concurrency = 16
    var requests = 1000
    var cancelEvery = 0
    var failoverEvery = 0
    var callers: [Caller] = [.async, .completion]

    init(_ arguments: ArraySlice<String>) throws {
        var rest = arguments
        while let flag = rest.popFirst() {
            guard let value = rest.popFirst() else { throw Usage("\(flag) needs a value") }
            switch flag {
            case "--port": port = try Self.int(value, flag)
            case "--live": live = value
            case "--dead": dead = value
            case "--session":
                guard value == "shared" || value == "custom" else { throw Usage("--session is shared or custom") }
                shared = value == "shared"
            case "--concurrency": concurrency = try Self.int(value, flag)
            case "--requests": requests = try Self.int(value, flag)
            case "--cancel-every": cancelEvery = try Self.int(value, flag)
            case "--failover-every": failoverEvery = try Self.int(value, flag)
            case "--callers":
                callers = try value.split(separator: ",").map {
                    guard let caller = Caller(rawValue: String($0)) else { throw Usage("unknown caller \($0)") }
                    return caller
                }
            default: throw Usage("unknown option \(flag)")
            }
        }
        guard port > 0, concurrency > 0, requests > 0, !callers.isEmpty else {
            throw Usage("--port, --concurrency and --requests must be positive")
        }
        if shared && callers.contains(.delegate) { throw Usage("URLSession.shared has no delegate") }
    }

    static func int(_ text: String, _ flag: String) throws -> Int {
        guard let value = Int(text), value >= 0 else { throw Usage("\(flag) needs a number") }
        return value
    }
}

struct Usage: Error { var message: String; init(_ message: String) { self.message = message } }

enum Caller: String { case async, completion, delegate }

enum Outcome: Sendable {
    case ok, cancelled
    case failed(String)
    case mismatched(String)
}

/// Collects data-task bodies for the delegate caller.
final class Collector: NSObject, URLSessionDataDelegate, Sendable {
    private struct Pending {
        var body = Data()
        var response: URLResponse?
        var done: CheckedContinuation<(Data?, URLResponse?, (any Error)?), Never>
    }
    private let pending = Locked<[Int: Pending]>([:])

    func expect(_ task: URLSessionTask, _ done: CheckedContinuation<(Data?, URLResponse?, (any Error)?), Never>) {
        pending.withLock { $0[task.taskIdentifier] = Pending(done: done) }
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        pending.withLock { $0[dataTask.taskIdentifier]?.response = response }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        pending.withLock { $0[dataTask.taskIdentifier]?.body.append(data) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let entry = pending.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
        entry.done.resume(returning: (entry.body, entry.response ?? task.response, error))
    }
}

func run(_ options: Options) async throws -> Int32 {
    let overrides = HostOverrides()
    guard let live = IPAddress(options.live), let dead = IPAddress(options.dead) else {
        throw Usage("--live and --dead take IP addresses")
    }
    overrides.set([live], for: try HostPattern("stress.test"))
    overrides.set([dead, live], for: try HostPattern("failover.test"))
    let resolver = HostResolver(upstreams: [], overrides: overrides, cache: HostCache(), prober: nil)
    let failovers = Atomic<Int>(0)
    var configuration = HTTPDNSInterceptor.Configuration(cookieStorage: nil)
    // No connection race, so requests to failover.test really fail over from the refused address (the path under
    // test), and the back-off is what keeps later ones from it.
    configuration.connection.connectionAttemptDelay = .zero
    // AsyncHTTPClient bounds a request's wait for a free connection by the connect timeout (see the README's notes),
    // and a sanitized run is several times slower: the timeout stretches with HTTPDNS_TEST_TIME_SCALE, which
    // scripts/sanitize.sh sets, so this run checks answers, not queueing.
    let scale = ProcessInfo.processInfo.environment["HTTPDNS_TEST_TIME_SCALE"].flatMap(Double.init) ?? 1
    configuration.connection.connectTimeout = .seconds(2 * max(1, min(scale, 20)))
    configuration.connection.traceHandler = { trace in
        if trace.hops.contains(where: { !$0.failedAttempts.isEmpty }) { failovers.add(1, ordering: .relaxed) }
    }
    let interceptor = try HTTPDNSInterceptor(resolver: resolver, configuration: configuration)
    let collector = Collector()
    let session: URLSession
    if options.shared {
        HTTPDNSURLProtocol.register(interceptor)
        session = URLSession.shared
    } else {
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        HTTPDNSURLProtocol.install(interceptor, into: sessionConfiguration)
        session = URLSession(configuration: sessionConfiguration, delegate: collector, delegateQueue: nil)
    }

    @Sendable func one(_ index: Int) async -> Outcome {
        let cancel = options.cancelEvery > 0 && index % options.cancelEvery == options.cancelEvery - 1
        let host =
            !cancel && options.failoverEvery > 0 && index % options.failoverEvery == 0 ? "failover.test" : "stress.test"
        let url = URL(string: "http://\(host):\(options.port)/\(cancel ? "slow" : "echo")/\(index)")!
        var request = URLRequest(url: url)
        request.timeoutInterval = 30
        let caller = options.callers[index % options.callers.count]
        let outcome: (Data?, URLResponse?, (any Error)?)
        switch caller {
        case .async:
            let task = Task { () -> (Data?, URLResponse?, (any Error)?) in
                do {
                    let (data, response) = try await session.data(for: request)
                    return (data, response, nil)
                } catch {
                    return (nil, nil, error)
                }
            }
            if cancel { try? await Task.sleep(for: .milliseconds(10 + index % 40)); task.cancel() }
            outcome = await task.value
        case .completion, .delegate:
            let box = Locked<URLSessionDataTask?>(nil)
            outcome = await withCheckedContinuation { done in
                let task: URLSessionDataTask
                if caller == .delegate {
                    task = session.dataTask(with: request)
                    collector.expect(task, done)
                } else {
                    task = session.dataTask(with: request) { data, response, error in
                        done.resume(returning: (data, response, error))
                    }
                }
                box.withLock { $0 = task }
                task.resume()
                if cancel {
                    let delay = 10 + index % 40
                    DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(delay)) {
                        box.withLock { $0?.cancel() }
                    }
                }
            }
        }
        if let error = outcome.2 {
            if (error as? URLError)?.code == .cancelled || error is CancellationError {
                return cancel ? .cancelled : .failed("cancelled unasked: \(url)")
            }
            return .failed("\(url) [\(caller)]: \(error)")
        }
        let expected = "echo \(index) host=\(host):\(options.port)"
        guard let http = outcome.1 as? HTTPURLResponse, http.statusCode == 200 else {
            return .mismatched("\(url): not a 200 answer")
        }
        let body = String(decoding: outcome.0 ?? Data(), as: UTF8.self)
        guard body == expected, http.url?.absoluteString == url.absoluteString else {
            return .mismatched("\(url): got \"\(body)\" for \(http.url?.absoluteString ?? "-")")
        }
        return .ok
    }

    var ok = 0, cancelled = 0, failed = 0, mismatched = 0
    var errors: [String] = []
    await withTaskGroup(of: Outcome.self) { group in
        var next = 0
        while next < min(options.concurrency, options.requests) {
            let index = next
            group.addTask { await one(index) }
            next += 1
        }
        while let outcome = await group.next() {
            switch outcome {
            case .ok: ok += 1
            case .cancelled: cancelled += 1
            case .failed(let message): failed += 1; if errors.count < 5 { errors.append(message) }
            case .mismatched(let message): mismatched += 1; if errors.count < 5 { errors.append(message) }
            }
            if next < options.requests {
                let index = next
                group.addTask { await one(index) }
                next += 1
            }
        }
    }
    if !options.shared { session.finishTasksAndInvalidate() }
    HTTPDNSURLProtocol.unregister()
    await interceptor.shutdown()
    await resolver.shutdown()
    let report: [String: Any] = [
        "ok": ok, "cancelled": cancelled, "failed": failed, "mismatched": mismatched,
        "failovers": failovers.load(ordering: .relaxed), "errors": errors,
    ]
    let json = try JSONSerialization.data(withJSONObject: report, options: [.sortedKeys])
    print(String(decoding: json, as: UTF8.self))
    return failed == 0 && mismatched == 0 && ok + cancelled == options.requests ? 0 : 1
}

let options: Options
do {
    options = try Options(CommandLine.arguments.dropFirst())
} catch {
    FileHandle.standardError.write(Data("httpdns-stress: \((error as? Usage)?.message ?? "\(error)")\n".utf8))
    exit(2)
}
// A stalled run must end on its own: the test waits for this process.
DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(240)) {
    FileHandle.standardError.write(Data("httpdns-stress: the run stalled\n".utf8))
    exit(3)
}
do {
    exit(try await run(options))
} catch {
    FileHandle.standardError.write(Data("httpdns-stress: \(error)\n".utf8))
    exit(1)
}
