import Foundation
import TestSupport
import Testing

@testable import HTTPDNSCore
@testable import HTTPDNSServer

/// Answers that say why (Extended DNS Errors, RFC 8914), as kdig and curl read them from a running `hostsctl serve`
/// in front of a dnsmasq: a dead upstream over UDP, TCP, DoT and DoH and in the JSON API, a relayed type, a stale
/// answer; none to a client without EDNS, and none for an answer the guard withheld (it must look like a missing
/// name).
@Suite("hostsctl serve: answers that say why (Extended DNS Errors)")
struct ExtendedErrorsTests {
    @Test("a dead upstream: EDE 22 over UDP, TCP, DoT and DoH, for a relayed type too, and in the JSON API")
    func deadUpstream() async throws {
        let served = try await OperatorCountsTests.Served.start(
            ecs: "on", extra: #", "probeGuardedAddresses": true"#, timeoutMs: 300)
        defer { served.stop() }
        served.dnsmasq.freeze()
        for transport in ["+notcp", "+tcp", "+tls", "+https"] {
            let output = try await served.kdig("n1.test", transport, options: ["+edns"])
            #expect(output.contains("SERVFAIL"), "\(transport): \(output)")
            #expect(
                output.contains("EDE: 22 (No Reachable Authority): 'no upstream answered in time'"),
                "\(transport): \(output)")
        }
        let relayed = try await served.kdig("n2.test", type: "TXT", "+notcp", options: ["+edns"])
        #expect(relayed.contains("EDE: 22"), "\(relayed)")
        let json = try await served.curl("/resolve?name=n3.test")
        #expect(json.contains(#""Status":2"#) && json.contains(#""ExtendedDNSError":{"InfoCode":22,"#), "\(json)")
        // A client without EDNS gets no OPT record, so no EDE.
        let plain = try await served.kdig("n4.test", "+noedns")
        #expect(plain.contains("SERVFAIL") && !plain.contains("EDE"), "\(plain)")
    }

    @Test("a stale answer says so (EDE 3); an answer the guard withheld says nothing more than NXDOMAIN")
    func staleAndWithheld() async throws {
        let served = try await OperatorCountsTests.Served.start(
            ecs: "off", extra: #", "probeGuardedAddresses": true"#, timeoutMs: 300,
            cache: #""minTtlSeconds": 1,"#, records: ["host-record=brief.test,192.0.2.44,1"])
        defer { served.stop() }
        #expect(try await served.kdig("brief.test", "+notcp").contains("192.0.2.44"))
        served.dnsmasq.freeze()
        try await Task.sleep(for: .milliseconds(2_500))
        let stale = try await served.kdig("brief.test", "+notcp", options: ["+edns"])
        #expect(stale.contains("192.0.2.44"), "\(stale)")
        #expect(stale.contains("EDE: 3 (Stale Answer)"), "\(stale)")
        let guarded = try await OperatorCountsTests.Served.start(ecs: "off")
        defer { guarded.stop() }
        let withheld = try await guarded.kdig("n1.test", "+notcp", options: ["+edns"])
        #expect(withheld.contains("NXDOMAIN") && !withheld.contains("EDE"), "\(withheld)")
    }

    @Test("the rate limit and the upstream bound over TCP: REFUSED and SERVFAIL, each saying why; the option's bytes")
    func refusals() throws {
        var query = DNSWireMessage.query(for: try HostName("a.test"), type: .a)
        query = DNSMessageWalk.appendingOPTRecord(carrying: [], to: query)
        let limited = try #require(
            DNSTransportWire.message(for: .text(429, "too many requests"), query: query, overUDP: false))
        #expect(limited[3] & 0x0F == 5)
        #expect(limited.suffix(ExtendedDNSError.rateLimited.option.count) == ExtendedDNSError.rateLimited.option[...])
        let busy = try #require(DNSTransportWire.message(for: .text(503, "busy"), query: query, overUDP: false))
        #expect(busy[3] & 0x0F == 2)
        #expect(busy.suffix(ExtendedDNSError.upstreamBusy.option.count) == ExtendedDNSError.upstreamBusy.option[...])
        let option = ExtendedDNSError(code: 22, text: "x").option
        #expect(option == [0, 15, 0, 3, 0, 22, 120])
        #expect(ExtendedDNSError.upstreamFailure(.timeout) == .noReachableAuthority)
        #expect(ExtendedDNSError.upstreamFailure(.connectionFailed) == .networkError)
        #expect(ExtendedDNSError.upstreamFailure(.serverFailure) == nil, "an upstream's own SERVFAIL says nothing more")
    }
}
