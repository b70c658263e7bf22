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


def rx_bytes(iface: str) -> int | None:
    """Bytes ``iface`` has received so far (this process's network namespace), or None."""
    try:
        with open("/proc/self/net/dev", encoding="ascii") as f:
            rows = f.read().splitlines()[2:]
    except OSError:
        return None
    for row in rows:
        name, _, rest = row.partition(":")
        if name.strip() == iface:
            return int(rest.split()[0])
    return None
