import Foundation
import HTTPDNS
import HTTPDNSCAres
import HTTPDNSCore
import Logging

/// `hostsctl resolve --type TYPE` and `-x ADDRESS`: records as dig shows them. A and AAAA come from the pipeline
/// (overrides, hosts, cache, HTTP DNS, c-ares), with the CNAME chain when c-ares gave the answer; every other type
/// goes where `hostsctl serve` relays it, to c-ares's servers (`cares.servers`, or `--server`), and its whole answer
/// section is shown, CNAME records included.
struct RecordReport: Sendable {
    /// What was asked, as given (an address for `-x`).
    var asked: String
    /// The name the query carried (the reverse name for `-x`).
    var name: String
    /// The type asked for.
    var type: UInt16
    /// The answer, or why there is none.
    var outcome: Result<DNSRecordText.Answer, HTTPDNSError>
    /// Where the answer came from: `cares`, or for A and AAAA the pipeline's source label.
    var source: String
    var elapsed: Duration

    /// The response code's mnemonic.
    static func rcodeName(_ code: Int) -> String {
        ["NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED"].indices.contains(code)
            ? ["NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED"][code] : "RCODE\(code)"
    }

    /// Whether the name has records of the type asked for: a NOERROR answer holding one.
    var succeeded: Bool {
        guard case .success(let answer) = outcome else { return false }
        return answer.rcode == 0 && answer.records.contains { $0.type == type || type == 255 }
    }

    /// The CNAME chain from the name asked, when it has links.
    var chain: [String] {
        guard case .success(let answer) = outcome else { return [] }
        let links = DNSRecordText.chain(from: name + ".", in: answer.records)
        return links.count > 1 ? links : []
    }

    /// One table per name: the records, then the status, source and time.
    static func text(_ reports: [RecordReport]) -> String {
        var out = ""
        for report in reports {
            let asked = report.asked == report.name ? report.name : "\(report.asked) (\(report.name))"
            out += "\(asked) \(DNSRecordText.typeName(report.type))\n"
            switch report.outcome {
            case .failure(let error):
                out += "  error \(error.code): \(error.message)\n"
            case .success(let answer):
                if !answer.records.isEmpty {
                    out += TextTable.render(
                        header: ["NAME", "TTL", "TYPE", "DATA"],
                        rows: answer.records.map { [$0.name, "\($0.ttl)", $0.typeName, $0.data] }, indent: 2,
                        rightAligned: [1])
                }
                let chain = report.chain
                if !chain.isEmpty { out += "  chain \(chain.joined(separator: " -> "))\n" }
                let status = rcodeName(answer.rcode)
                let empty =
                    answer.rcode == 0 && !report.succeeded ? " (no \(DNSRecordText.typeName(report.type)) records)" : ""
                out += "  status \(status)\(empty), from \(report.source)\n"
            }
            out += "  time \(String(format: "%.2f", report.elapsed.fractionalMilliseconds)) ms\n\n"
        }
        return out
    }

    /// `--short`: the data of each record, one a line (the chain's targets first, as `dig +short`).
    static func short(_ reports: [RecordReport]) -> String {
        reports.flatMap { report -> [String] in
            guard case .success(let answer) = report.outcome else { return [] }
            return answer.records.map(\.data)
        }.map { HostName.printable($0) + "\n" }.joined()
    }

    /// One JSON object per name.
    static func json(_ reports: [RecordReport]) -> String {
        JSONValue.array(
            reports.map { report in
                var fields: [(String, JSONValue)] = [
                    ("host", .string(report.asked)), ("name", .string(report.name)),
                    ("type", .string(DNSRecordText.typeName(report.type))),
                ]
                switch report.outcome {
                case .success(let answer):
                    fields += [
                        ("status", .string(rcodeName(answer.rcode))),
                        (
                            "records",
                            .array(
                                answer.records.map {
                                    .object([
                                        ("name", .string($0.name)), ("type", .string($0.typeName)),
                                        ("ttl", .number(Double($0.ttl))), ("data", .string($0.data)),
                                    ])
                                })
                        ),
                        ("chain", .array(report.chain.map { .string($0) })), ("error", .null),
                    ]
                case .failure(let error):
                    fields += [
                        ("status", .null), ("records", .array([])), ("chain", .array([])),
                        (
                            "error",
                            .object([("code", .string(error.code.description)), ("message", .string(error.message))])
                        ),
                    ]
                }
                fields += [
                    ("source", .string(report.source)),
                    ("elapsedMs", .number((report.elapsed.fractionalMilliseconds * 1000).rounded() / 1000)),
                ]
                return .object(fields)
            }
        ).serialized()
    }
}

/// Asks c-ares's servers for records of any type, and turns pipeline answers into records.
enum RecordLookup {
    /// Asks `exchange` for `name` of `type`, for each of `names` at once, and returns the reports in order.
    static func lookUp(_ names: [(asked: String, name: String)], type: UInt16, through exchange: CAresResolver) async
        -> [RecordReport]
    {
        await withTaskGroup(of: (Int, RecordReport).self) { group in
            for (index, entry) in names.enumerated() {
                group.addTask {
                    let start = ContinuousClock.now
                    let outcome: Result<DNSRecordText.Answer, HTTPDNSError>
                    do {
                        outcome = .success(try await ask(entry.name, type: type, through: exchange))
                    } catch let error as HTTPDNSError {
                        outcome = .failure(error)
                    } catch {
                        outcome = .failure(HTTPDNSError(code: .cancelled, message: "\(error)", host: entry.name))
                    }
                    return (
                        index,
                        RecordReport(
                            asked: entry.asked, name: entry.name, type: type, outcome: outcome, source: "cares",
                            elapsed: .now - start)
                    )
                }
            }
            var reports = [RecordReport?](repeating: nil, count: names.count)
            for await (index, report) in group { reports[index] = report }
            return reports.compactMap { $0 }
        }
    }

    /// One query and its answer section.
    static func ask(_ text: String, type: UInt16, through exchange: CAresResolver) async throws -> DNSRecordText.Answer
    {
        let name = try HostName(text)
        let answer = try await exchange.send(message: DNSRecordText.query(for: name, type: type))
        guard let read = DNSRecordText.answer(answer) else {
            throw HTTPDNSError(code: .badResponse, message: "the answer cannot be read", host: name.name)
        }
        return read
    }

    /// A pipeline answer as records: the CNAME records of `chain` (c-ares's answer for the same name and type, when
    /// the pipeline's came from c-ares), then an A or AAAA record per address, best first, owned by the chain's end.
    static func records(_ report: ResolveReport, type: UInt16, chain: DNSRecordText.Answer?) -> RecordReport {
        let outcome: Result<DNSRecordText.Answer, HTTPDNSError>
        var source = "-"
        switch report.outcome {
        case .failure(let error):
            outcome = .failure(error)
        case .success(let resolution):
            let links: [DNSRecordText.Record] =
                chain.map { answer in
                    // Owners compared without case, as the chain is followed.
                    let names = Set(
                        DNSRecordText.chain(from: resolution.host + ".", in: answer.records).dropLast().map {
                            $0.lowercased()
                        })
                    return answer.records.filter { $0.type == 5 && names.contains($0.name.lowercased()) }
                } ?? []
            let owner = links.last?.data ?? resolution.host + "."
            let addresses = resolution.addresses.map {
                DNSRecordText.Record(
                    name: owner, type: $0.ip.family == .ipv4 ? 1 : 28, ttl: resolution.ttl, data: $0.ip.description)
            }
            outcome = .success(DNSRecordText.Answer(rcode: 0, records: links + addresses))
            source = ResolveReport.sourceLabel(resolution)
        }
        return RecordReport(
            asked: report.host, name: report.resolution?.host ?? report.host, type: type, outcome: outcome,
            source: source, elapsed: report.elapsed)
    }
}
