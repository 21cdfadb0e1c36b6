import Testing

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore

/// Expects `body` to fail with an ``HTTPDNSError`` of `code`, and returns the error.
@discardableResult
func expectDNSError(
    _ code: HTTPDNSError.Code,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> Resolution
) async -> HTTPDNSError? {
    do {
        let answer = try await body()
        Issue.record("expected \(code), got \(answer)", sourceLocation: sourceLocation)
    } catch let error as HTTPDNSError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected \(code), got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}
