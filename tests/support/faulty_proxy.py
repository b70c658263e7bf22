"""A fault-injecting HTTP proxy in front of an S3-API server, for tests: every request is forwarded
to the upstream port unchanged, except that a share of them is answered 503 SlowDown at once — what S3 says when a client asks too fast — the way a throttled store
fails. moto's server does not check signatures, so forwarding a request signed for the proxy's
address is accepted.

    python faulty_proxy.py LISTEN_PORT UPSTREAM_PORT FAIL_SHARE [DELAY_S]

Each answered request is counted on stdout as one line: ``ok`` or ``503``. ``DELAY_S``: every
request waits this long first — a store's time to its first byte (``benchmarks/bench_sample_copy.py``).
"""

from __future__ import annotations

import http.client
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SLOWDOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n'
    b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"
)
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade"}


def main() -> None:
    listen, upstream, share = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    delay_s = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    # Evenly spread, not drawn at random: the n-th request fails when floor(n * share) steps up,
    # so any run of requests holds the share to within one (a seeded draw held 9 of the first 90
    # at 0.2, and a test that checked the share failed on it).
    seen = [0]
    lock = threading.Lock()

    def refuse() -> bool:
        with lock:
            seen[0] += 1
            n = seen[0]
        return int(n * share) > int((n - 1) * share)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _any(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else None
            time.sleep(delay_s)
            if refuse():
                self.send_response(503)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(SLOWDOWN)))
                self.end_headers()
                self.wfile.write(SLOWDOWN)
                print("503", flush=True)
                return
            conn = http.client.HTTPConnection("127.0.0.1", upstream, timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            conn.request(self.command, self.path, body=body, headers=headers)
            reply = conn.getresponse()
            payload = reply.read()
            self.send_response(reply.status)
            for k, v in reply.getheaders():
                if k.lower() not in HOP_BY_HOP and k.lower() != "content-length":
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)
            conn.close()
            print("ok", flush=True)

        do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _any

    ThreadingHTTPServer(("127.0.0.1", listen), Handler).serve_forever()


if __name__ == "__main__":
    main()
