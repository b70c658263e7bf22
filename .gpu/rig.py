import json, sys, time, signal
sys.path.insert(0, "/work/main/tests/support")
from pathlib import Path
import netfs
work = Path("/tmp/rig"); import shutil; shutil.rmtree(work, ignore_errors=True); work.mkdir()
with netfs.net_mount(work, float(sys.argv[1]) if len(sys.argv) > 1 else 8.0) as m:
    s = netfs.serve_everything(m)
    Path("/tmp/rig.json").write_text(json.dumps({"data": str(s.data), "archive": str(s.archive), "urls": s.shard_urls, "plain": s.plain_mb_per_s, "http": s.plain_http_mb_per_s, "hf": str(s.hf), "ns": m.netns}))
    print("ready", flush=True)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    while True: time.sleep(1)
