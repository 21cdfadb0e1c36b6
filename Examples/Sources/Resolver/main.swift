// A README sample, compiled by CI (`swift build --package-path Examples`); ReadmeSampleTests keeps the texts equal.
import HTTPDNS
import Logging

// One resolver per process is plenty: it owns one c-ares channel and one event thread.
let resolver = try CAresResolver(
    configuration: .init(
        servers: [try ServerAddress(parsing: "127.0.0.1:5353")],  // empty (the default): /etc/resolv.conf
        timeout: .seconds(2),                                    // first try; c-ares doubles it per round
        tries: 2
    ),
    logger: Logger(label: "httpdns")                             // optional; the default logs nothing
)

do {
    let answer = try await resolver.resolve("api.example.com", family: .any)
    for address in answer.addresses {
        print(address.ip, address.ttl, address.source)           // 192.0.2.10 300 cares
    }
} catch let error as HTTPDNSError {
    print(error.code, error.message)                            // notFound, noData, timeout, refused, …
}

resolver.shutdown()  // also happens when the resolver is released

try await withThrowingTaskGroup(of: Resolution.self) { group in
    for name in ["a.example", "b.example", "c.example"] {
        group.addTask(executorPreference: resolver.executor) {
            try await resolver.resolve(name, family: .ipv4)
        }
    }
    for try await answer in group { print(answer.host, answer.addresses.map(\.ip)) }
}
