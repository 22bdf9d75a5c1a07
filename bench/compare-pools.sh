#!/usr/bin/env bash
# Side by side: `enginetop bench pool` (our pools and rayon) against Eigen 3.4's C++
# NonBlockingThreadPool (bench/peers/eigen_pool.cc), interleaved round by round.
#
#   bench/compare-pools.sh [ROUNDS]        (default 3 rounds)
#
# Environment: THREADS (default 2), QUICK=1 for the ~10x smaller sizes, REPS to override each
# benchmark's reps, BENCH to run only some benchmarks (e.g. BENCH=wake_hot), RUN_PREFIX to
# run both programs under a command (e.g. RUN_PREFIX="chrt -f 1": as root, both get the CPUs
# ahead of other load, which reproduces a quiet machine on a shared one; without it, on a
# loaded 2-core machine wake_hot measures mostly context switches, every thread on one core). Each round runs both programs, alternating which goes first; the table
# shows, per (bench, pool), the median over rounds of each round's median, and
# eigen-cpp / ours: above 1 means ours took less time than Eigen's C++ pool.
# Raw JSON lines are kept in target/peers/compare-<time>.jsonl.
set -euo pipefail

rounds="${1:-3}"
if ! [[ "${rounds}" =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: bench/compare-pools.sh [ROUNDS]   (ROUNDS: a positive integer)" >&2
    exit 2
fi

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${repo_root}"

args=(--threads "${THREADS:-2}")
[[ "${QUICK:-0}" == 1 ]] && args+=(--quick)
[[ -n "${REPS:-}" ]] && args+=(--reps "${REPS}")
[[ -n "${BENCH:-}" ]] && args+=(--bench "${BENCH}")
read -r -a prefix <<< "${RUN_PREFIX:-}"

cargo build --release --bin enginetop
bench/peers/build-eigen.sh

ours=("${prefix[@]}" target/release/enginetop bench pool --json "${args[@]}")
eigen=("${prefix[@]}" target/peers/eigen_pool "${args[@]}")
raw="target/peers/compare-$(date +%Y%m%d-%H%M%S).jsonl"
: > "${raw}"

for round in $(seq 1 "${rounds}"); do
    echo "round ${round}/${rounds}" >&2
    if (( round % 2 == 1 )); then
        "${ours[@]}" >> "${raw}"
        "${eigen[@]}" >> "${raw}"
    else
        "${eigen[@]}" >> "${raw}"
        "${ours[@]}" >> "${raw}"
    fi
done

python3 - "${raw}" <<'PY'
import json
import statistics
import sys
from collections import defaultdict

HEADLINE = {"spawn": "ns_per_task", "tree": "ns_per_task", "parallel_for": "ms",
            "wake_hot": "us_p50", "wake_cold": "us_p50"}
UNIT = {"ns_per_task": "ns/task", "ms": "ms", "us_p50": "us p50"}
BENCH_ORDER = list(HEADLINE)

rows = defaultdict(list)
threads = set()
with open(sys.argv[1]) as lines:
    for line in lines:
        record = json.loads(line)
        rows[(record["bench"], record["pool"])].append(record)
        threads.add(record["threads"])

def median_of(records, key):
    return statistics.median(r[key] for r in records)

def pool_order(pool):
    return (pool != "eigen-cpp", pool)

print(f"threads {sorted(threads)}; medians over rounds; eigen-cpp/ours > 1: ours is faster")
print(f"{'bench':<13} {'pool':<10} {'rounds':>6} {'median':>12} {'unit':<8} {'p99 us':>10} "
      f"{'eigen-cpp/ours':>15}")
for bench in sorted({b for b, _ in rows}, key=BENCH_ORDER.index):
    key = HEADLINE[bench]
    eigen = rows.get((bench, "eigen-cpp"))
    eigen_figure = median_of(eigen, key) if eigen else None
    for pool in sorted({p for b, p in rows if b == bench}, key=pool_order):
        records = rows[(bench, pool)]
        figure = median_of(records, key)
        p99 = f"{median_of(records, 'us_p99'):.2f}" if "us_p99" in records[0] else ""
        ratio = f"{eigen_figure / figure:.2f}" if eigen_figure and figure > 0 else "-"
        print(f"{bench:<13} {pool:<10} {len(records):>6} {figure:>12.2f} {UNIT[key]:<8} "
              f"{p99:>10} {ratio:>15}")
PY
echo "raw JSON lines: ${raw}" >&2
