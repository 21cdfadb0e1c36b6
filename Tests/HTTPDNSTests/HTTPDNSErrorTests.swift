import CAres
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore

@Suite("DNS errors")
struct DNSErrorTests {
    /// Every c-ares status of 1.18 and the code it must map to.
    static let table: [(Int32, HTTPDNSError.Code)] = [
        (ARES_ENODATA, .noData), (ARES_EFORMERR, .formatError), (ARES_ESERVFAIL, .serverFailure),
        (ARES_ENOTFOUND, .notFound), (ARES_ENOTIMP, .notImplemented), (ARES_EREFUSED, .refused),
        (ARES_EBADQUERY, .badQuery), (ARES_EBADNAME, .badName), (ARES_EBADFAMILY, .badFamily),
        (ARES_EBADRESP, .badResponse), (ARES_ECONNREFUSED, .connectionFailed), (ARES_ETIMEOUT, .timeout),
        (ARES_EOF, .endOfFile), (ARES_EFILE, .fileError), (ARES_ENOMEM, .noMemory), (ARES_EDESTRUCTION, .shutdown),
        (ARES_EBADSTR, .badString), (ARES_EBADFLAGS, .badFlags), (ARES_ENONAME, .noName),
        (ARES_EBADHINTS, .badHints), (ARES_ENOTINITIALIZED, .notInitialized), (ARES_ECANCELLED, .cancelled),
        (ARES_ESERVICE, .badService), (9999, .internalError),
    ]

    @Test("every c-ares status maps to its code")
    func mapping() {
        #expect(HTTPDNSError.Code(aresStatus: ARES_SUCCESS) == nil)
        for (status, code) in Self.table {
            #expect(HTTPDNSError.Code(aresStatus: status) == code, "status \(status)")
        }
    }

    @Test("the table covers every code except the package's own")
    func coverage() {
        let mapped = Set(Self.table.map(\.1.value))
        let own: Set<HTTPDNSError.Code.Value> = [
            .invalidServer, .invalidConfiguration, .questionMismatch, .responseTooLarge, .httpStatus, .tlsFailure,
            .privateAddress, .signatureExpired, .invalidSignature, .decryptionFailed, .notCached, .noRoute,
            // The fronts' codes.
            .badURL, .unsupportedURL, .resolutionFailed, .connectionFailed, .connectionLost, .certificateRejected,
            .tooManyRedirects, .requestBodyTooLarge, .invalidRequest, .insecureRedirect,
            // The server's.
            .listenFailed,
        ]
        #expect(mapped.union(own) == Set(HTTPDNSError.Code.Value.allCases))
    }

    @Test("errors carry host and servers and describe themselves")
    func context() {
        let error = HTTPDNSError(aresStatus: ARES_ETIMEOUT, host: "a.test", servers: ["127.0.0.1:53"])
        #expect(error.code == .timeout)
        #expect(error.code.description == "timeout")
        #expect(error.description.contains("host a.test"))
        #expect(error.description.contains("servers 127.0.0.1:53"))
    }
}
