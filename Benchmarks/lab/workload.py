#!/usr/bin/env python3
"""The realistic serve workload (Benchmarks/serve-workload.sh): a zone of many names and dnsperf query files.

  workload.py zone --names N [--seed S]
      The zone work.test for PowerDNS (bind backend) on stdout:
      - w0 ... w(N-1): one A record each, TTL log-uniform from 5 s to 1 h (some expire during a run);
      - every 100th name a LUA view() record whose answer depends on the client's network (198.18.0.0/16,
        198.19.0.0/16, everyone else), as a CDN's authoritative answers;
      - *.new: a wildcard, so every never-seen name exists and is a miss for every cache.
      Addresses are loopback ones: nothing here is ever connected to.

  workload.py queries --names N --count C --tag T [--seed S] [--zipf 1.0] [--new 0.05] [--ecs 0.5]
                      [--networks 300] --out FILE
      C queries in dnsperf's binary input format (-B: each message preceded by its 2-byte length), A type, RD,
      EDNS0 (1232 bytes) on every query:
      - names drawn with Zipf popularity (exponent --zipf) over the N names, in a popularity order unrelated to
        the names' numbers (seeded);
      - a share --new of the queries asks a name never asked before: uNUMBER.T.new.work.test (T: the tag, so every
        file's new names are its own);
      - a share --ecs carries an EDNS Client Subnet option for one of --networks /24s of 198.18.0.0/15 (the
        benchmarking range; the addresses are only data in the packets).
      Prints one summary line on stderr: queries, distinct names, share of new names and ECS queries.

  workload.py paths --from FILE [--count C]
      The first C queries of a binary query file as RFC 8484 GET paths (/dns-query?dns=BASE64URL), one a line, for
      h2load --input-file (prefixed with the server's https://ADDRESS:PORT).
"""

import argparse
import base64
import math
import random
import struct
import sys


def zone(names: int, seed: int) -> str:
    rng = random.Random(seed)
    lines = [
        "$TTL 300",
        "@ IN SOA ns.work.test. admin.work.test. 1 3600 600 86400 60",
        "@ IN NS ns.work.test.",
        "ns IN A 127.0.0.1",
        "*.new IN A 127.3.0.1",
    ]
    for index in range(names):
        ttl = int(round(math.exp(rng.uniform(math.log(5), math.log(3600)))))
        address = f"127.{2 + index // 65536}.{(index // 256) % 256}.{index % 256}"
        if index % 100 == 0:
            lines.append(
                f"w{index} {ttl} IN LUA A \"view({{ {{{{'198.18.0.0/16'}}, {{'127.4.0.1'}}}}, "
                f"{{{{'198.19.0.0/16'}}, {{'127.4.0.2'}}}}, {{{{'0.0.0.0/0', '::/0'}}, {{'{address}'}}}} }})\""
            )
        else:
            lines.append(f"w{index} {ttl} IN A {address}")
    return "\n".join(lines) + "\n"


def encode_name(name: str) -> bytes:
    return b"".join(bytes([len(label)]) + label.encode() for label in name.split(".")) + b"\0"


def query(name: str, network: int | None) -> bytes:
    header = struct.pack(">HHHHHH", 0, 0x0100, 1, 0, 0, 1)
    question = encode_name(name) + struct.pack(">HH", 1, 1)
    options = b""
    if network is not None:
        # ECS (RFC 7871): family 1, source prefix 24, scope 0, the network's first three bytes.
        address = bytes([198, 18 + network // 256, network % 256])
        options = struct.pack(">HHHBB", 8, 4 + len(address), 1, 24, 0) + address
    opt = b"\0" + struct.pack(">HHIH", 41, 1232, 0, len(options)) + options
    return header + question + opt


def queries(args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    order = list(range(args.names))
    rng.shuffle(order)
    weights = [1.0 / (rank + 1) ** args.zipf for rank in range(args.names)]
    cumulative = []
    total = 0.0
    for weight in weights:
        total += weight
        cumulative.append(total)
    # Another stream for the per-file choices, so every file has the same popularity order.
    rng = random.Random(f"{args.seed}-{args.tag}")
    ranks = rng.choices(range(args.names), cum_weights=cumulative, k=args.count)
    distinct = set()
    new_count = ecs_count = 0
    with open(args.out, "wb") as out:
        for position, rank in enumerate(ranks):
            if rng.random() < args.new:
                name = f"u{position}.{args.tag}.new.work.test"
                new_count += 1
            else:
                name = f"w{order[rank]}.work.test"
            distinct.add(name)
            network = rng.randrange(args.networks) if rng.random() < args.ecs else None
            ecs_count += network is not None
            message = query(name, network)
            out.write(struct.pack(">H", len(message)) + message)
    print(
        f"{args.count} queries, {len(distinct)} distinct names, {100 * new_count / args.count:.1f} % new, "
        f"{100 * ecs_count / args.count:.1f} % with ECS",
        file=sys.stderr,
    )


def paths(args: argparse.Namespace) -> None:
    with open(args.source, "rb") as source:
        data = source.read()
    offset = written = 0
    out = sys.stdout
    while offset < len(data) and written < args.count:
        (length,) = struct.unpack_from(">H", data, offset)
        message = data[offset + 2 : offset + 2 + length]
        offset += 2 + length
        out.write("/dns-query?dns=" + base64.urlsafe_b64encode(message).decode().rstrip("=") + "\n")
        written += 1


def main() -> None:
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    zone_command = commands.add_parser("zone")
    zone_command.add_argument("--names", type=int, required=True)
    zone_command.add_argument("--seed", type=int, default=1)
    query_command = commands.add_parser("queries")
    query_command.add_argument("--names", type=int, required=True)
    query_command.add_argument("--count", type=int, required=True)
    query_command.add_argument("--tag", required=True)
    query_command.add_argument("--seed", type=int, default=1)
    query_command.add_argument("--zipf", type=float, default=1.0)
    query_command.add_argument("--new", type=float, default=0.05)
    query_command.add_argument("--ecs", type=float, default=0.5)
    query_command.add_argument("--networks", type=int, default=300)
    query_command.add_argument("--out", required=True)
    paths_command = commands.add_parser("paths")
    paths_command.add_argument("--from", dest="source", required=True)
    paths_command.add_argument("--count", type=int, default=1 << 62)
    args = parser.parse_args()
    if args.command == "zone":
        sys.stdout.write(zone(args.names, args.seed))
    elif args.command == "paths":
        paths(args)
    else:
        queries(args)


if __name__ == "__main__":
    main()
