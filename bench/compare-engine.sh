#!/usr/bin/env bash
# Side by side: `enginetop bench engine` (the per-device engine) against Apache MXNet 1.9.1's
# engine (bench/peers/mxnet_engine.cc, ThreadedEnginePerDevice), interleaved round by round.
#
#   bench/compare-engine.sh [ROUNDS]        (default 5 rounds)
#
# Environment: THREADS (default 2), REPS per program and round (default 3), QUICK=1 for the
# 10x smaller sizes, BENCH to run only some shapes (e.g. BENCH=chain,wavefront), RUN_PREFIX to
# run every program under a command (e.g. RUN_PREFIX="chrt -f 1"), BASE=path/to/enginetop to
# add an older build of ours as a third program (labelled "base": a before/after comparison
# in the same run; several builds separated by ':' are labelled base, base2, base3, ...),
# NO_BUILD=1 to skip building. Each round runs every program once, rotating
# which goes first; the table shows, per (bench, engine), the median over rounds of each
# round's median, the spread (the fastest and the slowest round's median), and mxnet / engine:
# above 1 means the engine took less time per op.
# Ours also times the floors (`--floor`: the cheapest handoff of the same ops to one worker
# on this machine, see src/bench/engine/floor.rs) in the same runs; the last column is each
# row's time over floor-spsc's (how far from what the machine allows).
# Raw JSON lines are kept in target/peers/compare-engine-<time>.jsonl.
set -euo pipefail

rounds="${1:-5}"
[[ "${rounds}" =~ ^[1-9][0-9]*$ ]] ||
    { echo "usage: bench/compare-engine.sh [ROUNDS]   (a positive integer)" >&2; exit 2; }
cd "$(dirname "${BASH_SOURCE[0]}")/.."

args=(--threads "${THREADS:-2}" --reps "${REPS:-3}")
[[ "${QUICK:-0}" == 1 ]] && args+=(--quick)
[[ -n "${BENCH:-}" ]] && args+=(--bench "${BENCH}")
read -r -a prefix <<< "${RUN_PREFIX:-}"

if [[ "${NO_BUILD:-0}" != 1 ]]; then
    cargo build --release --bin enginetop
    bench/peers/build-mxnet.sh
fi
for binary in target/release/enginetop target/peers/mxnet_engine; do
    if [[ ! -x "${binary}" ]]; then
        echo "error: ${binary} is missing; run without NO_BUILD=1 (or bench/peers/build-mxnet.sh)" >&2
        exit 2
    fi
done

programs=("ours" "mxnet")
bases=()
[[ -n "${BASE:-}" ]] && IFS=: read -r -a bases <<< "${BASE}"
for index in "${!bases[@]}"; do
    programs+=("base$((index + 1))")
done
run() {
    case "$1" in
        ours) "${prefix[@]}" target/release/enginetop bench engine --json --engine per-device \
                  --floor "${args[@]}" ;;
        base*)
            local index="${1#base}" label="base"
            ((index > 1)) && label="base${index}"
            "${prefix[@]}" "${bases[$((index - 1))]}" bench engine --json --engine per-device \
                "${args[@]}" | sed "s/\"engine\":\"per-device\"/\"engine\":\"${label}\"/" ;;
        mxnet) "${prefix[@]}" target/peers/mxnet_engine "${args[@]}" 2>/dev/null ;;
    esac
}

raw="target/peers/compare-engine-$(date +%Y%m%d-%H%M%S).jsonl"
: > "${raw}"
for round in $(seq 1 "${rounds}"); do
    echo "round ${round}/${rounds}" >&2
    count=${#programs[@]}
    for offset in $(seq 0 $((count - 1))); do
        run "${programs[$(((round - 1 + offset) % count))]}" >> "${raw}"
    done
done

python3 - "${raw}" <<'PY'
import json
import statistics
import sys
from collections import defaultdict

ORDER = ["independent", "chain", "random_dag", "wavefront", "binary_tree"]
rows = defaultdict(list)
correct = defaultdict(lambda: True)
with open(sys.argv[1]) as lines:
    for line in lines:
        record = json.loads(line)
        key = (record["bench"], record["engine"])
        rows[key].append(record["ns_per_op"])
        correct[key] &= record["correct"]

def engine_order(engine):
    return (engine == "mxnet-1.9.1", engine.startswith("floor-"), engine != "per-device", engine)

print("medians over rounds (ns/op); spread: the fastest and slowest round; "
      "mxnet/engine > 1: the engine is faster; /floor: time over floor-spsc's")
print(f"{'bench':<12} {'engine':<14} {'rounds':>6} {'ns/op':>10} {'spread':>15} {'correct':>7} "
      f"{'mxnet/engine':>13} {'/floor':>7}")
for bench in sorted({b for b, _ in rows}, key=ORDER.index):
    mxnet = rows.get((bench, "mxnet-1.9.1"))
    mxnet_figure = statistics.median(mxnet) if mxnet else None
    floor = rows.get((bench, "floor-spsc"))
    floor_figure = statistics.median(floor) if floor else None
    for engine in sorted({e for b, e in rows if b == bench}, key=engine_order):
        figures = rows[(bench, engine)]
        figure = statistics.median(figures)
        ratio = f"{mxnet_figure / figure:.2f}" if mxnet_figure and figure > 0 else "-"
        over = f"{figure / floor_figure:.1f}" if floor_figure else "-"
        spread = f"{min(figures):.1f}-{max(figures):.1f}"
        print(f"{bench:<12} {engine:<14} {len(figures):>6} {figure:>10.1f} {spread:>15} "
              f"{str(correct[(bench, engine)]).lower():>7} {ratio:>13} {over:>7}")
PY
echo "raw JSON lines: ${raw}" >&2
