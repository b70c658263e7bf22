"""A dataset that names no files and whose workers fetch each sample over a kept-alive HTTP
connection (an object store's client in each worker, as LitData's and MosaicML Streaming's are):
its fetched bytes are counted on the interface its workers' connections arrive on, over the window
and before it, against what the server sent over the same seconds — taken outside ioprof, by the
server itself."""

from __future__ import annotations

import http.client
import http.server
import threading
import time
from typing import Any, ClassVar

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

import ioprof

SAMPLE_BYTES = 40_000  # a photograph's JPEG
SERVE_S = 0.004  # the server's own time per sample: the loop waits for it, as for a store


class _Served(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # kept alive: one connection a worker, held open between samples
    sent: ClassVar[list[tuple[float, int]]] = []

    def do_GET(self) -> None:
        time.sleep(SERVE_S)
        body = bytes(SAMPLE_BYTES)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        _Served.sent.append((time.time(), len(body)))

    def log_message(self, *args: Any) -> None:
        pass


class OverHttp(Dataset):  # type: ignore[type-arg]
    """Each worker opens its connection at its first sample and keeps it."""

    def __init__(self, port: int, n: int) -> None:
        self.port, self.n = port, n
        self.conn: http.client.HTTPConnection | None = None

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port)
        self.conn.request("GET", f"/{i}")
        body = self.conn.getresponse().read()
        return torch.tensor([float(len(body))]), i % 2


@pytest.mark.rig  # the loopback's bytes are the whole host's: nothing else may use it meanwhile
def test_a_dataset_whose_workers_fetch_over_connections_is_counted_on_their_interface(figure) -> None:  # type: ignore[no-untyped-def]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Served)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Served.sent = []
    try:
        loader = DataLoader(OverHttp(server.server_address[1], 400), batch_size=4, num_workers=2)
        with ioprof.watch(steps=40, seconds=None, probe=False) as w:
            for x, _ in loader:
                x.sum()
        seen = w.watcher.observation()["loaders"][0]
        r = w.result()
    finally:
        server.shutdown()
        server.server_close()
    (cell,) = r.cells
    (lo,) = r.loaders
    assert lo.dataset_root == ""  # no file was made up for it
    f = cell.fetched
    assert (
        f.method == "interface-rx" and "lo, the interface its workers' connections to 127.0.0.1" in f.source
    )
    # over the very spans ioprof read its counters (wall-clock), what the server sent
    spans = seen["cpu"]["spans_wall"]
    sent = sum(n for t, n in _Served.sent if any(a <= t <= b for a, b in spans))
    # the interface counts headers, requests and the samples still in flight at the window's
    # edges (the prefetch: 2 batches a worker) beside the bodies sent inside it
    in_flight = 2 * 2 * 4 * SAMPLE_BYTES
    figure(
        f"a dataset fetching over kept-alive HTTP connections: {f.bytes / 1e6 if f.bytes else 0:.3f} MB "
        f"received on lo over the window, the server sent {sent / 1e6:.3f} MB of samples over the same spans"
    )
    assert f.bytes is not None and abs(f.bytes - sent) <= 0.05 * sent + in_flight, (f.bytes, sent)
    # before the window — the workers' start, the warm-up — what its connections fetched too, though
    # they were found only at its first batch: every interface was read until then (broken once —
    # the interface read only once known —: it was "unknown")
    assert lo.before is not None
    g = lo.before.fetched
    early = sum(n for t, n in _Served.sent if t < spans[0][0])
    figure(
        f"the same dataset before its window ({lo.before.batches} batches, {lo.before.seconds:.2f} s): "
        f"{g.bytes / 1e6 if g.bytes else 0:.3f} MB received on lo, the server sent {early / 1e6:.3f} MB"
    )
    assert g.method == "interface-rx" and g.bytes is not None, g
    assert abs(g.bytes - early) <= 0.05 * early + in_flight, (g.bytes, early)


class Local(Dataset):  # type: ignore[type-arg]
    """Samples made in memory: nothing fetched."""

    def __len__(self) -> int:
        return 200

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        time.sleep(SERVE_S)
        return torch.zeros(1), i % 2


@pytest.mark.rig  # as above: the loopback is the whole host's
def test_a_connection_the_workers_inherited_is_not_taken_for_theirs() -> None:
    """The training process holds a connection when its workers are forked (a process group's, a
    logger's): they hold it too, but it is the training process's, and it fetches nothing of theirs."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Served)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1])
    try:
        conn.request("GET", "/0")
        conn.getresponse().read()  # established, and held open through the loop
        with ioprof.watch(steps=40, seconds=None, probe=False) as w:
            for x, _ in DataLoader(Local(), batch_size=4, num_workers=2):
                x.sum()
        r = w.result()
    finally:
        conn.close()
        server.shutdown()
        server.server_close()
    (cell,) = r.cells
    assert cell.fetched.method == "unknown", cell.fetched
