from __future__ import annotations

from ioprof.cli import console

if __name__ == "__main__":
    console()
