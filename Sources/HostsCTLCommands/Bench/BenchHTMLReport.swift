import Foundation

/// Renders a ``BenchReport`` as one self-contained page: a summary table, then one inline SVG chart per source
/// (the latency distribution on a logarithmic axis shared by all sources, with p50/p90/p99 marked) and its errors.
/// No scripts, fonts or external assets; the markup is well-formed XML, so it also parses as XHTML.
enum BenchHTMLReport {
    static let chartWidth = 760.0
    static let chartHeight = 240.0
    private static let left = 56.0
    private static let right = 16.0
    private static let top = 16.0
    private static let bottom = 40.0
    private static let buckets = 48

    static func render(_ report: BenchReport, version: String) -> String {
        let setup = report.setup
        let axis = LogAxis(
            report.results.flatMap { result in [result.latenciesMs.first, result.latenciesMs.last].compactMap { $0 } })
        var html = """
            <!DOCTYPE html>
            <html xmlns="http://www.w3.org/1999/xhtml" lang="en">
            <head>
            <meta charset="utf-8"/>
            <title>hostsctl bench report</title>
            <style>
            body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 820px; color: #1d2330; }
            table { border-collapse: collapse; margin: 1em 0; }
            th, td { padding: 4px 10px; text-align: right; border-bottom: 1px solid #dde1e8; }
            th:first-child, td:first-child { text-align: left; }
            section { margin-top: 2em; }
            svg { background: #fafbfc; border: 1px solid #e3e6eb; }
            .bar { fill: #4a7bd0; }
            .mark { stroke-width: 1.5; stroke-dasharray: 4 3; }
            .p50 { stroke: #2e9e5b; } .p90 { stroke: #d08a1e; } .p99 { stroke: #c8382e; }
            .grid { stroke: #e3e6eb; }
            .axis { font-size: 11px; fill: #5b6270; }
            .label { font-size: 11px; fill: #1d2330; paint-order: stroke; stroke: #fafbfc; stroke-width: 3px; }
            .errors { color: #c8382e; }
            </style>
            </head>
            <body>
            <h1>hostsctl bench</h1>

            """
        html +=
            "<p>\(escape(setup.hosts.count == 1 ? "1 host" : "\(setup.hosts.count) hosts")): \(escape(hostList(setup.hosts))); "
        html += "family \(escape(setup.family)); \(setup.concurrency) in flight; \(escape(setup.length)) per source"
        html += setup.warmup.isEmpty ? "" : " after a warm-up of \(setup.warmup)"
        html += ". hostsctl \(escape(version)), \(escape(ISO8601DateFormatter().string(from: setup.date))).</p>\n"
        html += "<table>\n<tr><th>source</th><th>queries</th><th>ok</th><th>queries/s</th>"
        html += "<th>p50 ms</th><th>p90 ms</th><th>p99 ms</th><th>max ms</th><th>errors</th></tr>\n"
        for result in report.results {
            let cells = [
                String(result.queries), BenchReport.percent(result.successRate),
                String(Int(result.queriesPerSecond.rounded())),
                BenchReport.milliseconds(result.percentile(0.5)), BenchReport.milliseconds(result.percentile(0.9)),
                BenchReport.milliseconds(result.percentile(0.99)), BenchReport.milliseconds(result.maximum),
                String(result.queries - result.ok),
            ]
            html +=
                "<tr><td>\(escape(result.source))</td>" + cells.map { "<td>\(escape($0))</td>" }.joined() + "</tr>\n"
        }
        html += "</table>\n"
        for result in report.results {
            html += "<section>\n<h2>\(escape(result.source))</h2>\n"
            html += chart(result, axis: axis)
            if result.errors.isEmpty {
                html += "<p>No errors.</p>\n"
            } else {
                html += "<p class=\"errors\">Errors: "
                html += result.sortedErrors.map { "\(escape($0.code)) \($0.count)" }.joined(separator: ", ") + "</p>\n"
            }
            html += "</section>\n"
        }
        html += "</body>\n</html>\n"
        return html
    }

    /// The latency histogram of one source: the share of successful queries in each bucket of the shared axis.
    static func chart(_ result: BenchResult, axis: LogAxis) -> String {
        let plotWidth = chartWidth - left - right
        let plotHeight = chartHeight - top - bottom
        var counts = [Int](repeating: 0, count: buckets)
        for latency in result.latenciesMs {
            counts[min(buckets - 1, max(0, Int(axis.position(latency) * Double(buckets))))] += 1
        }
        let total = max(result.latenciesMs.count, 1)
        let peak = max(Double(counts.max() ?? 0) / Double(total), 0.01)
        var svg = "<svg class=\"chart\" data-source=\"\(escape(result.source))\" xmlns=\"http://www.w3.org/2000/svg\" "
        svg +=
            "width=\"\(format(chartWidth))\" height=\"\(format(chartHeight))\" viewBox=\"0 0 \(format(chartWidth)) \(format(chartHeight))\" "
        svg += "role=\"img\" aria-label=\"latency distribution of \(escape(result.source))\">\n"
        svg += "<title>Latency distribution: \(escape(result.source))</title>\n"
        // Horizontal grid with the share of queries.
        for step in 0...4 {
            let y = top + plotHeight * (1 - Double(step) / 4)
            let label = String(format: "%.0f%%", peak * Double(step) / 4 * 100)
            svg +=
                "<line class=\"grid\" x1=\"\(format(left))\" y1=\"\(format(y))\" x2=\"\(format(left + plotWidth))\" y2=\"\(format(y))\"/>\n"
            svg +=
                "<text class=\"axis\" x=\"\(format(left - 6))\" y=\"\(format(y + 4))\" text-anchor=\"end\">\(label)</text>\n"
        }
        // Bars.
        let barWidth = plotWidth / Double(buckets)
        for (index, count) in counts.enumerated() where count > 0 {
            let share = Double(count) / Double(total)
            let height = plotHeight * share / peak
            let x = left + Double(index) * barWidth
            svg += "<rect class=\"bar\" x=\"\(format(x + 0.5))\" y=\"\(format(top + plotHeight - height))\" "
            svg += "width=\"\(format(max(barWidth - 1, 0.5)))\" height=\"\(format(height))\">"
            svg +=
                "<title>\(count) queries from \(BenchReport.milliseconds(axis.value(at: Double(index) / Double(buckets)))) ms</title></rect>\n"
        }
        // The latency axis.
        for tick in axis.ticks() {
            let x = left + plotWidth * axis.position(tick)
            svg +=
                "<line class=\"grid\" x1=\"\(format(x))\" y1=\"\(format(top + plotHeight))\" x2=\"\(format(x))\" y2=\"\(format(top + plotHeight + 4))\"/>\n"
            svg +=
                "<text class=\"axis\" x=\"\(format(x))\" y=\"\(format(top + plotHeight + 16))\" text-anchor=\"middle\">\(tickLabel(tick))</text>\n"
        }
        svg +=
            "<text class=\"axis\" x=\"\(format(left + plotWidth / 2))\" y=\"\(format(chartHeight - 6))\" text-anchor=\"middle\">latency (ms, log scale)</text>\n"
        // Percentile marks.
        for (name, fraction) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)] {
            guard let value = result.percentile(fraction) else { continue }
            let x = left + plotWidth * axis.position(value)
            svg +=
                "<line class=\"mark \(name)\" x1=\"\(format(x))\" y1=\"\(format(top))\" x2=\"\(format(x))\" y2=\"\(format(top + plotHeight))\"/>\n"
            svg +=
                "<text class=\"label\" x=\"\(format(x + 3))\" y=\"\(format(top + 10 + (name == "p50" ? 0 : name == "p90" ? 12 : 24)))\">"
            svg += "\(name) \(BenchReport.milliseconds(value))</text>\n"
        }
        if result.latenciesMs.isEmpty {
            svg +=
                "<text class=\"axis\" x=\"\(format(left + plotWidth / 2))\" y=\"\(format(top + plotHeight / 2))\" text-anchor=\"middle\">no successful query</text>\n"
        }
        svg += "</svg>\n"
        return svg
    }

    private static func hostList(_ hosts: [String]) -> String {
        hosts.count <= 8 ? hosts.joined(separator: ", ") : hosts.prefix(8).joined(separator: ", ") + ", …"
    }

    private static func tickLabel(_ value: Double) -> String {
        value >= 1 ? String(format: "%g", value) : String(format: "%g", (value * 1000).rounded() / 1000)
    }

    private static func format(_ value: Double) -> String {
        String(format: "%.1f", value)
    }

    /// Escapes text for XML content and attribute values.
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.count)
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default:
                // Control characters are not allowed in XML 1.0.
                if let scalar = character.unicodeScalars.first, character.unicodeScalars.count == 1,
                    scalar.value < 0x20, scalar != "\n", scalar != "\t"
                {
                    out += "?"
                } else {
                    out.append(character)
                }
            }
        }
        return out
    }
}

/// A logarithmic latency axis from a power-of-ten-aligned minimum to the maximum seen.
struct LogAxis {
    let low: Double
    let high: Double

    init(_ values: [Double]) {
        let positive = values.filter { $0 > 0 && $0.isFinite }
        let smallest = positive.min() ?? 0.1
        let largest = positive.max() ?? 10
        var low = pow(10, (log10(smallest)).rounded(.down))
        var high = pow(10, (log10(largest)).rounded(.up))
        if high <= low { high = low * 10 }
        low = max(low, 0.001)
        self.low = low
        self.high = max(high, low * 10)
    }

    /// Where `value` falls, 0 at the low end to 1 at the high end (clamped).
    func position(_ value: Double) -> Double {
        guard value > low else { return 0 }
        return min(1, log(value / low) / log(high / low))
    }

    /// The value at `position` (0 to 1).
    func value(at position: Double) -> Double {
        low * pow(high / low, position)
    }

    /// 1, 2 and 5 times each power of ten in range.
    func ticks() -> [Double] {
        var ticks: [Double] = []
        var decade = low
        while decade <= high * 1.0001 {
            for factor in [1.0, 2, 5] where decade * factor <= high * 1.0001 {
                ticks.append(decade * factor)
            }
            decade *= 10
        }
        return ticks
    }
}
