import Foundation
import HTTPDNS

/// The outcome of resolving one host on the command line, printable as text or JSON.
struct ResolveReport: Sendable {
    var host: String
    var outcome: Result<Resolution, DNSError>
    var elapsed: Duration

    var addresses: [ResolvedAddress] { (try? outcome.get().addresses) ?? [] }

    var error: DNSError? {
        if case .failure(let error) = outcome { return error }
        return nil
    }

    var elapsedMilliseconds: Double {
        let (seconds, attoseconds) = elapsed.components
        return Double(seconds) * 1000 + Double(attoseconds) / 1e15
    }

    /// The JSON array described in the README: `host`, `addresses`, `elapsedMs`, `error` (null on success).
    static func json(_ reports: [ResolveReport]) -> String {
        JSONValue.array(reports.map(\.jsonValue)).serialized()
    }

    var jsonValue: JSONValue {
        let addresses = self.addresses.map { address -> JSONValue in
            .object([
                ("ip", .string(address.ip.description)),
                ("family", .string(address.ip.family.description)),
                ("ttl", .number(Double(address.ttl))),
                ("source", .string(address.source.name)),
            ])
        }
        let error: JSONValue = self.error.map {
            .object([("code", .string($0.code.description)), ("message", .string($0.message))])
        } ?? .null
        return .object([
            ("host", .string(host)),
            ("addresses", .array(addresses)),
            ("elapsedMs", .number((elapsedMilliseconds * 1000).rounded() / 1000)),
            ("error", error),
        ])
    }

    /// One small table per host, then its time or error.
    static func text(_ reports: [ResolveReport]) -> String {
        var out = ""
        for report in reports {
            out += "\(report.host)\n"
            if let error = report.error {
                out += "  error \(error.code): \(error.message)\n"
            } else {
                let rows = report.addresses.map { [$0.ip.description, $0.ip.family.description, "\($0.ttl)", $0.source.name] }
                out += TextTable.render(header: ["ADDRESS", "FAMILY", "TTL", "SOURCE"], rows: rows, indent: 2)
            }
            out += "  time \(String(format: "%.2f", report.elapsedMilliseconds)) ms\n\n"
        }
        return out
    }
}

/// Left-aligned plain-text columns.
enum TextTable {
    static func render(header: [String], rows: [[String]], indent: Int) -> String {
        let all = [header] + rows
        let widths = header.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
        let pad = String(repeating: " ", count: indent)
        return all.map { row in
            pad + row.enumerated().map { index, cell in
                index == row.count - 1 ? cell : cell.padding(toLength: widths[index] + 2, withPad: " ", startingAt: 0)
            }.joined()
        }.joined(separator: "\n") + "\n"
    }
}
