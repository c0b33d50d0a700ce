#!/usr/bin/env bash
# Fails a GPU run that checked nothing: one whose every GPU test skipped.
#
#   scripts/gpu-all-skipped.sh LOG...
#
# The plugin's terminal summary (zephon_chaos.gpu_summary) ends a session whose GPU tests all
# skipped with "GPU tests skipped: <reason> (N tests)", and one where some ran with
# "GPU tests: N ran, ...". On a GPU machine the first is a failure. scripts/gpu-check.sh and
# .github/workflows/gpu.yml both ask this script, so the rule lives here once.
# Exit 0: no log says so; 1: one does (its reason is printed); 2: a log is missing.
set -euo pipefail
if [ "$#" -eq 0 ]; then
    echo "usage: $0 LOG..." >&2
    exit 2
fi
for log in "$@"; do
    [ -r "$log" ] || { echo "$0: no log $log" >&2; exit 2; }
done
if grep -h "GPU tests skipped:" "$@"; then
    echo "every GPU test skipped (see the reason above): nothing was checked on a GPU"
    exit 1
fi
