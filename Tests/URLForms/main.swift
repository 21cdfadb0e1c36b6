// httpdns-url-forms: every URLSession API form an application may use, run once each against a local server, with
// what the application observes printed as one JSON line per form. The URL protocol tests run it twice, without and
// with the library started (the one-call start-up, an override pinning the server's address), each in its own
// process, and compare the lines.
//
//   httpdns-url-forms [--library] BASE_URL [FORM...]
//   httpdns-url-forms BASE_URL --list
//
// BASE_URL serves /small, /big, /echo (POST: answers with what it received), /redirect (302 to /small) and /slow
// (answers after a few seconds). Each line: {"form", "status", "headers", "body", "file", "events", "error",
// "agent"}: `events` lists the delegate callbacks in order (a run of body, upload or download parts once, with body
// parts counted in "dataEvents"), `agent` is the User-Agent the server saw (URLSession's own HTTP support sends one, the library's
// transport none), reported apart from the rest since it names the path taken.

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Foundation
import HTTPDNSURLProtocol
import Logging
import Synchronization

var arguments = Array(CommandLine.arguments.dropFirst())
let library = arguments.first == "--library"
if library { arguments.removeFirst() }
guard let baseText = arguments.first, let base = URL(string: baseText), let host = base.host else {
    print("usage: httpdns-url-forms [--library] BASE_URL [FORM...]")
    exit(2)
}
let only = Set(arguments.dropFirst())

var logger = Logger(label: "url-forms", factory: { StreamLogHandler.standardError(label: $0) })
logger.logLevel = .warning
let runtime: HTTPDNSRuntime? =
    if library {
        try HTTPDNSRuntime.start(configurationFile: nil, logger: logger)
    } else {
        nil
    }
try runtime?.setOverride([host], for: host)

/// What one form showed the application.
struct Outcome: Encodable {
    var form: String
    var status: Int?
    var headers: [String: String]?
    var body: String?
    var file: String?
    var events: [String] = []
    var dataEvents = 0
    var error: String?
    var agent: String?
}

/// How an outcome is put in words.
enum Observe {
    /// The body in short: its length and an FNV-1a digest, and the text itself when short.
    static func summary(_ data: Data) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in data {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        let text = data.count <= 200 ? " " + String(decoding: data, as: UTF8.self) : ""
        return "\(data.count) bytes \(String(hash, radix: 16))\(text)"
    }

    static func describe(_ error: any Error) -> String {
        let nsError = error as NSError
        return "\(nsError.domain) \(nsError.code)"
    }

    static func record(_ response: HTTPURLResponse, into outcome: inout Outcome) {
        outcome.status = response.statusCode
        var headers: [String: String] = [:]
        for (name, value) in response.allHeaderFields {
            guard let name = name as? String, let value = value as? String else { continue }
            if name.lowercased() == "x-agent" {
                outcome.agent = value
            } else {
                headers[name.lowercased()] = value
            }
        }
        outcome.headers = headers
    }
}

/// Records the delegate callbacks, in the order they arrive.
final class Recorder: NSObject, URLSessionDataDelegate, URLSessionDownloadDelegate, @unchecked Sendable {
    // Sendable: every field is behind `state`.
    struct State {
        var events: [String] = []
        var dataEvents = 0
        var received = Data()
        var file: String?
        var response: URLResponse?
        var error: (any Error)?
        var done = false
    }
    let state = Mutex(State())
    let finished = DispatchSemaphore(value: 0)
    /// Whether `willPerformHTTPRedirection` stops redirects (the 3xx is delivered) rather than following them.
    let refusesRedirects: Bool

    init(refusesRedirects: Bool = false) { self.refusesRedirects = refusesRedirects }

    func note(_ event: String) {
        state.withLock { state in
            // Parts of a body, of an upload or of a download: how many is the transport's, so each run counts once.
            let repeatable = ["data", "sent", "progress"].contains(event)
            if event == "data" { state.dataEvents += 1 }
            if state.events.last != event || !repeatable { state.events.append(event) }
        }
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        note("response")
        state.withLock { $0.response = response }
        completionHandler(.allow)
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        note("redirect \(response.statusCode) to \(request.url?.path ?? "-")")
        completionHandler(refusesRedirects ? nil : request)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        note("data")
        state.withLock { $0.received.append(data) }
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64
    ) {
        note("sent")
    }

    func urlSession(
        _ session: URLSession, downloadTask: URLSessionDownloadTask, didWriteData bytesWritten: Int64,
        totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64
    ) {
        note("progress")
    }

    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
        note("finishedDownloading")
        let contents = (try? Data(contentsOf: location)).map(Observe.summary) ?? "unreadable"
        state.withLock { $0.file = contents }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        note(error == nil ? "complete" : "completeWithError")
        state.withLock {
            $0.error = error
            if $0.response == nil { $0.response = task.response }
        }
        finished.signal()
    }

    func outcome(_ form: String) -> Outcome {
        state.withLock { state in
            var outcome = Outcome(form: form)
            outcome.events = state.events
            outcome.dataEvents = state.dataEvents
            if !state.received.isEmpty || state.file == nil { outcome.body = Observe.summary(state.received) }
            outcome.file = state.file
            outcome.error = state.error.map(Observe.describe)
            if let response = state.response as? HTTPURLResponse { Observe.record(response, into: &outcome) }
            return outcome
        }
    }
}

func url(_ path: String) -> URL { base.appendingPathComponent(path) }

func post(_ path: String) -> URLRequest {
    var request = URLRequest(url: url(path))
    request.httpMethod = "POST"
    request.setValue("text/plain", forHTTPHeaderField: "Content-Type")
    return request
}

let uploadBody = Data((0..<3000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
let uploadFile = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent(
    "url-forms-\(getpid()).bin")
try uploadBody.write(to: uploadFile)
defer { try? FileManager.default.removeItem(at: uploadFile) }

/// Runs a completion-handler form and waits for its handler.
@MainActor func completion(
    _ form: String, _ start: (@escaping @Sendable (Data?, URL?, URLResponse?, (any Error)?) -> Void) -> Void
) -> Outcome {
    let result = Mutex<Outcome?>(nil)
    let done = DispatchSemaphore(value: 0)
    start { data, location, response, error in
        var outcome = Outcome(form: form)
        outcome.events = ["handler"]
        if let data { outcome.body = Observe.summary(data) }
        if let location {
            outcome.file = (try? Data(contentsOf: location)).map(Observe.summary) ?? "unreadable"
        } else if form.hasPrefix("downloadTask") {
            outcome.file = "no file"
        }
        outcome.error = error.map(Observe.describe)
        if let response = response as? HTTPURLResponse { Observe.record(response, into: &outcome) }
        result.withLock { $0 = outcome }
        done.signal()
    }
    guard done.wait(timeout: .now() + 30) == .success else { return Outcome(form: form, error: "no answer in 30 s") }
    return result.withLock { $0! }
}

/// Runs a form on a session whose delegate records every callback.
@MainActor func delegated(
    _ form: String, refusesRedirects: Bool = false, _ start: (URLSession, Recorder) -> Void
) -> Outcome {
    let recorder = Recorder(refusesRedirects: refusesRedirects)
    let configuration = URLSessionConfiguration.default
    // A session with its own configuration takes the protocol as the README shows.
    if let runtime { HTTPDNSURLProtocol.install(runtime.interceptor, into: configuration) }
    let session = URLSession(configuration: configuration, delegate: recorder, delegateQueue: nil)
    defer { session.finishTasksAndInvalidate() }
    start(session, recorder)
    guard recorder.finished.wait(timeout: .now() + 30) == .success else {
        return Outcome(form: form, error: "no completion in 30 s")
    }
    return recorder.outcome(form)
}

/// Runs an async form; `recorder` is the per-task delegate when the form takes one.
@MainActor func asynchronous(
    _ form: String, recorder: Recorder? = nil, _ body: @MainActor () async throws -> (Data?, URL?, URLResponse)
) async -> Outcome {
    var outcome = Outcome(form: form)
    do {
        let (data, location, response) = try await body()
        // The async API returns when its completion runs; a per-task delegate's callbacks were queued before it, on
        // the session's delegate queue, and may still be running.
        if let recorder {
            await withCheckedContinuation { done in URLSession.shared.delegateQueue.addOperation { done.resume() } }
            outcome = recorder.outcome(form)
        }
        if let data { outcome.body = Observe.summary(data) }
        if let location { outcome.file = (try? Data(contentsOf: location)).map(Observe.summary) ?? "unreadable" }
        if let response = response as? HTTPURLResponse { Observe.record(response, into: &outcome) }
    } catch {
        if let recorder {
            await withCheckedContinuation { done in URLSession.shared.delegateQueue.addOperation { done.resume() } }
            outcome = recorder.outcome(form)
        }
        outcome.error = Observe.describe(error)
    }
    return outcome
}

let shared = URLSession.shared
typealias Form = (name: String, run: @MainActor () async -> Outcome)
let forms: [Form] = [
    (
        "dataTask(with:completionHandler:)",
        {
            completion("dataTask(with:completionHandler:)") { done in
                shared.dataTask(with: url("small")) { done($0, nil, $1, $2) }.resume()
            }
        }
    ),
    (
        "dataTask(with:completionHandler:) redirected",
        {
            completion("dataTask(with:completionHandler:) redirected") { done in
                shared.dataTask(with: url("redirect")) { done($0, nil, $1, $2) }.resume()
            }
        }
    ),
    (
        "dataTask POST httpBody",
        {
            completion("dataTask POST httpBody") { done in
                var request = post("echo")
                request.httpBody = uploadBody
                shared.dataTask(with: request) { done($0, nil, $1, $2) }.resume()
            }
        }
    ),
    (
        "dataTask session delegate",
        { delegated("dataTask session delegate") { session, _ in session.dataTask(with: url("big")).resume() } }
    ),
    (
        "dataTask session delegate redirected",
        {
            delegated("dataTask session delegate redirected") { session, _ in
                session.dataTask(with: url("redirect")).resume()
            }
        }
    ),
    (
        "dataTask session delegate redirect refused",
        {
            delegated("dataTask session delegate redirect refused", refusesRedirects: true) { session, _ in
                session.dataTask(with: url("redirect")).resume()
            }
        }
    ),
    (
        "dataTask(with:completionHandler:) on a delegate session, redirected",
        {
            delegated("dataTask(with:completionHandler:) on a delegate session, redirected") { session, recorder in
                session.dataTask(with: url("redirect")) { data, _, _ in
                    recorder.note("handler \(data?.count ?? -1) bytes")
                    recorder.finished.signal()
                }.resume()
            }
        }
    ),
    (
        "data(for:)",
        {
            await asynchronous("data(for:)") {
                let (d, r) = try await shared.data(for: URLRequest(url: url("big"))); return (d, nil, r)
            }
        }
    ),
    (
        "data(from:)",
        {
            await asynchronous("data(from:)") {
                let (d, r) = try await shared.data(from: url("small")); return (d, nil, r)
            }
        }
    ),
    (
        "data(for:delegate:)",
        {
            let recorder = Recorder()
            return await asynchronous("data(for:delegate:)", recorder: recorder) {
                let (d, r) = try await shared.data(for: URLRequest(url: url("big")), delegate: recorder)
                return (d, nil, r)
            }
        }
    ),
    (
        "data(from:delegate:)",
        {
            let recorder = Recorder()
            return await asynchronous("data(from:delegate:)", recorder: recorder) {
                let (d, r) = try await shared.data(from: url("small"), delegate: recorder)
                return (d, nil, r)
            }
        }
    ),
    (
        "downloadTask(with:completionHandler:)",
        {
            completion("downloadTask(with:completionHandler:)") { done in
                shared.downloadTask(with: url("big")) { done(nil, $0, $1, $2) }.resume()
            }
        }
    ),
    (
        "downloadTask session delegate",
        { delegated("downloadTask session delegate") { session, _ in session.downloadTask(with: url("big")).resume() } }
    ),
    (
        "download(for:)",
        {
            await asynchronous("download(for:)") {
                let (f, r) = try await shared.download(for: URLRequest(url: url("small"))); return (nil, f, r)
            }
        }
    ),
    (
        "download(from:)",
        {
            await asynchronous("download(from:)") {
                let (f, r) = try await shared.download(from: url("big")); return (nil, f, r)
            }
        }
    ),
    (
        "download(from:delegate:)",
        {
            let recorder = Recorder()
            return await asynchronous("download(from:delegate:)", recorder: recorder) {
                let (f, r) = try await shared.download(from: url("small"), delegate: recorder)
                return (nil, f, r)
            }
        }
    ),
    (
        "uploadTask(with:from:completionHandler:)",
        {
            completion("uploadTask(with:from:completionHandler:)") { done in
                shared.uploadTask(with: post("echo"), from: uploadBody) { done($0, nil, $1, $2) }.resume()
            }
        }
    ),
    (
        "uploadTask(with:fromFile:completionHandler:)",
        {
            completion("uploadTask(with:fromFile:completionHandler:)") { done in
                shared.uploadTask(with: post("echo"), fromFile: uploadFile) { done($0, nil, $1, $2) }.resume()
            }
        }
    ),
    (
        "uploadTask session delegate",
        {
            delegated("uploadTask session delegate") { session, _ in
                session.uploadTask(with: post("echo"), from: uploadBody).resume()
            }
        }
    ),
    (
        "upload(for:from:)",
        {
            await asynchronous("upload(for:from:)") {
                let (d, r) = try await shared.upload(for: post("echo"), from: uploadBody); return (d, nil, r)
            }
        }
    ),
    (
        "upload(for:fromFile:)",
        {
            await asynchronous("upload(for:fromFile:)") {
                let (d, r) = try await shared.upload(for: post("echo"), fromFile: uploadFile); return (d, nil, r)
            }
        }
    ),
    (
        "dataTask cancelled",
        {
            completion("dataTask cancelled") { done in
                let task = shared.dataTask(with: url("slow")) { done($0, nil, $1, $2) }
                task.resume()
                DispatchQueue.global().asyncAfter(deadline: .now() + 0.3) { task.cancel() }
            }
        }
    ),
    (
        "data(from:) cancelled",
        {
            await asynchronous("data(from:) cancelled") {
                let load = Task { try await shared.data(from: url("slow")) }
                try await Task.sleep(for: .milliseconds(300))
                load.cancel()
                let (d, r) = try await load.value
                return (d, nil, r)
            }
        }
    ),
    (
        "dataTask session delegate cancelled",
        {
            delegated("dataTask session delegate cancelled") { session, _ in
                let task = session.dataTask(with: url("slow"))
                task.resume()
                DispatchQueue.global().asyncAfter(deadline: .now() + 0.3) { task.cancel() }
            }
        }
    ),
    (
        "downloadTask cancel(byProducingResumeData:)",
        {
            completion("downloadTask cancel(byProducingResumeData:)") { done in
                let task = shared.downloadTask(with: url("slow")) { done(nil, $0, $1, $2) }
                task.resume()
                DispatchQueue.global().asyncAfter(deadline: .now() + 0.3) {
                    task.cancel(byProducingResumeData: { if $0 != nil { print("unexpected resume data") } })
                }
            }
        }
    ),
]

if only.contains("--list") {
    for form in forms { print(form.name) }
    exit(0)
}
let encoder = JSONEncoder()
encoder.outputFormatting = [.sortedKeys]
for form in forms where only.isEmpty || only.contains(form.name) {
    let outcome = await form.run()
    print(String(decoding: try encoder.encode(outcome), as: UTF8.self))
}
await runtime?.shutdown()
