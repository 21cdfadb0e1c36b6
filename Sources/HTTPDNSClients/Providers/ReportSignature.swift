import Crypto

/// The signature of a client report (`POST /report?account=ACCOUNT&t=EXPIRY&s=SIGNATURE` to `hostsctl serve`):
/// lower-case hex of HMAC-SHA256 keyed with the account's secret over `report`, the account, the expiry (Unix
/// seconds) and the request body, each on a line of its own (the body last, as sent). Bound to the body, the
/// account and a short window, so that a signed URL seen once cannot carry another report, and the server refuses
/// the same signature twice.
package enum ReportSignature {
    /// The signature of `body` reported for `account` until `expiry`.
    package static func sign(account: String, expiry: Int64, body: [UInt8], secret: String) -> String {
        var message = Array("report\n\(account)\n\(expiry)\n".utf8)
        message += body
        let code = HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: Array(secret.utf8)))
        return Array(code).hexString
    }
}
