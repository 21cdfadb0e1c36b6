import Synchronization
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore

/// The c-ares resolver against a real dnsmasq on 127.0.0.1 (see `TestSupport.DNSMasq`).
@Suite("c-ares resolver")
struct CAresResolverTests {
    static func resolver(_ servers: [ServerAddress], timeout: Duration = .seconds(2), tries: Int = 2) throws
        -> CAresResolver
    {
        try CAresResolver(configuration: .init(servers: servers, timeout: timeout, tries: tries))
    }

    static func ips(_ resolution: Resolution) -> [String] { resolution.addresses.map(\.ip.description) }

    @Test("A, AAAA and both, with TTLs and source")
    func families() async throws {
        try await DNSMasq.with { server in
            let resolver = try Self.resolver([server.address])
            let v4 = try await resolver.resolve(try HostName("multi.test"), family: .ipv4)
            #expect(Set(Self.ips(v4)) == Set(TestZone.multiV4))
            #expect(v4.addresses.allSatisfy { $0.ttl == 300 && $0.source == .cares && $0.ip.family == .ipv4 })

            let v6 = try await resolver.resolve(try HostName("multi.test"), family: .ipv6)
            #expect(Set(Self.ips(v6)) == Set(TestZone.multiV6))
            #expect(v6.addresses.allSatisfy { $0.ttl == 300 && $0.ip.family == .ipv6 })

            let both = try await resolver.resolve(try HostName("MULTI.test."), family: .any)
            #expect(both.host == "multi.test")
            #expect(Set(Self.ips(both)) == Set(TestZone.multiV4 + TestZone.multiV6))
            #expect(both.addresses.prefix(2).allSatisfy { $0.ip.family == .ipv4 }, "IPv4 first")
        }
    }

    @Test("a CNAME chain resolves to the target's addresses with the smallest TTL on the chain")
    func cnameChain() async throws {
        try await DNSMasq.with { server in
            let resolver = try Self.resolver([server.address])
            let answer = try await resolver.resolve(try HostName("alias.test"), family: .any)
            #expect(Set(Self.ips(answer)) == Set(TestZone.multiV4 + TestZone.multiV6))
            #expect(answer.addresses.allSatisfy { $0.ttl == 60 })
        }
    }

    @Test("NXDOMAIN is notFound; NODATA and a CNAME-only answer are noData")
    func negativeAnswers() async throws {
        try await DNSMasq.with { server in
            let resolver = try Self.resolver([server.address])
            await #expect(throws: HTTPDNSError.self) {
                try await resolver.resolve(try HostName("nope.test"), family: .ipv4)
            }
            do {
                _ = try await resolver.resolve(try HostName("nope.test"), family: .any)
                Issue.record("expected NXDOMAIN")
            } catch let error as HTTPDNSError {
                #expect(error.code == .notFound)
                #expect(error.host == "nope.test")
                #expect(error.servers == [server.address.description])
            }
            await expectDNSError(.noData) { try await resolver.resolve(try HostName("v4only.test"), family: .ipv6) }
            await expectDNSError(.noData) { try await resolver.resolve(try HostName("v6only.test"), family: .ipv4) }
            // dnsmasq answers NOERROR with only the CNAME when the target is unknown.
            await expectDNSError(.noData) { try await resolver.resolve(try HostName("dangling.test"), family: .ipv4) }
            // One family answering is enough for .any.
            let v4only = try await resolver.resolve(try HostName("v4only.test"), family: .any)
            #expect(Self.ips(v4only) == ["192.0.2.10"])
            #expect(v4only.addresses.first?.ttl == 120)
            let v6only = try await resolver.resolve(try HostName("v6only.test"), family: .any)
            #expect(Self.ips(v6only) == ["2001:db8::10"])
            #expect(v6only.addresses.first?.ttl == 45)
        }
    }

    @Test("a server that refuses gives refused")
    func refused() async throws {
        try await DNSMasq.with { server in
            let resolver = try Self.resolver([server.address])
            // dnsmasq refuses names outside its local zone because it has no upstream.
            await expectDNSError(.refused) {
                try await resolver.resolve(try HostName("outside.example"), family: .ipv4)
            }
        }
    }

    @Test("a server that never answers gives timeout")
    func timeout() async throws {
        let silent = try BoundUDPSocket()
        defer { silent.close() }
        let resolver = try Self.resolver([silent.address], timeout: .milliseconds(150), tries: 2)
        await expectDNSError(.timeout) { try await resolver.resolve(try HostName("multi.test"), family: .any) }
    }

    @Test(
        "a query no server answers lasts as long as longestQuery says (c-ares doubles the per-try timeout every round): a server facing clients holds an abandoned lookup's place that long"
    )
    func longestQuery() async throws {
        let silent = try BoundUDPSocket()
        defer { silent.close() }
        // One server, 100 ms, 3 tries: tries at 0, 100 and 300 ms, given up at 700 ms, not at 300 (timeout × tries).
        let resolver = try Self.resolver([silent.address], timeout: .milliseconds(100), tries: 3)
        #expect(resolver.longestQuery == .milliseconds(700))
        #expect(CAresResolver.longestQuery(timeout: .seconds(2), tries: 2, servers: 3) == .seconds(18))
        let started = ContinuousClock.now
        await expectDNSError(.timeout) { try await resolver.resolve(try HostName("slow.test"), family: .ipv4) }
        let lasted = ContinuousClock.now - started
        // Only a lower bound: a loaded machine makes it longer, never shorter.
        #expect(lasted >= resolver.longestQuery - .milliseconds(20), "gave up after \(lasted)")
        #expect(silent.questions(during: .milliseconds(50)) == ["slow.test", "slow.test", "slow.test"], "one per try")
    }

    @Test("a closed port gives connectionFailed")
    func closedPort() async throws {
        let port = try FreePort.udp()
        let resolver = try Self.resolver([ServerAddress(ip: IPAddress(ipv4: 127, 0, 0, 1), port: port)], tries: 1)
        await expectDNSError(.connectionFailed) { try await resolver.resolve(try HostName("a.test"), family: .ipv4) }
    }

    @Test("a dead server is skipped in favour of the next one")
    func failover() async throws {
        let silent = try BoundUDPSocket()
        defer { silent.close() }
        try await DNSMasq.with { server in
            let resolver = try Self.resolver([silent.address, server.address], timeout: .seconds(1), tries: 1)
            let answer = try await resolver.resolve(try HostName("v4only.test"), family: .ipv4)
            #expect(Self.ips(answer) == ["192.0.2.10"])
        }
    }

    @Test("IP literals, localhost and bad names need no server")
    func localAnswers() async throws {
        let silent = try BoundUDPSocket()
        defer { silent.close() }
        // Every query to this resolver would take an hour to time out: answers here must come without one.
        let resolver = try Self.resolver([silent.address], timeout: .seconds(3600), tries: 1)
        let literal = try await resolver.resolve("192.0.2.7", family: .any)
        #expect(
            literal.addresses == [
                ResolvedAddress(ip: IPAddress(ipv4: 192, 0, 2, 7), ttl: ResolvedAddress.maximumTTL, source: .literal)
            ])
        let v6 = try await resolver.resolve("[2001:DB8::7]", family: .ipv6)
        #expect(Self.ips(v6) == ["2001:db8::7"])
        await expectDNSError(.noData) { try await resolver.resolve("192.0.2.7", family: .ipv6) }
        let local = try await resolver.resolve("localhost.", family: .any)
        #expect(Self.ips(local) == ["127.0.0.1", "::1"])
        #expect(local.addresses.allSatisfy { $0.source == .localhost })
        for bad in ["", "a..b", String(repeating: "x", count: 254), "a\u{0}b", "a\nb", "\u{7F}"] {
            await expectDNSError(.badName) { try await resolver.resolve(bad, family: .any) }
        }
        #expect(resolver.loop.wakeups.load(ordering: .relaxed) == 0, "nothing was sent")
    }

    @Test("cancelling one query ends only that query, at once")
    func cancellation() async throws {
        let silent = try BoundUDPSocket()
        defer { silent.close() }
        // The silent server holds both queries until the test answers one by hand; the timeout is far away, so
        // nothing here depends on how fast a loaded machine runs the test.
        let resolver = try Self.resolver([silent.address], timeout: .seconds(60), tries: 1)
        let cancelled = Task { try await resolver.resolve(try HostName("one.test"), family: .ipv4) }
        let survivorDone = Counter()
        let survivor = Task {
            defer { survivorDone.increment() }
            return try await resolver.resolve(try HostName("two.test"), family: .ipv4)
        }
        try await Task.sleep(for: .milliseconds(100))
        cancelled.cancel()
        let first = await cancelled.result
        #expect(throws: CancellationError.self) { try first.get() }
        // The cancelled caller returned without waiting for c-ares, whose queries are both still open.
        #expect(survivorDone.value == 0)
        // The other query on the same channel is untouched: it takes the answer the server now sends.
        try silent.answer("two.test", withIPv4: [192, 0, 2, 77])
        let answer = try await survivor.value
        #expect(Self.ips(answer) == ["192.0.2.77"])
        #expect(answer.addresses.first?.ttl == 60)
    }

    @Test("cancelling some of many queries leaves the others answered")
    func partialCancellation() async throws {
        try await DNSMasq.with { server in
            let resolver = try Self.resolver([server.address])
            let tasks = (0..<100).map { index in
                Task { try await resolver.resolve(try HostName("n\(index).test"), family: .ipv4) }
            }
            for (index, task) in tasks.enumerated() where index % 3 == 0 { task.cancel() }
            for (index, task) in tasks.enumerated() {
                switch await task.result {
                case .success(let answer):
                    #expect(Self.ips(answer) == [TestZone.bulkAddress(index)])
                case .failure(let error):
                    #expect(index % 3 == 0 && error is CancellationError, "query \(index): \(error)")
                }
            }
        }
    }

    @Test("10,000 queries with 500 in flight all get their own right answer")
    func concurrency() async throws {
        try await DNSMasq.with { server in
            // 500 queries in one burst overflow dnsmasq's UDP receive buffer (the kernel's default, 208 KiB; the
            // client's is 4 MiB): /proc/net/snmp's Udp RcvbufErrors grows by 250-290 per run, and the lost queries
            // are retried after the 2 s timeout. With 2 tries a query lost twice failed the test (once in four
            // fresh-clone runs). Four tries let the retries, which come in ever smaller bursts, get through; the
            // test is about every answer reaching its own caller, not about a server that drops datagrams.
            let resolver = try Self.resolver([server.address], tries: 4)
            let total = 10_000
            let inFlight = 500
            let checked = try await withThrowingTaskGroup(of: Bool.self) { group in
                var next = 0
                var correct = 0
                func add() {
                    let index = next % TestZone.bulkNames
                    next += 1
                    group.addTask {
                        let answer = try await resolver.resolve(try HostName("n\(index).test"), family: .ipv4)
                        return Self.ips(answer) == [TestZone.bulkAddress(index)] && answer.addresses[0].ttl == 600
                    }
                }
                for _ in 0..<inFlight { add() }
                while let ok = try await group.next() {
                    if ok { correct += 1 }
                    if next < total { add() }
                }
                return correct
            }
            #expect(checked == total)
        }
    }

    @Test("tasks that prefer the resolver's executor run on its thread and get every answer")
    func executorPreference() async throws {
        try await DNSMasq.with { server in
            let resolver = try Self.resolver([server.address])
            let results = try await withThrowingTaskGroup(of: (Bool, Bool).self) { group in
                for worker in 0..<50 {
                    group.addTask(executorPreference: resolver.executor) {
                        var correct = true
                        var onLoop = resolver.loop.isLoopThread
                        for round in 0..<20 {
                            let index = (worker * 20 + round) % TestZone.bulkNames
                            let answer = try await resolver.resolve(try HostName("n\(index).test"), family: .ipv4)
                            correct = correct && Self.ips(answer) == [TestZone.bulkAddress(index)]
                            onLoop = onLoop && resolver.loop.isLoopThread
                        }
                        return (correct, onLoop)
                    }
                }
                var all: [(Bool, Bool)] = []
                for try await result in group { all.append(result) }
                return all
            }
            #expect(results.count == 50)
            #expect(results.allSatisfy { $0.0 }, "every answer matches its name")
            #expect(results.allSatisfy { $0.1 }, "every task ran on the c-ares thread")
            #expect(!resolver.loop.isLoopThread)
        }
    }

    @Test("tasks on the resolver's executor carry on after shutdown")
    func executorAfterShutdown() async throws {
        let silent = try BoundUDPSocket()
        defer { silent.close() }
        let resolver = try Self.resolver([silent.address], timeout: .seconds(3600), tries: 1)
        let task = Task(executorPreference: resolver.executor) { () -> HTTPDNSError.Code? in
            do {
                _ = try await resolver.resolve(try HostName("a.test"), family: .ipv4)
                return nil
            } catch {
                // Runs after the loop is gone: this continuation must be scheduled somewhere else.
                return (error as? HTTPDNSError)?.code
            }
        }
        try await Task.sleep(for: .milliseconds(100))
        resolver.shutdown()
        let code = await task.value
        #expect(code == .shutdown)
        let late = Task(executorPreference: resolver.executor) { 42 }
        let value = await late.value
        #expect(value == 42)
    }

    @Test("an idle resolver does not wake up")
    func idle() async throws {
        try await DNSMasq.with { server in
            let resolver = try Self.resolver([server.address])
            _ = try await resolver.resolve(try HostName("multi.test"), family: .any)
            // Wait until the loop has settled (no wake-up for 100 ms, at most 5 s), rather than guessing a delay.
            var before = resolver.loop.wakeups.load(ordering: .relaxed)
            for _ in 0..<50 {
                try await Task.sleep(for: .milliseconds(100))
                let now = resolver.loop.wakeups.load(ordering: .relaxed)
                if now == before { break }
                before = now
            }
            #expect(before > 0)
            try await Task.sleep(for: .milliseconds(1500))
            #expect(resolver.loop.wakeups.load(ordering: .relaxed) == before)
        }
    }

    @Test("shutdown fails queries in flight and later ones with shutdown")
    func shutdown() async throws {
        let silent = try BoundUDPSocket()
        defer { silent.close() }
        let resolver = try Self.resolver([silent.address], timeout: .seconds(3600), tries: 1)
        let pending = Task { try await resolver.resolve(try HostName("a.test"), family: .ipv4) }
        try await Task.sleep(for: .milliseconds(100))
        resolver.shutdown()
        await expectDNSError(.shutdown) { try await pending.value }
        await expectDNSError(.shutdown) { try await resolver.resolve(try HostName("b.test"), family: .ipv4) }
        resolver.shutdown()
    }

    @Test("options out of range are rejected")
    func invalidOptions() {
        for options in [
            CAresResolver.Configuration(timeout: .zero), CAresResolver.Configuration(timeout: .seconds(7200)),
            CAresResolver.Configuration(tries: 0), CAresResolver.Configuration(tries: 17),
            CAresResolver.Configuration(socketReceiveBufferSize: -1),
        ] {
            #expect {
                try CAresResolver(configuration: options)
            } throws: { error in
                (error as? HTTPDNSError)?.code == .invalidConfiguration
            }
        }
    }

    @Test("TCP mode answers too")
    func tcp() async throws {
        try await DNSMasq.with { server in
            let resolver = try CAresResolver(configuration: .init(servers: [server.address], useTCP: true))
            let answer = try await resolver.resolve(try HostName("multi.test"), family: .ipv4)
            #expect(Set(Self.ips(answer)) == Set(TestZone.multiV4))
        }
    }

}
