"""A folder served over HTTP on 127.0.0.1 by a thread of the test's own process (no link shaping:
for what only needs URLs that answer; the shaped rigs are ``netfs``)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def served(folder: str) -> Iterator[str]:
    """``folder`` over HTTP while the block runs; yields its base URL (``http://127.0.0.1:PORT``)."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, directory=folder, **kw)

        def log_message(self, *a: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
