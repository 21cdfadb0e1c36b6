import HTTPDNS
import HTTPDNSHTTP2
import HTTPDNSServer
import NIOCore
import Logging

/// Entry points for coverage-guided fuzzing of what the server reads from clients (`Tests/Fuzz`,
/// `scripts/fuzz.sh`): request targets and query strings, every endpoint's parameters (JSON API, vendor APIs and
/// their signatures, reports), RFC 8484 messages with the rewriting applied before forwarding, and upstream answers
/// as the forwarding guard reads them. Each input must
/// get an HTTP answer, never a crash or a hang; a broken promise traps.
enum ServerFuzzTargets {
    /// The targets, by name.
    static let names = [
        "serve-request", "serve-dns-message", "forwarded-answer", "dns-stream", "http2-server", "relay",
    ]

    /// A service on a resolver that only has an override (no upstream, nothing leaves the process), with accounts,
    /// reports, forwarding and a rate limit switched on so that every path is reachable.
    private static let service: HTTPDNSService = {
        let overrides = HostOverrides()
        overrides.set([IPAddress(ipv4: 192, 0, 2, 1)], for: try! HostPattern("multi.test"))
        // cached.test is in the cache, so RFC 8484 answers can be kept (and compared with the full path's).
        let cache = HostCache()
        cache.store(
            try! HostName("cached.test"), family: .ipv4, addresses: [IPAddress(ipv4: 192, 0, 2, 7)], ttl: 86_400,
            origin: "fuzz")
        let resolver = HostResolver(upstreams: [], overrides: overrides, cache: cache, prober: nil)
        return HTTPDNSService(
            resolver: resolver,
            configuration: .init(
                accounts: ["139450": nil, "signed-1": HTTPDNSSecret("s3cret")], rateLimitPerSecond: 1_000_000,
                rateLimitBurst: 1_000_000, acceptClientReports: true,
                reportNetworks: [IPNetwork("127.0.0.0/8")!], publicEndpoints: .on),
            logger: Logger(label: "fuzz", factory: { _ in SwiftLogNoOpLogHandler() }),
            metricsExporter: { Array("metrics 1\n".utf8) }, now: { 1_800_000_000 })
    }()

    /// Kept answers across inputs. Inputs run one at a time on one thread, as the memo's event loop would.
    nonisolated(unsafe) private static let memo = AnswerMemo()

    private static let methods = ["GET", "POST", "HEAD", "PUT"]
    private static let types = [nil, "application/dns-message", "application/json", "text/plain"]

    /// Feeds `bytes` to the target called `target`; `false` for an unknown name.
    static func run(_ target: String, _ bytes: [UInt8]) -> Bool {
        switch target {
        case "serve-request":
            // Byte 0 picks the method and content type; the first line is the target, the rest the body.
            guard let first = bytes.first else { return true }
            let rest = bytes.dropFirst()
            let line = rest.firstIndex(of: UInt8(ascii: "\n")) ?? rest.endIndex
            let request = ServiceRequest(
                method: methods[Int(first & 3)], target: String(decoding: rest[..<line], as: UTF8.self),
                contentType: types[Int(first >> 2 & 3)], body: Array(rest[line...].dropFirst()),
                client: IPAddress(ipv4: first & 0x10 == 0 ? 127 : 198, 51, 100, first))
            answer(request)
        case "serve-dns-message":
            answer(
                ServiceRequest(
                    method: "POST", target: "/dns-query", contentType: "application/dns-message", body: bytes))
            if let query = try? DNSQueryMessage(bytes),
                let relayed = try? ForwardedQuery.strippingClientSubnet(bytes, questionEnd: 12 + query.question.count)
            {
                precondition(relayed.count <= bytes.count, "stripping an option made the message longer")
                precondition(
                    Array(relayed.prefix(12 + query.question.count)) == Array(bytes.prefix(12 + query.question.count)))
                precondition(
                    (try? ForwardedQuery.strippingClientSubnet(relayed, questionEnd: 12 + query.question.count))
                        == relayed,
                    "a relayed message still changes when stripped again")
            }
            _ = ForwardedQuery.reverseTarget(String(decoding: bytes, as: UTF8.self))
            dnsTransports(bytes)
            clientSubnetOption(bytes)
        case "forwarded-answer":
            forwardedAnswer(bytes)
        case "dns-stream":
            dnsStream(bytes)
        case "http2-server":
            http2Server(bytes)
        case "relay":
            relay(bytes)
        default:
            return false
        }
        return true
    }

    /// `bytes` as a TCP or TLS DNS stream arriving in reads of varying sizes (byte 0 seeds them): the framer gives
    /// exactly the messages a plain reading of the stream finds, in order, stops at the first length too short for a
    /// header, and never holds more than one message and one read.
    private static func dnsStream(_ bytes: [UInt8]) {
        guard let seed = bytes.first else { return }
        let stream = Array(bytes.dropFirst())
        // What a plain reading finds.
        var expected: [[UInt8]] = []
        var offset = 0
        var invalid = false
        while offset + 2 <= stream.count {
            let length = Int(stream[offset]) << 8 | Int(stream[offset + 1])
            if length < 12 {
                invalid = true
                break
            }
            guard offset + 2 + length <= stream.count else { break }
            expected.append(Array(stream[(offset + 2)..<(offset + 2 + length)]))
            offset += 2 + length
        }
        var framer = DNSStreamFramer()
        var taken: [[UInt8]] = []
        var sawInvalid = false
        var position = 0
        var read = 0
        reading: while position < stream.count {
            // Reads of 1 to 64 bytes, then larger, as the seed and the position pick.
            let size = min(
                stream.count - position, 1 + (Int(seed) &* (read + 1) &+ position) % (read % 3 == 0 ? 64 : 4_096))
            framer.append(Array(stream[position..<(position + size)]))
            position += size
            read += 1
            taking: while true {
                switch framer.next() {
                case .message(let message): taken.append(message)
                case .needMore: break taking
                case .invalid:
                    sawInvalid = true
                    break reading
                }
            }
            precondition(framer.heldBytes <= 65_537, "the framer holds \(framer.heldBytes) bytes after taking")
            precondition(
                framer.storageBytes <= 4 * (65_537 + 4_096), "the framer's storage grew to \(framer.storageBytes)")
        }
        precondition(taken == expected, "the framer's messages differ from the stream's")
        precondition(sawInvalid == invalid, "an invalid length seen by one reading and not the other")
    }

    /// This process's forwarding marker.
    private static let marker = ForwardingMarker()

    /// `bytes` as an upstream's answer to relay (the private-address guard walks every section and every SVCB/HTTPS
    /// hint) and as a query to forward (marked once, with the hop count one more, and then seen as a loop), and as a
    /// rate-limited UDP query's slipped answer (never larger than the query, TC set).
    private static func forwardedAnswer(_ bytes: [UInt8]) {
        _ = ForwardedAnswerGuard.handsOutGuardedAddress(bytes)
        if let slipped = DNSTransportWire.slipped(bytes) {
            precondition(slipped.count <= bytes.count && slipped[2] & 0x02 != 0, "a slipped answer larger or not TC")
        }
        guard let query = try? DNSQueryMessage(bytes) else { return }
        let questionEnd = 12 + query.question.count
        guard let marked = marker.marking(bytes, questionEnd: questionEnd) else { return }
        let before = ForwardingMarker.read(bytes)?.hops ?? 0
        guard let (token, hops) = ForwardingMarker.read(marked) else {
            preconditionFailure("a marked query carries no marker")
        }
        precondition(token.elementsEqual(marker.token) && hops == min(before + 1, 255), "the wrong marker")
        precondition(marker.isLoop(marked), "a query back with our own marker is not seen as a loop")
        precondition(Array(marked.prefix(questionEnd)).dropFirst(12) == Array(bytes.prefix(questionEnd)).dropFirst(12))
        if let again = marker.marking(marked, questionEnd: questionEnd) {
            precondition(ForwardingMarker.read(again)?.hops == min(hops + 1, 255), "marking twice kept two markers")
        }
    }

    /// A client subnet option that reads writes back as it came, and a network cut shorter stays inside it.
    private static func clientSubnetOption(_ bytes: [UInt8]) {
        guard let (subnet, scope) = try? EDNSClientSubnet.find(in: bytes) else { return }
        let written = EDNSClientSubnet.optionData(subnet, scope: scope)
        precondition((try? EDNSClientSubnet.read(written[...]))?.subnet == subnet, "an ECS option does not read back")
        let cut = subnet.truncated(to: subnet.prefixLength / 2)
        precondition(cut.contains(subnet) && cut.prefixLength <= subnet.prefixLength, "a cut network lost its own")
    }

    /// Relayed answers kept for later clients.
    private static let forwardedAnswers = ForwardedAnswerCache(capacity: 64)

    /// What the plain DNS and DoT listeners and the cache of relayed answers do with `bytes` as a query and as an
    /// answer: a UDP answer to a readable query never passes its limit, a kept answer carries the asker's ID and
    /// question.
    private static func dnsTransports(_ bytes: [UInt8]) {
        let limit = DNSTransportWire.udpLimit(for: bytes)
        let request = ServiceRequest(
            method: "POST", target: "/dns-query", contentType: "application/dns-message", body: bytes, transport: .udp)
        var responses: [ServiceResponse] = [.text(400, "bad"), .text(429, "slow down"), .text(403, "accounts only")]
        if let (response, _) = service.immediateResponse(service.plan(request)) { responses.append(response) }
        for response in responses {
            for overUDP in [true, false] {
                guard let message = DNSTransportWire.message(for: response, query: bytes, overUDP: overUDP) else {
                    continue
                }
                precondition(message.count >= 12 && message[2] & 0x80 != 0, "a DNS answer that is not one")
                let sent = DNSTransportWire.truncated(message, limit: limit)
                precondition(sent.count <= message.count && (message.count > limit || sent == message))
                // The service's answers to a query it could read (names of at most 255 bytes) always fit.
                if (try? DNSQueryMessage(bytes)) != nil {
                    precondition(sent.count <= limit, "a UDP answer of \(sent.count) bytes over its limit of \(limit)")
                }
            }
        }
        let now = ContinuousClock.now
        forwardedAnswers.keep(bytes, to: bytes, now: now)
        // A kept answer (this input's or an earlier one's with the same question) carries the asker's ID and question.
        if let kept = forwardedAnswers.answer(to: bytes, now: now),
            let nameEnd = DNSMessageWalk.skipName(bytes, from: 12)
        {
            precondition(kept.answer.prefix(2).elementsEqual(bytes.prefix(2)), "a kept answer without the asker's ID")
            precondition(kept.answer[12..<nameEnd].elementsEqual(bytes[12..<nameEnd]), "not the asker's question")
        }
        _ = ForwardedAnswerCache.key(bytes)
        if bytes.count >= 12 { _ = ForwardedAnswerCache.recordTTLs(bytes) }
    }

    /// Plans and, where no upstream is needed, answers `request`: the answer is an HTTP status, and a DNS message
    /// answer echoes the question.
    /// A kept answer must be the full path's, byte for byte.
    private static func answer(_ request: ServiceRequest) {
        let plan = service.plan(request)
        guard let (response, steadyFor) = service.immediateResponse(plan) else { return }
        precondition((200..<600).contains(response.status), "status \(response.status)")
        if response.contentType == "application/dns-message" {
            precondition(response.body.count >= 12 && response.body[2] & 0x80 != 0, "a DNS answer that is not one")
        }
        // Read before the lookup, as the exchange reads it: the answer is steady for `steadyFor` from a moment no
        // later than the one its TTL was read at (taken after, a TTL that ticked meanwhile looked like a bug).
        let made = ContinuousClock.now
        let memoPlan = service.plan(request, memo: memo)
        guard let (first, _) = service.immediateResponse(memoPlan) else { return }
        guard let steadyFor, let (message, generation, stamp) = memoPlan.memoizable else { return }
        memo.keep(
            first, to: message, name: memoPlan.name, generation: generation, steadyFor: steadyFor, now: made,
            stamp: stamp, echoesSubnet: memoPlan.echoesSubnet)
        guard
            let (kept, _) = memo.answer(
                to: message, generation: generation, now: made, versions: service.resolver.nameVersion),
            let (full, _) = service.immediateResponse(service.plan(request))
        else { return }
        // Within its time (the TTL has not ticked down since) a kept answer is the full path's, byte for byte.
        precondition(
            kept == full || ContinuousClock.now >= made + steadyFor, "a kept answer differs from the full path's")
    }

    /// What an HTTP/2 server session hands its connection, recorded.
    private final class Requests: HTTP2ServerSessionDelegate {
        var complete = 0
        func requestHeadReceived(stream: Int32) {}
        func requestReceived(stream: Int32, _ request: HTTP2Request) {
            complete += 1
            precondition(request.body.count <= 4_096, "a body of \(request.body.count) bytes past the limit")
        }
        func requestBodyTooLarge(stream: Int32) {}
        func streamClosed(stream: Int32, receiving: Bool) {}
        func sessionError(_ message: String) {}
    }

    private static let http2Options = HTTP2SessionOptions()

    /// `bytes` after the client preface as an HTTP/2 client's frames, in reads of varying sizes (byte 0 seeds
    /// them), into the server's session with `serve`'s settings: it never crashes or hangs, and the request bodies it
    /// holds never pass the connection's receive window (automatic WINDOW_UPDATE is off: docs/security.md).
    private static func http2Server(_ bytes: [UInt8]) {
        guard let seed = bytes.first else { return }
        let delegate = Requests()
        guard
            let session = try? HTTP2ServerSession(
                settings: .init(maximumBodyBytes: 4_096), options: http2Options, delegate: delegate)
        else { return }
        let stream = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + bytes.dropFirst()
        var position = 0
        var read = 0
        var output = ByteBuffer()
        while position < stream.count {
            let size = min(stream.count - position, 1 + (Int(seed) &* (read + 1)) % 512)
            do {
                try session.receive(ByteBuffer(bytes: stream[position..<position + size]))
            } catch {
                return
            }
            precondition(session.heldBodyBytes <= 65_535, "\(session.heldBodyBytes) body bytes held")
            output.clear()
            guard (try? session.pendingOutput(into: &output)) != nil else { return }
            position += size
            read += 1
        }
    }

    /// `bytes` as a query to relay: stripped of every EDNS option but the forwarding marker (and stripping again
    /// changes nothing), its cookie found and taken out exactly, and its name sent in a random mix of cases that
    /// reads as the same name and echoes itself.
    private static func relay(_ bytes: [UInt8]) {
        guard let query = try? DNSQueryMessage(bytes) else { return }
        let questionEnd = 12 + query.question.count
        if let stripped = try? ForwardedQuery.strippingEveryOption(bytes, questionEnd: questionEnd) {
            precondition(stripped.count <= bytes.count, "stripping made the message longer")
            precondition(
                (try? ForwardedQuery.strippingEveryOption(stripped, questionEnd: questionEnd)) == stripped,
                "a relayed query still changes when stripped again")
            if let options = DNSMessageWalk.optOptions(stripped) {
                precondition(
                    options.isEmpty || ForwardingMarker.read(stripped) != nil, "an option left that is not the marker")
            }
        }
        if case .cookie(let client, let server, let stripped) = DNSCookies.find(in: bytes) {
            precondition(client.count == 8 && stripped.count == bytes.count - 12 - (server?.count ?? 0))
            precondition(DNSCookies.find(in: stripped) != .malformed, "stripping a cookie left a malformed one")
        }
        if let (randomized, end) = DNSCaseRandomization.randomized(bytes) {
            precondition(end == questionEnd, "the question ends elsewhere")
            precondition(
                randomized[12..<end].map { $0 | 0x20 } == bytes[12..<end].map { $0 | 0x20 }, "the name changed")
            precondition(DNSCaseRandomization.echoesQuestion(randomized, of: randomized, questionEnd: end))
        }
    }
}
