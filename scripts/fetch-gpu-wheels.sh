#!/usr/bin/env bash
# Download the wheels a GPU machine needs to run the GPU tier, beyond its own torch, into
# .whl/ (git-ignored): cp312 manylinux x86_64 builds of everything pyproject.toml declares
# (zephon and its needs, hypothesis, pytest, pytest-xdist, toxiproxy-python, requests, psutil,
# py-spy, ...), resolved for Python 3.12, pinned by constraints/gpu.txt. Not the explore
# extra (matplotlib, coverage): the GPU tier draws and measures nothing.
# scripts/gpu-check.sh installs them there with --no-index: that machine reaches no registry.
#
# Usage: scripts/fetch-gpu-wheels.sh [DEST]      (DEST defaults to .whl)
# Env:   PYTHON (default python3), WHEELS_LIMIT_MIB (default 60: the transfer budget).
set -euo pipefail
cd "$(dirname "$0")/.."

dest="${1:-.whl}"
limit_mib="${WHEELS_LIMIT_MIB:-60}"
python="${PYTHON:-python3}"

# The project's dependencies, read from pyproject.toml (torch is deliberately not among them).
mapfile -t requirements < <("$python" - <<'EOF'
import tomllib
with open("pyproject.toml", "rb") as f:
    deps = tomllib.load(f)["project"]["dependencies"]
bad = [d for d in deps if d.lower().startswith(("torch", "nvidia"))]
if bad:
    raise SystemExit(f"pyproject.toml names {bad}: the GPU machine brings its own torch")
print("\n".join(deps))
EOF
)

platforms=(manylinux1_x86_64 manylinux2010_x86_64 manylinux2014_x86_64)
for n in $(seq 5 39); do platforms+=("manylinux_2_${n}_x86_64"); done
platform_args=()
for p in "${platforms[@]}"; do platform_args+=(--platform "$p"); done

rm -rf "$dest"
mkdir -p "$dest"
echo "fetch-gpu-wheels: ${#requirements[@]} requirements for cp312 manylinux x86_64 into $dest"
"$python" -m pip download --quiet --disable-pip-version-check \
    --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 --abi abi3 \
    --abi none "${platform_args[@]}" \
    --constraint constraints/gpu.txt --dest "$dest" "${requirements[@]}"

# One version of each distribution, or pip refuses the whole --no-index install.
dupes=$(ls "$dest" | sed -E 's/-[0-9][^-]*-.*//' | tr 'A-Z_' 'a-z-' | sort | uniq -d)
if [ -n "$dupes" ]; then
    echo "fetch-gpu-wheels: several versions of: $dupes" >&2
    exit 1
fi
if ls "$dest" | grep -qiE '^(torch|nvidia|triton)[-_]'; then
    echo "fetch-gpu-wheels: a torch or CUDA wheel was pulled in; none may be carried" >&2
    exit 1
fi

total_kib=$(du -sk "$dest" | cut -f1)
count=$(ls "$dest" | wc -l)
printf 'fetch-gpu-wheels: %d wheels, %.1f MiB\n' "$count" "$(echo "$total_kib / 1024" | bc -l)"
ls -S "$dest" | head -5 | sed 's/^/  largest: /'
if [ "$total_kib" -gt $((limit_mib * 1024)) ]; then
    echo "fetch-gpu-wheels: over the ${limit_mib} MiB budget" >&2
    exit 1
fi
