"""Every threshold a verdict or a finding is decided by, named, with its source."""

from __future__ import annotations

from ioprof.core.percent import pct
from ioprof.core.vocab import InputClass

# ioprof place: a candidate must hold the whole dataset with this much to spare.
SPACE_HEADROOM = 1.05

# TensorFlow's input-pipeline analyzer: share of step time waiting for input.
HIGHLY_INPUT_BOUND_SHARE = 0.20
MODERATELY_INPUT_BOUND_SHARE = 0.05
# A measurement outside its predicted range by more than this (or than its own interval, if
# wider) is not explained by the stage ceilings.
RESIDUAL_TOLERANCE = 0.15
# MLPerf Storage asks for a dataset of at least 5x the host's RAM so that it cannot be cached.
DATASET_TO_RAM_FOR_COLD_EPOCHS = 5.0
# A decode ceiling whose 95 % interval lies wholly above this multiple of the compute ceiling
# cannot be what limits training at its setting (nor in any prediction built from the ceilings,
# which take the smallest rate): its probe may stop there, at one of its fixed looks, instead of
# narrowing an interval no verdict depends on to ±5 % (on a shared 2-core VM it rarely does within
# the 8 s cap: groups of 0.8 s vary by about 10 %).
DECODE_ABOVE_COMPUTE = 2.0
# A loader whose read() calls account for under this share of the bytes its samples hold got them
# another way (page faults on a memory-mapped file: an Arrow table): the share of its samples'
# bytes storage delivered is then what was fetched ÷ those bytes (the Hugging Face run in the tests
# read 5 kB through read() for 184 rows of 40 kB; a read() loader reads at least what it decodes).
READ_CALLS_MIN_SHARE = 0.1
# A loader that fetched at most this share of the bytes it read was not fed by its storage in its
# window: its reads came from a copy (the page cache, or a cache of its own that its first pass
# filled) — storage limits nothing there, and every epoch does not read it.
FETCHED_NOTHING_SHARE = 0.01
# A window that fetched at most this share of what it read was served mostly by a copy: the
# bandwidth a pass reading all of it from storage would draw is said with the share it fetched.
# (Words only: the verdict scales storage by the share whatever it is.)
MOSTLY_A_COPY_SHARE = 0.5
# Storage "suffices" with this headroom over the bandwidth training draws.
STORAGE_HEADROOM = 1.2
# Storage "scales with readers" (per-file latency, not bandwidth, limits it) when the most
# readers measured get at least this much more than one reader.
STORAGE_SCALING = 1.5
# The compute ceiling is a tuned trainer's when it reaches this share of the GPU's published
# ResNet-50 figure (presets.py cites each); below it, input-bound verdicts are understated.
PUBLISHED_SHARE_TUNED = 0.90
# MLPerf Storage: the accelerator must stay at least 90 % busy for ResNet-50.
MIN_BUSY_SHARE = 0.90
# A verified-cold window is contradicted when it read at least this much and its block-I/O
# counters show less than this share of it fetched.
CONTRADICTION_MIN_BYTES = 1_000_000
CONTRADICTION_SHARE = 0.05
# A warm window (at least CONTRADICTION_MIN_BYTES read) may fetch this share of it from storage
# (a file's metadata, a neighbour's readahead) and still be warm; more, and its pages were evicted
# after they were warmed: memory pressure, or a host that reclaims idle pages on its own (this
# project's CI host runs DAMON's pageout: one warm cell fetched 28 % of its reads, another 17 %).
WARM_MAX_FETCHED_SHARE = 0.10
# A loader's fetched MB/s differs from the storage read alone only beyond this share of the
# storage ceiling's interval's ends (impossible above its upper end; the storage waiting below its
# lower end). The two are read over different windows by different counters: the
# window's edges (reads in flight when it opens or closes, readahead) and a link's burst allowance
# add a little to one and not the other. A steady token-bucket link read alone gave 0.967-0.973 MB/s
# and the PyTorch examples' script on it fetched 0.978 MB/s by the FUSE daemon's counter (0.5 %
# above): the same reads, not another reader's. A counter that sees another loader or process sees
# tens of percent more; a loader whose workers decode between reads draws tens of percent less.
FETCHED_VS_STORAGE_TOLERANCE = 0.05
# ioprof compare: a change counts as real only when the two runs' 95 % intervals do not overlap
# and the rates differ by more than this. Six repeats of one sweep cell (3 s windows) on the
# 2-core development VM ranged over 484-523 img/s, 8 %, while each run's own interval was ±1.5 %;
# a later repeat in the test suite came out 12 % slower, beyond both intervals: a window cannot see
# how a shared machine drifts between runs. Repeats of the reference given to compare raise the
# floor to the spread they show (so a repeat is never a change beyond it).
COMPARE_MIN_EFFECT = 0.10
# ioprof scale: a resource is saturated (and so the stage that stops more ranks) when the ranks
# together use at least this share of it: CPU cores on a host, or the storage's measured bandwidth
# at the same number of readers.
SATURATED_SHARE = 0.85
# ioprof scale: a rank is a straggler when it waits for data this much longer (share of its
# step time) than the median rank, beyond both intervals.
STRAGGLER_GAP = 0.05
# ioprof devices: a second (third…) GPU "pays off" when DDP keeps at least this share of perfect
# scaling (N GPUs ÷ N × one GPU). ioprof's choice: below it, most of what the extra GPU costs is
# lost to communication and waiting.
MULTI_DEVICE_PAYS_EFFICIENCY = 0.75
# The kernel's split of the waits (``results.WaitSplit``): it decides a stage only from at least
# this many waits whose producer was known, and only when the largest part's 95 % interval lies
# above every other part's — ioprof's choice: a wrong stage is worse than none.
KERNEL_SPLIT_MIN_UNITS = 10
# Worker memory growth is fitted only after each process's warm-up — its first two batches and at
# least its first tenth of the samples it produced (pages first written after the fork: imports,
# decoder and allocator buffers) — and only from this many samples over this many readings after it
# (an evaluation pass of a few dozen samples a worker is too short to judge).
GROWTH_WARMUP_BATCHES = 2
GROWTH_WARMUP_SHARE = 0.10
GROWTH_MIN_SAMPLES = 100
GROWTH_MIN_READINGS = 3
# Growth smaller than this per 1,000 samples is allocator noise; so is a growth that added less than
# this over the readings it was fitted to (a heap settling, a decoder's buffers: not told apart
# from a leak at that size).
GROWTH_NOISE_BYTES = 1_000_000
GROWTH_MIN_WINDOW_BYTES = 8_000_000
# What persistent workers keep from epoch to epoch is a finding only where it would fill the RAM
# available within a training this long, even at its interval's low end: the question a user has
# is whether the loader runs out before the training ends. ImageNet recipes train 90-600 epochs;
# the longest, "ResNet strikes back" A1 (timm), 600. A worker that keeps 2 MB an epoch on a host
# with 20 GB free fills it after thousands: its figure stays in the look inside, with no warning.
TRAINING_EPOCHS_AT_MOST = 600
# A growth is reported only where it goes on in the later half of each process's readings at no
# less than this share of its rate (an allocator settling slows down; a leak or copy-on-read does
# not). Intervals cannot decide it: a 14 s window holds 2 readings a worker there (one degree of
# freedom), and a dataset keeping 64 kB a sample (196 MB over the window) was called "not steady";
# with 4 readings a worker its later half read 1.5 % slower than the whole, beyond both intervals.
GROWTH_LATER_SHARE = 0.5
# Copy-on-read is named only for a dataset holding at least this many Python objects, and only
# for a growth over an epoch within what touching them could copy (whole 4 kB pages for objects of
# tens of bytes: at most this many times their own size).
COPY_ON_READ_MIN_OBJECTS = 50_000
COPY_ON_READ_PAGE_FACTOR = 64.0
GROWTH_RULE = (
    f"each process's first {GROWTH_WARMUP_BATCHES} batches and at least its first {pct(GROWTH_WARMUP_SHARE, 0)} "
    f"of samples are left out (a fresh worker's warm-up); growth is fitted to what follows, from at least "
    f"{GROWTH_MIN_SAMPLES} samples over {GROWTH_MIN_READINGS} readings; it is reported only where it adds at "
    f"least {GROWTH_MIN_WINDOW_BYTES / 1e6:.0f} MB over them, goes on in their later half at no less than "
    f"{pct(GROWTH_LATER_SHARE, 0)} of its rate, and never above what the process holds"
)


def classify_input_bound(share: float) -> InputClass:
    """``highly`` (≥ 20 %), ``moderately`` (≥ 5 %) or ``not`` input-bound."""
    if share >= HIGHLY_INPUT_BOUND_SHARE:
        return "highly"
    if share >= MODERATELY_INPUT_BOUND_SHARE:
        return "moderately"
    return "not"
