#!/usr/bin/env bash
# What a lent GPU machine is for, in two device calls of under 10 minutes each, run in place
# (nothing installed there). Each part writes one archive and its log under $OUT (the device tool
# brings back at most 8 files): unpack it here into reports/ and read gpu.json first.
#
#   sweep  (about 6 min) the gpu-marked tests, then the default `python -m ioprof sweep
#          --workers 1,4,8` to its end on the GPU, its report folder the example
#          (bench_gpu.py --skip-compute: the sweep measures the tuned compute ceiling itself)
#   watch  (about 3 min) `ioprof run` on the PyTorch examples' ImageNet script, unchanged
#          (resnet18, batch 64, 8 workers, one epoch of generated 256x192 JPEGs): its observing
#          cost a batch and its NVML readings; `ioprof devices` at batches 32 and 256; the cost of
#          each NVML call
#
#   run(command="bash benchmarks/gpu_lease.sh sweep", timeout_s=540)
#   run(command="bash benchmarks/gpu_lease.sh watch", timeout_s=300)
#
#   long   (about 1.5 min) the ImageNet example under `run` for 4 epochs: its observing cost a
#          batch over a run of 192 batches, not one of 48
#
# `bash benchmarks/gpu_lease.sh check` runs here, without a GPU: every command the parts run, at
# toy sizes on the CPU, so a lease is not spent finding a wrong option.
set -uo pipefail
cd "$(dirname "$0")/.."
part=${1:?"part: sweep, watch, long or check"}
repo=$PWD
export PYTHONPATH=$repo PYTHONUNBUFFERED=1
out=${OUT:-$(mktemp -d)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log="$out/lease-$part.log"

say() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$log"; }
step() {  # step SECONDS COMMAND...: one command, its output in the log, cut at SECONDS
  local limit=$1
  shift
  say "$*"
  local t0=$SECONDS
  timeout -s INT "$limit" "$@" 2>&1 | tee -a "$log"
  say "rc=${PIPESTATUS[0]} in $((SECONDS - t0)) s"
}

imagenet() {  # the example script on generated data: SIZE train images, then its arguments
  local n=$1
  shift
  python -m ioprof gen --resolutions 256x192 --images "$n" --out "$work/gen" >>"$log" 2>&1
  mkdir -p "$work/imagenet"
  [ -e "$work/imagenet/train" ] || mv "$work/gen/256x192" "$work/imagenet/train"
  python -m ioprof gen --resolutions 256x192 --images 256 --seed 1 --out "$work/genval" >>"$log" 2>&1
  [ -e "$work/imagenet/val" ] || mv "$work/genval/256x192" "$work/imagenet/val"
  # from the work folder: the script saves its checkpoints where it runs
  (cd "$work" && step "$1" python -m ioprof run --out "$work/reports/run-imagenet-example" -- \
    python "$repo/tests/scripts/thirdparty/pytorch_examples_imagenet/main.py" "$work/imagenet" "${@:2}")
}

{ nvidia-smi || true; python -c "import torch, torchvision; print(torch.__version__, torchvision.__version__)"; } >>"$log" 2>&1
case "$part" in
  sweep)
    step 500 python benchmarks/bench_gpu.py --skip-compute --out "$work/reports"
    ;;
  watch)
    imagenet 3072 200 -a resnet18 -b 64 -j 8 --epochs 1 --print-freq 16
    step 60 python -m ioprof devices --models mlp,lenet5,resnet50 --batch-sizes 32,256 --seconds 8 \
      --out "$work/reports/devices"
    step 20 python benchmarks/bench_nvml_calls.py
    ;;
  long)
    imagenet 3072 200 -a resnet18 -b 64 -j 8 --epochs 4 --print-freq 48
    ;;
  check)
    imagenet 64 300 -a resnet18 -b 16 -j 2 --epochs 1 --print-freq 2 --no-accel
    step 200 python -m ioprof devices --models mlp --batch-sizes 32 --seconds 4 --out "$work/reports/devices"
    step 60 python benchmarks/bench_gpu.py --skip-compute --out "$work/reports"  # refuses here: exit 2
    ;;
  *)
    echo "gpu_lease: no part $part (sweep, watch, long or check)" >&2
    exit 2
    ;;
esac
tar czf "$out/lease-$part.tar.gz" -C "$work" reports 2>>"$log" || say "nothing to archive"
say "done: $out/lease-$part.tar.gz"
