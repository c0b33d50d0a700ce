#!/usr/bin/env bash
# The GPU tier on a lent GPU machine: Python 3.12, its own CUDA torch, no package registry.
#
#   1. install the carried wheels (.whl/, made here by scripts/fetch-gpu-wheels.sh) and this
#      checkout with --no-index: only what the machine lacks is taken from .whl/;
#   2. python3 -m pytest -m gpu (the suite's GPU tests);
#   3. one elastic resume and one fault scenario on nccl, through the example recipe
#      (scripts/gpu_recipe_checks.py: DCP model checkpoints on CUDA plus the loader state).
#
# Everything runs within GPU_CHECK_LIMIT_S seconds in total (default 480); each step gets
# what is left. Logs go to $OUT when it is set, else ./gpu-check-logs (at most 8 files).
# Exits non-zero when a step failed; summary.txt lists every step's status and duration.
# GPU_CHECK_SKIP_INSTALL=1 skips step 1 where the package is installed already;
# GPU_CHECK_ALLOW_SKIP=1 accepts a run whose GPU tests all skipped (a dry run on a CPU host).
set -uo pipefail
cd "$(dirname "$0")/.."

limit="${GPU_CHECK_LIMIT_S:-480}"
logs="${OUT:-$PWD/gpu-check-logs}"
python="${PYTHON:-python3}"
mkdir -p "$logs"
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
started=$(date +%s)
failed=0
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1

left() { echo $((limit - ($(date +%s) - started))); }

step() {  # step NAME COMMAND...: run with the time that is left, log to $logs/NAME.log
    local name=$1 budget t0 rc
    shift
    budget=$(left)
    if [ "$budget" -le 15 ]; then
        echo "$name: not run, the ${limit}s limit is spent" | tee -a "$logs/summary.txt"
        failed=1
        return
    fi
    t0=$(date +%s)
    timeout -k 10 "$budget" "$@" >"$logs/$name.log" 2>&1
    rc=$?
    [ "$rc" -eq 124 ] && echo "(stopped at the time limit)" >>"$logs/$name.log"
    echo "$name: exit $rc in $(($(date +%s) - t0))s" | tee -a "$logs/summary.txt"
    [ "$rc" -eq 0 ] || failed=1
    tail -n 3 "$logs/$name.log" | sed 's/^/    /'
}

{
    echo "gpu-check $(date -u +%FT%TZ), limit ${limit}s"
    { command -v nvidia-smi >/dev/null && nvidia-smi -L 2>&1; } || echo "nvidia-smi: not here"
    "$python" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "CUDA", torch.version.cuda, "devices", torch.cuda.device_count())' 2>&1
    env | grep -E '^(CUDA_VISIBLE_DEVICES|NCCL_|TORCH_NCCL_)' || echo "no CUDA_VISIBLE_DEVICES/NCCL_* settings"
} >"$logs/summary.txt"
cat "$logs/summary.txt"

if [ "${GPU_CHECK_SKIP_INSTALL:-0}" = 1 ]; then
    echo "install: skipped (GPU_CHECK_SKIP_INSTALL=1: the package is installed)" | tee -a "$logs/summary.txt"
elif [ ! -d .whl ] || [ -z "$(ls .whl)" ]; then
    echo "install: no .whl/ here; run scripts/fetch-gpu-wheels.sh and carry .whl" | tee -a "$logs/summary.txt"
    exit 1
else
    # --no-build-isolation: setuptools comes from the machine, as nothing can be downloaded.
    step install "$python" -m pip install --no-index --find-links .whl --no-build-isolation \
        --break-system-packages --disable-pip-version-check --no-cache-dir --no-compile .
fi
step gpu-tests "$python" -m pytest -m gpu -p no:cacheprovider -rA \
    --junitxml "$logs/gpu-tests.xml" --chaos-artifacts "$work/artifacts"
step recipe-checks "$python" -m pytest scripts/gpu_recipe_checks.py -p no:cacheprovider -rA \
    --junitxml "$logs/recipe-checks.xml" --chaos-artifacts "$work/artifacts"

# A GPU machine whose every GPU test skipped has checked nothing: that is a failure here
# (the rule is scripts/gpu-all-skipped.sh's, which the gpu workflow applies too).
if [ "${GPU_CHECK_ALLOW_SKIP:-0}" != 1 ] &&
    ! scripts/gpu-all-skipped.sh "$logs"/*-*.log | tee -a "$logs/summary.txt"; then
    failed=1
fi
if [ -d "$work/artifacts" ]; then
    tar -czf "$logs/artifacts.tgz" -C "$work" artifacts
fi
echo "total: $(($(date +%s) - started))s, $([ "$failed" -eq 0 ] && echo passed || echo FAILED)" |
    tee -a "$logs/summary.txt"
exit "$failed"
