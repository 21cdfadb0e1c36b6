/// Waits until `condition` holds, checking every 10 ms for at most 10 s (scaled by ``TestTiming``); returns whether it
/// held (a caller `#expect`s it).
@discardableResult
public func waitUntil(_ condition: () async -> Bool) async throws -> Bool {
    for _ in 0..<Int(1000 * TestTiming.scale) {
        if await condition() { return true }
        try await Task.sleep(for: .milliseconds(10))
    }
    return false
}
