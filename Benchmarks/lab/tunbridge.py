#!/usr/bin/env python3
"""A userspace "netem" for the latency lab: two TUN devices bridged by this process.

Packets the client side (TUN `--outer`, in the host's namespace) sends to the lab's addresses are held for the
address's delay, or dropped, and then written into the lab's namespace (TUN `--inner`, moved there by the caller),
where the servers listen. Answers travel back at once. A one-way delay of D adds D to every round trip, the TCP
handshake included, which a relay in user space cannot do. Loopback is left alone.

    tunbridge.py --outer hdl0 --inner hdl1 --delay 10.77.0.2=20 --delay 10.77.0.3=80 --drop 10.77.0.1 --ready FILE

With --syn-log FILE, every TCP connection attempt towards the lab (a SYN without ACK, retransmissions included) is
appended to FILE as `IP PORT SOURCE-PORT`, so a caller can count the dials per address (a retransmitted SYN keeps
its source port).

The devices are created here (so the caller can move the inner one into the namespace after FILE appears) and live
as long as this process. Stops on SIGTERM.
"""
import argparse, fcntl, heapq, os, select, signal, socket, struct, sys, time

TUNSETIFF = 0x400454CA
IFF_TUN, IFF_NO_PI = 0x0001, 0x1000


def open_tun(name):
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    os.set_blocking(fd, False)
    return fd


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--outer", required=True)
    parser.add_argument("--inner", required=True)
    parser.add_argument("--delay", action="append", default=[], help="IP=MILLISECONDS, one way")
    parser.add_argument("--drop", action="append", default=[], help="IP whose packets are all dropped")
    parser.add_argument("--ready", required=True, help="file written once both devices exist")
    parser.add_argument("--syn-log", help="file that gets one line `IP PORT SOURCE-PORT` per SYN towards the lab")
    args = parser.parse_args()
    delays = {}
    for item in args.delay:
        ip, ms = item.split("=")
        delays[socket.inet_aton(ip)] = float(ms) / 1000
    dropped = {socket.inet_aton(ip) for ip in args.drop}

    outer, inner = open_tun(args.outer), open_tun(args.inner)
    with open(args.ready, "w") as ready:
        ready.write("ready\n")
    running = True

    def stop(*_):
        nonlocal running
        running = False

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    held = []  # (due, sequence, packet)
    sequence = 0
    while running:
        now = time.monotonic()
        while held and held[0][0] <= now:
            _, _, packet = heapq.heappop(held)
            try:
                os.write(inner, packet)
            except OSError:
                pass
        timeout = max(0.0, held[0][0] - now) if held else 0.5
        try:
            readable, _, _ = select.select([outer, inner], [], [], timeout)
        except InterruptedError:
            continue
        for fd in readable:
            while True:
                try:
                    packet = os.read(fd, 65535)
                except BlockingIOError:
                    break
                except OSError:
                    break
                if len(packet) < 20 or packet[0] >> 4 != 4:
                    continue  # IPv4 only; IPv6 router solicitations and the like are dropped
                if fd == inner:
                    try:
                        os.write(outer, packet)
                    except OSError:
                        pass
                    continue
                destination = packet[16:20]
                if args.syn_log:
                    log_syn(args.syn_log, packet)
                if destination in dropped:
                    continue
                delay = delays.get(destination, 0.0)
                if delay <= 0:
                    try:
                        os.write(inner, packet)
                    except OSError:
                        pass
                else:
                    sequence += 1
                    heapq.heappush(held, (time.monotonic() + delay, sequence, packet))


def log_syn(path, packet):
    """Appends `IP PORT SOURCE-PORT` to `path` when `packet` is a TCP SYN without ACK."""
    header = (packet[0] & 0x0F) * 4
    if packet[9] != 6 or len(packet) < header + 14:
        return
    flags = packet[header + 13]
    if flags & 0x02 and not flags & 0x10:
        source, port = struct.unpack("!HH", packet[header : header + 4])
        with open(path, "a") as log:
            log.write(f"{socket.inet_ntoa(packet[16:20])} {port} {source}\n")


if __name__ == "__main__":
    main()
