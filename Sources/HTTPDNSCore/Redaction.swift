import Foundation

/// Keeps secrets out of errors, traces and logs: the password of a URL's user information is replaced, so
/// `https://user:secret@api.example.com/` is reported as `https://user:***@api.example.com/`.
package enum Redaction {
    /// `text` with the URL password replaced by `***`; text that is not a URL with a password is returned as it is.
    package static func url(_ text: String) -> String {
        guard text.utf8.contains(UInt8(ascii: "@")), var components = URLComponents(string: text),
            components.password != nil
        else { return text }
        components.percentEncodedPassword = "***"
        return components.string ?? text
    }
}
