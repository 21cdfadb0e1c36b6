/// Runs `body`, then awaits `cleanup`, whether `body` returned or threw: the async `defer` Swift lacks. Tests use it
/// so that servers and resolvers are really stopped before the test ends (a `defer` that starts a task would leave
/// the stop running into the next test).
public func withCleanup(_ body: () async throws -> Void, cleanup: () async -> Void) async throws {
    do {
        try await body()
    } catch {
        await cleanup()
        throw error
    }
    await cleanup()
}
