public import HTTPDNS

/// Forwards DNS messages of other types (MX, TXT, SRV, HTTPS, …) through c-ares to its servers, with c-ares's
/// timeouts, retries and server rotation.
public struct CAresForwarder: DNSMessageForwarder {
    /// The resolver whose channel carries the messages.
    public let resolver: CAresResolver

    /// Forwards through `resolver`.
    public init(resolver: CAresResolver) {
        self.resolver = resolver
    }

    /// Sends `query` and returns the upstream's answer (its ID is c-ares's; the service puts the client's back).
    public func forward(_ query: [UInt8]) async throws -> [UInt8] {
        try await resolver.send(message: query)
    }
}
