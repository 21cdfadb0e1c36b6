import AsyncHTTPClient
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
package import NIOSSL
import Synchronization
package import HTTPDNSCore

extension TLSConfiguration {
    /// A client configuration that verifies certificates fully, with the CA certificates in the PEM files at
    /// `additionalTrustRoots` added to the system roots. Shared by every HTTP client of the package; there is
    /// deliberately no way to turn verification off.
    /// - Throws: `HTTPDNSError.Code.invalidConfiguration` when a file cannot be read or holds no certificate.
    package static func verifiedClient(additionalTrustRoots: [String]) throws(HTTPDNSError) -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.certificateVerification = .fullVerification
        // TLS 1.0 and 1.1 are deprecated (RFC 8996): never offered, for HTTP DNS and intercepted traffic alike.
        tls.minimumTLSVersion = .tlsv12
        var extraRoots: [NIOSSLCertificate] = []
        for path in additionalTrustRoots {
            let certificates: [NIOSSLCertificate]
            do {
                certificates = try NIOSSLCertificate.fromPEMFile(path)
            } catch {
                throw HTTPDNSError(
                    code: .invalidConfiguration, message: "cannot read trust root file \(path): \(error)", source: error
                )
            }
            guard !certificates.isEmpty else {
                throw HTTPDNSError(code: .invalidConfiguration, message: "trust root file \(path) holds no certificate")
            }
            extraRoots += certificates
        }
        if !extraRoots.isEmpty { tls.additionalTrustRoots = [.certificates(extraRoots)] }
        return tls
    }
}
