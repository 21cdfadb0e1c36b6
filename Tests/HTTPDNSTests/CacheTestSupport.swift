import Foundation
import Synchronization
import Testing
import TestSupport

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore

/// A clock the test moves by hand; wall time and the boot clock move with it. The wall clock can also be stepped
/// on its own (as NTP or a user steps it) and the machine "rebooted" (a new boot id, the boot clock from zero).
final class ManualClock: Sendable {
    private struct State {
        var offset: Duration = .zero
        var wallStep = 0.0
        var boot = 1
        var bootStartedAt: Duration = .zero
    }

    private let state = Locked(State())
    let wallStart: Double

    init(wallStart: Double = 1_800_000_000) {
        self.wallStart = wallStart
    }

    var nanoseconds: Int64 {
        let (seconds, attoseconds) = state.withLock { $0.offset }.components
        return 1_000_000_000_000 + seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    func advance(_ duration: Duration) {
        state.withLock { $0.offset += duration }
    }

    /// Steps the wall clock alone, forward or (negative) back.
    func stepWall(by seconds: Double) {
        state.withLock { $0.wallStep += seconds }
    }

    /// A restart: a new boot id, and the boot clock starts again.
    func reboot() {
        state.withLock {
            $0.boot += 1
            $0.bootStartedAt = $0.offset + .seconds(wallStart - 1_700_000_000)
        }
    }

    var cacheClock: CacheClock {
        let bootID = state.withLock { "boot-\($0.boot)" }
        return CacheClock(
            monotonicNanoseconds: { [self] in nanoseconds },
            wallSeconds: { [self] in
                state.withLock { wallStart + Double($0.offset.components.seconds) + $0.wallStep }
            },
            // Clocks made with a later wall start are a later process of the same boot.
            bootSeconds: { [self] in
                state.withLock { wallStart - 1_700_000_000 + ($0.offset - $0.bootStartedAt).fractionalSeconds }
            },
            bootID: bootID
        )
    }
}

/// An upstream whose answers, failures and pace the test controls, counting every query it gets.
final class FakeUpstream: HostNameResolver {
    enum Behavior: Sendable {
        case answer([String: [String]], ttl: UInt32)
        case fail(HTTPDNSError.Code)
    }

    private struct State {
        var behavior: Behavior
        var calls = 0
        var held: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextHold = 0
        var holding = false
    }

    private let state: Locked<State>
    let source: ResolutionSource

    init(_ behavior: Behavior, source: ResolutionSource = .cares) {
        self.state = Locked(State(behavior: behavior))
        self.source = source
    }

    var calls: Int { state.withLock { $0.calls } }
    var waiting: Int { state.withLock { $0.held.count } }

    func set(_ behavior: Behavior) { state.withLock { $0.behavior = behavior } }

    /// Queries wait until ``release()``.
    func hold() { state.withLock { $0.holding = true } }

    /// Lets every waiting query go on, and later ones pass at once.
    func release() {
        let held = state.withLock { state in
            state.holding = false
            defer { state.held = [:] }
            return state.held
        }
        for continuation in held.values { continuation.resume() }
    }

    /// Like a real upstream, a held query ends at once with `CancellationError` when its task is cancelled.
    func resolve(_ host: HostName, family: AddressFamily) async throws -> Resolution {
        let id = state.withLock { state in
            state.calls += 1
            defer { state.nextHold += 1 }
            return state.nextHold
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let wait = state.withLock { state in
                    if state.holding, !Task.isCancelled { state.held[id] = continuation }
                    return state.held[id] != nil
                }
                if !wait { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.held.removeValue(forKey: id) }?.resume()
        }
        try Task.checkCancellation()
        switch state.withLock({ $0.behavior }) {
        case .fail(let code):
            throw HTTPDNSError(code: code, message: "fake \(code)", host: host.name)
        case .answer(let table, let ttl):
            guard let texts = table[host.name] else {
                throw HTTPDNSError(code: .notFound, message: "fake NXDOMAIN", host: host.name)
            }
            let ips = texts.compactMap(IPAddress.init).filter { family == .any || $0.family == family }
            guard !ips.isEmpty else { throw HTTPDNSError(code: .noData, message: "fake no data", host: host.name) }
            return Resolution(host: host.name, addresses: ips.map { ResolvedAddress(ip: $0, ttl: ttl, source: source) })
        }
    }
}

func ip(_ text: String) -> IPAddress { IPAddress(text)! }
func name(_ text: String) -> HostName { try! HostName(text) }

/// Waits until `condition` holds, checking every millisecond for at most 30 s (scaled by ``TestTiming``); records an
/// issue when it never does.
func eventually(_ condition: () -> Bool, sourceLocation: SourceLocation = #_sourceLocation) async {
    let deadline = ContinuousClock.now + TestTiming.scaled(.seconds(30))
    while !condition() {
        guard ContinuousClock.now < deadline else {
            Issue.record("the condition did not hold in time", sourceLocation: sourceLocation)
            return
        }
        try? await Task.sleep(for: .milliseconds(1))
    }
}
