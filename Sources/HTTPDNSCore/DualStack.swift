package import Logging

/// Merges the answers of parallel `A` and `AAAA` lookups into one, for every resolver that asks separately.
package enum DualStack {
    /// IPv4 addresses first, then IPv6. If one family fails and the other has addresses, those are returned;
    /// if both fail, the more telling error wins (``HTTPDNSError/Code/notFound`` over ``HTTPDNSError/Code/noData``
    /// over the rest). Cancellation always wins.
    package static func merge(
        _ v4: Result<[ResolvedAddress], any Error>,
        _ v6: Result<[ResolvedAddress], any Error>,
        host: HostName,
        logger: Logger
    ) throws -> [ResolvedAddress] {
        switch (v4, v6) {
        case (.success(let a), .success(let b)):
            return a + b
        case (.failure(let error as CancellationError), _), (_, .failure(let error as CancellationError)):
            throw error
        case (.success(let a), .failure(let error)), (.failure(let error), .success(let a)):
            if let error = error as? HTTPDNSError, error.code != .noData {
                logger.debug("one address family failed", metadata: ["host": "\(host)", "error": "\(error)"])
            }
            return a
        case (.failure(let first), .failure(let second)):
            let codes = [first, second].compactMap { ($0 as? HTTPDNSError)?.code }
            if codes.contains(.notFound) { throw [first, second].first { ($0 as? HTTPDNSError)?.code == .notFound }! }
            if codes.allSatisfy({ $0 == .noData }) { throw first }
            throw (first as? HTTPDNSError)?.code == .noData ? second : first
        }
    }
}

extension Result where Failure == any Error {
    /// Captures the outcome of an async throwing call.
    package init(catching body: () async throws -> Success) async {
        do {
            self = .success(try await body())
        } catch {
            self = .failure(error)
        }
    }
}

/// How addresses of the two families are ordered in answers that hold both (settings key `dualStack.policy`).
public enum DualStackPolicy: String, Sendable, Hashable, CaseIterable {
    /// IPv4 addresses first.
    case preferIPv4
    /// IPv6 addresses first.
    case preferIPv6
    /// Interleaved by measured score.
    case fastest
}
