from __future__ import annotations

import pytest

from ioprof.config import parse_storage_profile
from ioprof.pagecache import filesystem_of
from ioprof.storage import EmulatedStorage, probe_storage, read_file


def test_probe_reads_every_byte_and_counts_fetches(blob_files: list[str]) -> None:
    fs = filesystem_of(blob_files[0])
    s = probe_storage(blob_files, 4, fs, "cold")
    assert s.files == 40 and s.bytes == 40 * 256 * 1024
    assert len(s.latency_s) == 40 and 0 < s.latency_p50_s <= s.latency_p99_s
    assert s.read_mb_per_s == pytest.approx(s.bytes / 1e6 / s.elapsed_s)
    if not fs.ram_backed:
        assert s.cache.verified
        assert s.storage_read_bytes >= 0.9 * s.bytes  # cold: the kernel fetched the bytes


@pytest.mark.parametrize("concurrency", [1, 4])
def test_emulated_bandwidth_within_10_percent(blob_files: list[str], concurrency: int) -> None:
    emu = EmulatedStorage(parse_storage_profile("custom:40"))
    s = probe_storage(blob_files, concurrency, filesystem_of(blob_files[0]), "warm", emu)
    assert s.emulated == "custom:40:0"
    assert s.read_mb_per_s == pytest.approx(40.0, rel=0.10)


def test_emulated_latency_overlaps_across_readers(blob_files: list[str]) -> None:
    emu = EmulatedStorage(parse_storage_profile("custom:100000:20"))  # latency-bound
    fs = filesystem_of(blob_files[0])
    one = probe_storage(blob_files[:10], 1, fs, "warm", emu)
    assert one.latency_p50_s >= 0.020
    four = probe_storage(blob_files[:20], 4, fs, "warm", emu)
    assert four.files_per_s > 2.5 * one.files_per_s


def test_hdd_latency_is_serial(blob_files: list[str]) -> None:
    emu = EmulatedStorage(parse_storage_profile("hdd"))
    fs = filesystem_of(blob_files[0])
    four = probe_storage(blob_files[:12], 4, fs, "warm", emu)
    per_file_s = 0.006 + 256 * 1024 / 180e6
    assert four.files_per_s == pytest.approx(1 / per_file_s, rel=0.15)


def test_read_file_returns_the_bytes(blob_files: list[str]) -> None:
    with open(blob_files[0], "rb") as f:
        expected = f.read()
    assert read_file(blob_files[0]) == expected
    assert read_file(blob_files[0], EmulatedStorage(parse_storage_profile("nvme"))) == expected


def test_unreadable_files_are_skipped_and_counted(blob_files: list[str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    broken = tmp_path / "broken.bin"
    broken.symlink_to(tmp_path / "gone.bin")
    s = probe_storage([*blob_files, str(broken)], 2, filesystem_of(blob_files[0]), "warm")
    assert s.unreadable_files == 1 and s.files == 40 and len(s.latency_s) == 40
