import Foundation
import TestSupport
import Testing

/// `hostsctl serve` inside a network namespace the test makes, against UDP queries whose source address is forged
/// with a raw socket: the victim's address is one of the namespace's own, so the victim can also speak TCP and HTTP
/// from it, and the forged datagrams reach the server exactly as spoofed ones from the internet would.
@Suite(
    "hostsctl serve against forged UDP sources",
    .enabled(if: NetworkNamespace.available || ProcessInfo.processInfo.environment["CI"] != nil))
struct ForgedSourceTests {
    /// Run inside the namespace: waits for the server, forges `forged` UDP queries from the victim with a raw socket
    /// (IP_HDRINCL), then asks as the victim over TCP DNS (20 queries) and HTTP (5 requests) and prints what was
    /// answered as JSON.
    static let script = #"""
        import json, socket, struct, sys, time
        server, dns_port, http_port, victim, forged = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
        def query(ident):
            head = struct.pack(">HHHHHH", ident, 0x0100, 1, 0, 0, 0)
            return head + b"\x06served\x04test\x00" + struct.pack(">HH", 1, 1)
        deadline = time.time() + 20
        while True:
            try:
                socket.create_connection((server, http_port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.1)
        raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        for ident in range(forged):
            payload = query(ident)
            udp = struct.pack(">HHHH", 40000 + ident % 1000, dns_port, 8 + len(payload), 0) + payload
            ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), ident, 0, 64, 17, 0,
                             socket.inet_aton(victim), socket.inet_aton(server))
            raw.sendto(ip + udp, (server, 0))
        time.sleep(0.5)
        tcp_answers = 0
        with socket.create_connection((server, dns_port), timeout=10, source_address=(victim, 0)) as tcp:
            for ident in range(20):
                message = query(ident)
                tcp.sendall(struct.pack(">H", len(message)) + message)
                length = struct.unpack(">H", tcp.recv(2, socket.MSG_WAITALL))[0]
                answer = tcp.recv(length, socket.MSG_WAITALL)
                tcp_answers += answer[3] & 0x0F == 0 and answer[7] == 1
        http_answers = 0
        for _ in range(5):
            with socket.create_connection((server, http_port), timeout=10, source_address=(victim, 0)) as http:
                http.sendall(b"GET /resolve?name=served.test HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                reply = b""
                while chunk := http.recv(4096):
                    reply += chunk
                http_answers += reply.startswith(b"HTTP/1.1 200") and b"127.0.0.88" in reply
        # The victim's own UDP bucket is the one the forger emptied: RRL drops or slips its queries.
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind((victim, 0))
        udp.settimeout(1)
        udp.sendto(query(7), (server, dns_port))
        try:
            reply = udp.recv(512)
            udp_state = "truncated" if reply[2] & 0x02 else "answered"
        except socket.timeout:
            udp_state = "dropped"
        print(json.dumps({"tcp": tcp_answers, "http": http_answers, "udp": udp_state}))
        """#

    /// Runs `hostsctl serve --config settings` inside `namespace`, then `script` with `arguments` there, and returns
    /// the JSON object the script printed (an issue is recorded, with the script's and the server's output, when it
    /// printed none) and what it printed.
    static func serveAndAsk(
        in namespace: NetworkNamespace, settings: String, script: String, arguments: [String]
    ) async throws -> (result: [String: Any]?, output: String) {
        let log = TemporaryFiles.path("serve-\(namespace.name).log")
        let serve = try ChildProcess(
            path: "/usr/sbin/ip",
            arguments: ["netns", "exec", namespace.name, HostsCTLProcess.executable, "serve", "--config", settings],
            logPath: log)
        defer { serve.stop() }
        let file = try TemporaryFiles.file(script, name: "script.py")
        let output = try await HostsCTLProcess.run(
            executable: "/usr/sbin/ip", ["netns", "exec", namespace.name, "python3", file] + arguments)
        let serveLog = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        let result = try? JSONSerialization.jsonObject(with: Data(output.standardOutput.utf8)) as? [String: Any]
        #expect(result != nil, "\(output.standardOutput) \(output.standardError) \(serveLog.suffix(2_000))")
        return (result, output.standardOutput)
    }

    @Test(
        "2,000 UDP queries forged from a victim's address empty only the victim's UDP bucket: its TCP DNS and HTTP requests are all answered"
    )
    func forgedUDPLeavesOtherTransports() async throws {
        try await NetworkNamespace.with { namespace in
            try await namespace.inside(["addr", "add", "10.99.0.1/24", "dev", "a0"])
            try await namespace.inside(["addr", "add", "198.51.100.7/32", "dev", "b0"])
            let overrides = try TemporaryFiles.file("127.0.0.88 served.test\n", name: "hosts")
            let settings = try TemporaryFiles.file(
                """
                {"sources": {"order": ["overrides"], "systemFallback": false},
                 "overrides": {"file": "\(overrides)"}, "probe": {"enabled": false},
                 "serve": {"listen": "10.99.0.1:8053", "dns": {"listen": "10.99.0.1:5353"}, "admin": {"listen": "none"},
                           "rateLimitPerSecond": 1, "rateLimitBurst": 30}}
                """, name: "hostsctl.json")
            let (result, output) = try await Self.serveAndAsk(
                in: namespace, settings: settings, script: Self.script,
                arguments: ["10.99.0.1", "5353", "8053", "198.51.100.7", "2000"])
            // The burst of 30 and a rate of 1 a second: a shared bucket would have refused nearly all of these.
            #expect(result?["tcp"] as? Int == 20, "\(output)")
            #expect(result?["http"] as? Int == 5, "\(output)")
            #expect(result?["udp"] as? String != "answered", "the forged queries emptied the victim's UDP bucket")
        }
    }

    /// Run inside the namespace: the upstream. Answers `*.live.test` (A: 127.0.0.77, TXT: "ok"; the question echoed
    /// byte for byte, so serve's DNS 0x20 check passes) and never answers `*.dead.test`, as a name whose servers
    /// are down; prints how many queries of each kind it saw when it gets SIGTERM.
    static let upstream = #"""
        import json, signal, socket, struct, sys
        seen = {"live": 0, "dead": 0}
        def stop(*_):
            print(json.dumps(seen), flush=True)
            sys.exit(0)
        signal.signal(signal.SIGTERM, stop)
        server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        server.bind((sys.argv[1], int(sys.argv[2])))
        while True:
            query, peer = server.recvfrom(4096)
            if len(query) < 17:
                continue
            offset, labels = 12, []
            while offset < len(query) and query[offset] != 0:
                labels.append(query[offset + 1:offset + 1 + query[offset]].decode("ascii", "replace").lower())
                offset += 1 + query[offset]
            end = offset + 5
            if end > len(query):
                continue
            qtype = struct.unpack(">H", query[offset + 1:offset + 3])[0]
            if labels[-2:] == ["dead", "test"]:
                seen["dead"] += 1
                continue
            seen["live"] += 1
            records = []
            if qtype == 1:
                records.append(b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + bytes([127, 0, 0, 77]))
            elif qtype == 16:
                records.append(b"\xc0\x0c" + struct.pack(">HHIH", 16, 1, 60, 3) + b"\x02ok")
            head = query[:2] + struct.pack(">HHHHH", 0x8180, 1, len(records), 0, 0)
            server.sendto(head + query[12:end] + b"".join(records), peer)
        """#

    /// Run inside the namespace: the real client (the victim's address) asks for names nobody asked before over UDP
    /// as a stub does (a truncated answer asked again over TCP: dnspython's `udp_with_fallback`), before and during
    /// a flood of queries forged from 64 made-up /24s (198.18.0.0/18, local to the namespace so that the answers
    /// stay in it) for names whose servers never answer; during the flood it also relays TXT queries over
    /// `POST /dns-query` (plain HTTP). Prints what was answered as JSON.
    static let floodScript = #"""
        import json, random, socket, struct, sys, threading, time, urllib.request
        import dns.message, dns.query, dns.rcode, dns.rdatatype
        server, dns_port, http_port, victim = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
        deadline = time.time() + 20
        while True:
            try:
                socket.create_connection((server, http_port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.1)
        def ask(name):
            query = dns.message.make_query(name, "A")
            try:
                reply, tcp = dns.query.udp_with_fallback(query, server, timeout=4, port=dns_port, source=victim)
            except Exception:
                return None, False
            return reply, tcp
        def answered(reply):
            return reply is not None and reply.rcode() == dns.rcode.NOERROR and len(reply.answer) == 1
        before = sum(answered(ask(f"before-{i}.live.test")[0]) for i in range(10))
        flooding = threading.Event()
        sent = [0]
        def forge():
            raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
            rng = random.Random(7)
            end = time.time() + 8
            while time.time() < end:
                for _ in range(50):
                    ident = rng.randrange(65536)
                    qtype = 1 if rng.random() < 0.8 else 16
                    name = b"".join(bytes([len(p)]) + p for p in [b"r%d" % rng.randrange(10**9), b"dead", b"test"])
                    payload = struct.pack(">HHHHHH", ident, 0x0100, 1, 0, 0, 0) + name + b"\x00" + struct.pack(">HH", qtype, 1)
                    source = "198.18.%d.%d" % (rng.randrange(64), rng.randrange(1, 255))
                    udp = struct.pack(">HHHH", rng.randrange(1024, 65535), dns_port, 8 + len(payload), 0) + payload
                    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), ident, 0, 64, 17, 0,
                                     socket.inet_aton(source), socket.inet_aton(server))
                    raw.sendto(ip + udp, (server, 0))
                    sent[0] += 1
                flooding.set()
                time.sleep(0.05)
        forger = threading.Thread(target=forge)
        forger.start()
        flooding.wait()
        time.sleep(1.5)
        during, truncated = 0, 0
        for i in range(20):
            reply, tcp = ask(f"during-{i}.live.test")
            during += answered(reply)
            truncated += tcp
        relayed = 0
        for i in range(10):
            query = dns.message.make_query(f"txt-{i}.live.test", "TXT").to_wire()
            request = urllib.request.Request(f"http://{server}:{http_port}/dns-query", data=query, method="POST",
                                             headers={"Content-Type": "application/dns-message",
                                                      "Accept": "application/dns-message"})
            try:
                with urllib.request.urlopen(request, timeout=5) as response:
                    reply = dns.message.from_wire(response.read())
                    relayed += reply.rcode() == dns.rcode.NOERROR and len(reply.answer) == 1
            except Exception:
                pass
        forger.join()
        print(json.dumps({"before": before, "during": during, "truncated": truncated, "relayed": relayed,
                          "forged": sent[0]}))
        """#

    @Test(
        "queries forged from 64 made-up /24s for names whose servers never answer take at most the unverified half of the upstream places: a real client's new names over UDP are answered (truncated, then over TCP) and its relayed TXT over HTTP too"
    )
    func forgedNetworksLeaveMisses() async throws {
        try await NetworkNamespace.with { namespace in
            try await namespace.inside(["addr", "add", "10.99.0.1/24", "dev", "a0"])
            try await namespace.inside(["addr", "add", "198.51.100.7/32", "dev", "b0"])
            // The forged sources are the namespace's own (any address of the block, as a local route), so the
            // answers to them are delivered and dropped inside it.
            try await namespace.inside(["route", "add", "local", "198.18.0.0/18", "dev", "lo"])
            let upstreamFile = try TemporaryFiles.file(Self.upstream, name: "upstream.py")
            let upstreamLog = TemporaryFiles.path("forged-upstream.log")
            let upstream = try ChildProcess(
                path: "/usr/sbin/ip",
                arguments: ["netns", "exec", namespace.name, "python3", upstreamFile, "10.99.0.1", "5354"],
                logPath: upstreamLog)
            defer { upstream.stop() }
            let settings = try TemporaryFiles.file(
                """
                {"sources": {"order": ["cache", "cares"], "systemFallback": false}, "probe": {"enabled": false},
                 "cares": {"servers": ["10.99.0.1:5354"], "timeoutMs": 1000, "tries": 2},
                 "serve": {"listen": "10.99.0.1:8053", "dns": {"listen": "10.99.0.1:5353"}, "admin": {"listen": "none"},
                           "otherTypes": "forward", "probeGuardedAddresses": true}}
                """, name: "hostsctl.json")
            let (result, output) = try await Self.serveAndAsk(
                in: namespace, settings: settings, script: Self.floodScript,
                arguments: ["10.99.0.1", "5353", "8053", "198.51.100.7"])
            #expect(result?["before"] as? Int == 10, "\(output)")
            // Before the third wave: 0 of 20 (SERVFAIL from the one counter every source shared).
            #expect(result?["during"] as? Int == 20, "\(output)")
            #expect(result?["relayed"] as? Int == 10, "\(output)")
            // The flood did fill the unverified places: the victim's UDP queries were answered TC, then over TCP.
            #expect((result?["truncated"] as? Int ?? 0) > 0, "\(output)")
            #expect((result?["forged"] as? Int ?? 0) >= 4_000, "the flood ran: \(output)")
        }
    }
}
