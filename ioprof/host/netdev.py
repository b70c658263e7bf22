"""Bytes a network interface received, from the kernel (``/proc/net/dev`` of the reading
process's network namespace): what crossed the network from a source reached by URL.

A loader reading through ``curl`` is handed its bytes through a pipe, and the kernel buffers a
socket's bytes before the reader takes them: what a loader's processes read over a short window
can run ahead of, or behind, what the link delivered. The interface counts what arrived. It counts
the whole host's traffic on that interface (like NFS client statistics): shared among a host's
ranks, and said to be host-wide.
"""

from __future__ import annotations

import ipaddress
import socket
import struct
import time
from collections.abc import Callable

from ioprof.host.libc import read_whole_held


def interface_for(host: str) -> str | None:
    """The interface the kernel routes ``host`` through (``lo`` for a loopback address), or None."""
    try:
        addr = ipaddress.ip_address(socket.gethostbyname(host))
    except (OSError, ValueError):
        return None
    if addr.is_loopback:
        return "lo"
    best: tuple[int, str] | None = None
    try:
        with open("/proc/net/route", encoding="ascii") as f:
            rows = f.read().splitlines()[1:]
    except OSError:
        return None
    for row in rows:
        fields = row.split()
        if len(fields) < 8:
            continue
        iface, dest, mask = fields[0], int(fields[1], 16), int(fields[7], 16)
        # /proc/net/route holds addresses in host byte order (little-endian on x86)
        dest_addr = struct.unpack("!I", struct.pack("<I", dest))[0]
        mask_addr = struct.unpack("!I", struct.pack("<I", mask))[0]
        if int(addr) & mask_addr == dest_addr:
            bits = bin(mask_addr).count("1")
            if best is None or bits > best[0]:
                best = (bits, iface)
    return best[1] if best else None


def rx_all() -> dict[str, int]:
    """Bytes each interface has received so far (this process's network namespace); {} unreadable.
    Read holding the GIL: it is read at a batch, in the training loop (``libc``)."""
    text = read_whole_held("/proc/self/net/dev")
    if text is None:
        return {}
    out = {}
    for row in text.decode("ascii", "replace").splitlines()[2:]:
        name, _, rest = row.partition(":")
        out[name.strip()] = int(rest.split()[0])
    return out


def rx_bytes(iface: str) -> int | None:
    """Bytes ``iface`` has received so far (this process's network namespace), or None."""
    return rx_all().get(iface)


# A reading that stopped leaves its bytes in flight: the sender's queue, the link's, a socket's
# buffer, and the time the closing reset takes to reach the sender behind them (on a shaped link,
# up to a second of the link's rate: tests/unit/recorded/test_cached_streams.py). The link is quiet
# again once it carries under this share of the rate the reading drew.
QUIET_SHARE = 0.01
QUIET_POLL_S = 0.1
QUIET_CAP_S = 3.0  # an interface never quiet (other traffic on it) is waited on no longer


def wait_quiet(
    iface: str,
    rate_bytes_per_s: float,
    *,
    clock: Callable[[], float] = time.perf_counter,
    sleep: Callable[[float], None] = time.sleep,
    rx: Callable[[str], int | None] = rx_bytes,
) -> float:
    """Wait until ``iface`` receives under ``QUIET_SHARE`` of ``rate_bytes_per_s`` over a poll —
    what a reading that drew that rate left in flight has arrived — or ``QUIET_CAP_S``; returns the
    seconds waited. A reading's bytes that land after it ends would be counted in whatever window
    the interface's counter opens next."""
    t0 = clock()
    last = rx(iface)
    while last is not None and clock() - t0 < QUIET_CAP_S:
        sleep(QUIET_POLL_S)
        now = rx(iface)
        if now is None or now - last < QUIET_SHARE * rate_bytes_per_s * QUIET_POLL_S:
            break
        last = now
    return clock() - t0


ESTABLISHED = "01"  # a TCP socket's state in /proc/net/tcp


def tcp_address(hex_address: str) -> str:
    """An address of /proc/net/tcp or tcp6 (``0100007F:1388``) as text, without its port: the
    kernel writes each 32-bit word in host byte order (little-endian on x86)."""
    raw = bytes.fromhex(hex_address.partition(":")[0])
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    addr = ipaddress.ip_address(words)
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return str(addr.ipv4_mapped)
    return str(addr)


def parse_tcp(text: str, inodes: set[str]) -> list[str]:
    """The remote addresses of the established connections in /proc/net/tcp(6) ``text`` whose
    socket is one of ``inodes``."""
    found: list[str] = []
    for row in text.splitlines()[1:]:
        fields = row.split()
        if len(fields) > 9 and fields[3] == ESTABLISHED and fields[9] in inodes:
            found.append(tcp_address(fields[2]))
    return found


def _sockets(pid: int) -> set[str]:
    """The inodes of the sockets ``pid`` holds."""
    from ioprof.host.procstat import descriptors

    return {t[len("socket:[") : -1] for _, t in descriptors(pid) if t.startswith("socket:[")}


def peers(pids: list[int], parent: int) -> list[str]:
    """The remote addresses the processes' own established TCP connections reach, each once: where
    a dataset that names no files fetches its bytes over the network (an object store's client in
    each worker). A connection they inherited from ``parent`` (a process group's, a client made
    before the fork) is the parent's, not theirs: left out. The tables, longer than one read
    gives, are read to their end."""
    inodes: set[str] = set().union(*(_sockets(pid) for pid in pids)) - _sockets(parent) if pids else set()
    if not inodes:
        return []
    seen: dict[str, None] = {}
    for table in ("tcp", "tcp6"):  # the processes' own network namespace: the first one's
        try:
            with open(f"/proc/{pids[0]}/net/{table}", encoding="ascii", errors="replace") as f:
                seen.update(dict.fromkeys(parse_tcp(f.read(), inodes)))
        except OSError:
            continue
    return list(seen)
