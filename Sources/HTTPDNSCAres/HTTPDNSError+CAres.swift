import CAres
import HTTPDNSCore

extension HTTPDNSError.Code {
    /// Maps a c-ares status code (`ARES_E…`) to an error code. This is the only place that does.
    /// - Returns: `nil` for `ARES_SUCCESS`.
    init?(aresStatus status: Int32) {
        switch status {
        case ARES_SUCCESS: return nil
        case ARES_ENODATA: self = .noData
        case ARES_EFORMERR: self = .formatError
        case ARES_ESERVFAIL: self = .serverFailure
        case ARES_ENOTFOUND: self = .notFound
        case ARES_ENOTIMP: self = .notImplemented
        case ARES_EREFUSED: self = .refused
        case ARES_EBADQUERY: self = .badQuery
        case ARES_EBADNAME: self = .badName
        case ARES_EBADFAMILY: self = .badFamily
        case ARES_EBADRESP: self = .badResponse
        case ARES_ECONNREFUSED: self = .connectionFailed
        case ARES_ETIMEOUT: self = .timeout
        case ARES_EOF: self = .endOfFile
        case ARES_EFILE: self = .fileError
        case ARES_ENOMEM: self = .noMemory
        case ARES_EDESTRUCTION: self = .shutdown
        case ARES_EBADSTR: self = .badString
        case ARES_EBADFLAGS: self = .badFlags
        case ARES_ENONAME: self = .noName
        case ARES_EBADHINTS: self = .badHints
        case ARES_ENOTINITIALIZED: self = .notInitialized
        case ARES_ECANCELLED: self = .cancelled
        case ARES_ESERVICE: self = .badService
        default: self = .internalError
        }
    }
}

extension HTTPDNSError {
    /// Creates the error for a failed c-ares call, with c-ares's own description of the status.
    init(aresStatus status: Int32, host: String?, servers: [String]) {
        let code = Code(aresStatus: status) ?? .internalError
        let text =
            status == ARES_ECONNREFUSED
            ? "no server gave a usable answer: each was unreachable, refused or failed"
            : ares_strerror(status).map { String(cString: $0) } ?? "unknown c-ares status"
        self.init(code: code, message: "\(text) (c-ares status \(status))", host: host, servers: servers)
    }
}
