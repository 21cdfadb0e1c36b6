#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Foundation
import HTTPDNS

/// How URLSession reports a task's events to the application, which decides whether the protocol can stand in for
/// URLSession's own HTTP support without the application seeing a difference.
///
/// On this platform a protocol reaches the application only through its client (`URLProtocolClient`), and the client
/// passes on less than URLSession's own HTTP protocol delivers: it never hands a download task a file (the file's
/// location is a property only URLSession's own protocols can set), it never gives a per-task delegate of the async
/// API (`data(for:delegate:)`) the body's parts, and an upload task's body lives in the task, out of a protocol's
/// sight. URLSession only asks a protocol `canInit(with: URLRequest)`, never about the task, so the protocol finds out
/// the form when it starts and hands the forms it cannot serve to URLSession's own HTTP protocol.
enum TaskForm: Equatable, Sendable {
    /// A data task whose body goes to a completion handler (`dataTask(with:completionHandler:)`, `data(for:)` and
    /// `data(from:)` without a delegate) or to nobody: the response and the whole body once.
    case collected
    /// A data task whose events go to the session's delegate: the response, each part of the body as it arrives, and
    /// the completion.
    case streamed
    /// A form the client cannot deliver as URLSession would: URLSession's own HTTP support serves it.
    case passThrough(String)

    #if canImport(FoundationNetworking)
        /// The form of `task`. Call it only on the session's work queue (from `startLoading()`), where corelibs
        /// reads and writes the session's task registry.
        ///
        /// Download and upload tasks are told by their class. For a data task, corelibs keeps what its events go to
        /// (completion handler, per-task delegate, the session's delegate) only in the session's private task
        /// registry, which is read here by reflection (``StoredField``, ``EnumCase``). Anything this reading
        /// does not recognise (another version of corelibs laid out differently) is passed through, so the worst a
        /// change there can do is lose the faster path, never a callback.
        /// - Parameter session: The task's session, from ``session(of:)`` (read once by the caller, which needs it too).
        static func of(_ task: URLSessionTask, in session: URLSession?) -> TaskForm {
            if task is URLSessionDownloadTask { return .passThrough("a download task") }
            if task is URLSessionUploadTask { return .passThrough("an upload task") }
            guard task is URLSessionDataTask else { return .passThrough("not a data task") }
            guard let session,
                let registry = registry(of: session),
                let behaviours = StoredField.value("behaviours", of: registry) as? any TaskBehaviours,
                let behaviour = behaviours.behaviour(of: task.taskIdentifier),
                let (name, payload) = EnumCase.of(behaviour)
            else { return .passThrough("the task's behaviour could not be read") }
            switch name {
            case "callDelegate":
                return session.delegate is any URLSessionTaskDelegate ? .streamed : .collected
            case "dataCompletionHandler":
                return .collected
            case "dataCompletionHandlerWithTaskDelegate":
                // (completion, delegate?): the async API with `delegate: nil` is a plain completion handler.
                guard let parts = payload as? (Any, (any URLSessionTaskDelegate)?) else {
                    return .passThrough("an unknown task behaviour")
                }
                return parts.1 == nil ? .collected : .passThrough("a per-task delegate")
            default:
                return .passThrough("an unknown task behaviour")
            }
        }

        /// The session `task` belongs to (corelibs keeps it private), `nil` when it cannot be read.
        static func session(of task: URLSessionTask) -> URLSession? {
            StoredField.value("session", of: task) as? URLSession
        }

        /// A session's task registry (a constant of the session), `nil` when it cannot be read.
        private static func registry(of session: URLSession) -> AnyObject? {
            StoredField.value("taskRegistry", of: session).map { $0 as AnyObject }
        }
    #else
        /// Apple's URL loading system gives a protocol's client every form: each is served.
        static func of(_ task: URLSessionTask, in session: URLSession?) -> TaskForm { .streamed }

        /// Not needed there.
        static func session(of task: URLSessionTask) -> URLSession? { nil }
    #endif
}

#if canImport(FoundationNetworking)
    /// The registry's table of behaviours by task identifier, looked up without copying it (its value type is
    /// private to corelibs).
    private protocol TaskBehaviours {
        func behaviour(of task: Int) -> Any?
    }

    extension Dictionary: TaskBehaviours where Key == Int {
        fileprivate func behaviour(of task: Int) -> Any? { self[task] }
    }
#endif
