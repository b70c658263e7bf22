"""The rigs the end-to-end tests share, made once per test run: building a rate-limited sshfs
mount and its datasets costs tens of seconds, and every test that needs one reads the same."""

from __future__ import annotations

from collections.abc import Iterator

import netfs
import pytest

RATE_MBIT = 8.0  # about 1 MB/s: 25 JPEGs of 40 kB a second


@pytest.fixture(scope="session")
def netrig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[netfs.NetMount, netfs.Served]]:
    """An sshfs mount and an HTTP server behind one 8 Mbit/s link, with the datasets served."""
    why = netfs.unavailable()
    if why:
        pytest.skip(why)
    with netfs.net_mount(tmp_path_factory.mktemp("netrig"), RATE_MBIT) as mount:
        yield mount, netfs.serve_everything(mount)
