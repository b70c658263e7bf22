"""Waiting for a link to fall quiet after a reading (``netdev.wait_quiet``): the bytes a reading
left in flight arrive after it ends, and an interface's counter would count them in the next window."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ioprof.host import netdev

RATE = 1_000_000.0  # bytes/s the reading drew


def _link(per_poll: list[int]) -> tuple[Callable[[], float], Callable[[float], None], Callable[[str], int]]:
    """A fake clock and interface: each poll's bytes as given, then as the last one forever."""
    now, total, polls = [0.0], [0], list(per_poll)

    def sleep(s: float) -> None:
        now[0] += s
        total[0] += polls.pop(0) if len(polls) > 1 else polls[0]

    return (lambda: now[0]), sleep, (lambda iface: total[0])


def test_the_wait_lasts_as_long_as_the_readings_bytes_go_on_arriving() -> None:
    """Ten polls at the link's rate (a queue draining), then a trickle: quiet at the first trickle."""
    at_rate = int(RATE * netdev.QUIET_POLL_S)
    clock, sleep, rx = _link([at_rate] * 10 + [100])
    waited = netdev.wait_quiet("lo", RATE, clock=clock, sleep=sleep, rx=rx)
    assert waited == pytest.approx(11 * netdev.QUIET_POLL_S)


def test_an_interface_that_never_falls_quiet_is_waited_on_no_longer_than_the_cap() -> None:
    clock, sleep, rx = _link([int(RATE * netdev.QUIET_POLL_S / 2)])  # other traffic, half the rate
    waited = netdev.wait_quiet("lo", RATE, clock=clock, sleep=sleep, rx=rx)
    assert netdev.QUIET_CAP_S <= waited <= netdev.QUIET_CAP_S + netdev.QUIET_POLL_S


def test_a_quiet_link_costs_one_poll() -> None:
    clock, sleep, rx = _link([0])
    assert netdev.wait_quiet("lo", RATE, clock=clock, sleep=sleep, rx=rx) == pytest.approx(
        netdev.QUIET_POLL_S
    )


TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1679 1 0
   1: 0100007F:A07F 0100007F:1388 01 00000000:00000000 00:00000000 00000000     0        0 5001 1 0
   2: 0100007F:A080 0A00020F:01BB 01 00000000:00000000 00:00000000 00000000     0        0 5002 1 0
   3: 0100007F:A081 0A00020F:01BB 06 00000000:00000000 00:00000000 00000000     0        0 5003 1 0
"""


def test_the_connections_of_the_given_sockets_are_read_from_the_kernels_table() -> None:
    # established (01) and held by the processes: a listening socket (0A), a closing one (06)
    # and another process's are not where a dataset's bytes come from
    assert netdev.parse_tcp(TCP, {"5001", "5002", "5003", "1679"}) == ["127.0.0.1", "15.2.0.10"]
    assert netdev.parse_tcp(TCP, {"9999"}) == []


def test_tcp6_addresses_are_read_word_by_word_and_mapped_ipv4_is_told_as_ipv4() -> None:
    assert netdev.tcp_address("B80D01200000000000000000A1000000:0050") == "2001:db8::a1"
    assert netdev.tcp_address("0000000000000000FFFF00000100007F:1388") == "127.0.0.1"
