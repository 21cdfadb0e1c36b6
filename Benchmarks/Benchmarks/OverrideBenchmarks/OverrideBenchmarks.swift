import Benchmark
@_spi(Benchmarks) import HTTPDNS

// The overrides layer: parsing a large hosts file and looking names up in a large table with wildcards.
// No servers needed.

/// A 100,000-line hosts file: half exact names, half wildcards, IPv4 and IPv6, with comments.
let hostsText: [UInt8] = {
    var text = "# generated for the benchmark\n"
    for index in 0..<100_000 {
        let ip =
            index % 4 == 0
            ? "2001:db8::\(String(index >> 16, radix: 16)):\(String(index & 0xffff, radix: 16))"
            : "10.\(index >> 16 & 255).\(index >> 8 & 255).\(index & 255)"
        let name = index % 2 == 0 ? "host\(index).example.test" : "*.zone\(index).example.test"
        text += "\(ip)\t\(name)\(index % 10 == 0 ? "  # comment" : "")\n"
    }
    return Array(text.utf8)
}()

/// Queries: exact hits, wildcard hits two labels deep, and misses, in equal parts.
func lookupNames() throws -> [HostName] {
    try (0..<3_000).map { index -> HostName in
        switch index % 3 {
        case 0: try HostName("host\(index * 2 % 100_000).example.test")
        case 1: try HostName("a.b.zone\((index * 2 + 1) % 100_000).example.test")
        default: try HostName("miss\(index).other.test")
        }
    }
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(warmupIterations: 1, maxDuration: .seconds(10), maxIterations: 20)

    Benchmark(
        "overrides: parse a 100,000-line hosts file", configuration: .init(metrics: [.wallClock, .mallocCountTotal])
    ) {
        benchmark in
        benchmark.startMeasurement()
        let file = HostsFile(parsing: hostsText, file: "bench")
        let table = file.table
        benchmark.stopMeasurement()
        precondition(file.diagnostics.isEmpty && table.count == 100_000)
        blackHole(table)
    }

    Benchmark(
        "overrides: lookup in a 100,000-entry table with wildcards",
        configuration: .init(metrics: [.wallClock, .throughput], scalingFactor: .mega)
    ) { benchmark in
        let table = HostsFile(parsing: hostsText).table
        let names = try lookupNames()
        var hits = 0
        benchmark.startMeasurement()
        for index in benchmark.scaledIterations {
            if table.lookup(names[index % names.count]) != nil { hits += 1 }
        }
        benchmark.stopMeasurement()
        precondition(hits > 0)
        blackHole(hits)
    }

    Benchmark(
        "overrides: lookup through HostOverrides (locked, run-time and file tables)",
        configuration: .init(metrics: [.wallClock, .throughput], scalingFactor: .mega)
    ) { benchmark in
        let overrides = HostOverrides(file: HostsFile(parsing: hostsText))
        let names = try lookupNames()
        var hits = 0
        benchmark.startMeasurement()
        for index in benchmark.scaledIterations {
            if overrides.lookup(names[index % names.count]) != nil { hits += 1 }
        }
        benchmark.stopMeasurement()
        blackHole(hits)
    }
}
