"""``ioprof run``'s own process only reads what the script's processes measured: it takes the
versions they ran with from their observations and never imports torch (2.4 s at the end of
every run, before its report, on the project's 2-core machine)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

# a script with one DataLoader over tensors: observed, with no dataset on disk and no probe
SCRIPT = textwrap.dedent(
    """
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    data = TensorDataset(torch.zeros(16, 3, 8, 8), torch.zeros(16, dtype=torch.long))
    for images, labels in DataLoader(data, batch_size=4):
        images.sum()
    """
)

PARENT = textwrap.dedent(
    """
    import sys
    from ioprof import cli

    rc = cli.main(["run", "--no-probe", "--no-inside", "--out", sys.argv[1], "--", sys.executable, sys.argv[2]])
    print("torch imported here:", "torch" in sys.modules, "rc:", rc)
    """
)


def test_run_takes_the_scripts_versions_and_its_own_process_never_imports_torch(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    out = tmp_path / "out"
    p = subprocess.run(
        [sys.executable, "-c", PARENT, str(out), str(script)], capture_output=True, text=True, timeout=300
    )
    assert "torch imported here: False rc: 0" in p.stdout, (p.stdout, p.stderr[-3000:])
    import torch  # this process's torch is the script's: the same interpreter

    machine = json.loads((out / "results.json").read_text())["machine"]
    assert (machine["python"], machine["torch"]) == (sys.version.split()[0], torch.__version__)
    # the script never imported torchvision: said as empty, not taken from this process
    assert machine["torchvision"] == ""
    (observed,) = [json.loads(f.read_text()) for f in (out / "observed").glob("observed-*.json")]
    assert observed["versions"]["torch"] == torch.__version__
