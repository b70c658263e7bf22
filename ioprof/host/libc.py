"""The C library, loaded once for every module of the house that calls it directly (the page
cache's residency calls, the heap's trim)."""

from __future__ import annotations

import ctypes
import ctypes.util

LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
