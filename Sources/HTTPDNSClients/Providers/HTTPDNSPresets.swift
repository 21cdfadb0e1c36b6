import Foundation
package import HTTPDNSCore

/// Named HTTP DNS services from a presets file (`Config/providers.json`), used only when a user selects one.
///
/// The file is a JSON object from preset name to `{"api": "doh" | "doh-json" | "alibaba" | "tencent",
/// "url": "https://…", "bootstrap": ["IP", …], "notes": "…"}`. `bootstrap` holds the fixed addresses of the
/// URL's host, so the service is reached without asking any other resolver.
package struct HTTPDNSPreset: Sendable, Hashable {
    /// The preset's name, used as the answers' source.
    package var name: String
    /// `doh`, `doh-json`, `alibaba` or `tencent`.
    package var api: String
    /// The endpoint with its bootstrap addresses.
    package var endpoint: HTTPDNSEndpoint
    /// Free text for people (what the service needs, e.g. an account ID).
    var notes: String?

    private struct Entry: Decodable {
        var api: String
        var url: String
        var bootstrap: [String]?
        var notes: String?
    }

    /// The API names a preset may use.
    static let apiNames = ["doh", "doh-json", "alibaba", "tencent"]

    /// Reads every preset of a presets file, sorted by name.
    /// - Throws: `HTTPDNSError.Code.fileError` when the file cannot be read; `HTTPDNSError.Code.invalidConfiguration`
    ///   naming the preset and field for malformed JSON, an unknown API, a bad URL or a bad bootstrap address.
    package static func load(contentsOf path: String) throws(HTTPDNSError) -> [HTTPDNSPreset] {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw HTTPDNSError(
                code: .fileError, message: "cannot read presets file \(path): \(error.localizedDescription)")
        }
        let entries: [String: Entry]
        do {
            entries = try JSONDecoder().decode([String: Entry].self, from: data)
        } catch {
            throw HTTPDNSError(
                code: .invalidConfiguration,
                message: "\(path): not a presets file: \(DoHJSONAnswer.describe(error))"
            )
        }
        var presets: [HTTPDNSPreset] = []
        for (name, entry) in entries.sorted(by: { $0.key < $1.key }) {
            guard apiNames.contains(entry.api) else {
                throw HTTPDNSError(
                    code: .invalidConfiguration,
                    message: "\(path): preset \(name): api must be one of \(apiNames.joined(separator: ", "))"
                )
            }
            var bootstrap: [IPAddress] = []
            for text in entry.bootstrap ?? [] {
                guard let ip = IPAddress(text) else {
                    throw HTTPDNSError(
                        code: .invalidConfiguration,
                        message: "\(path): preset \(name): bootstrap address \(HostName.printable(text)) is not an IP"
                    )
                }
                bootstrap.append(ip)
            }
            do {
                let endpoint = try HTTPDNSEndpoint(entry.url, bootstrapAddresses: bootstrap)
                presets.append(HTTPDNSPreset(name: name, api: entry.api, endpoint: endpoint, notes: entry.notes))
            } catch {
                throw HTTPDNSError(code: .invalidConfiguration, message: "\(path): preset \(name): \(error.message)")
            }
        }
        return presets
    }
}
