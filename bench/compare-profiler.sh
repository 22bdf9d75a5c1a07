#!/usr/bin/env bash
# Side by side: what profiling adds per op to random_dag, ours (`enginetop bench profiler
# --bench random_dag`: the engine and pool probes on vs a bare engine) against Apache MXNet
# 1.9.1's own profiler (bench/peers/mxnet_engine.cc --profile: MXSetProfilerConfig, then
# MXSetProfilerState on vs off), interleaved round by round.
#
#   bench/compare-profiler.sh [ROUNDS]        (default 5 rounds)
#
# Both run random_dag on 2 CPU workers (ours: the per-device engine), each rep once
# unprofiled and once profiled; each prints the medians over its reps. Environment: REPS per
# program and round (default 3), QUICK=1 for the 10x smaller random_dag, MODE for MXNet's
# profiler (ops: the engine's op records only, the default; all: profile_all), RUN_PREFIX to run
# every program under a command (e.g. RUN_PREFIX="chrt -f 1"), NO_BUILD=1 to skip building.
# Each round runs both programs, alternating which goes first. The table shows per program
# the median over rounds (and the range) of the unprofiled ns/op, the ns/op profiling adds and
# profiled / unprofiled; then ours / MXNet's added ns/op against the target (at most 0.1).
# A round in which our rings dropped events is left out of our figures (its profiled run did
# less than a full one: the collector fell behind) and counted. The verdict is given only when
# both programs' added ns/op is above zero in every round kept; otherwise the spread across
# rounds exceeds the effect and the script says the comparison is inconclusive (more rounds,
# REPS, or a quieter machine).
# Raw JSON lines are kept in target/peers/compare-profiler-<time>.jsonl.
set -euo pipefail

rounds="${1:-5}"
[[ "${rounds}" =~ ^[1-9][0-9]*$ ]] ||
    { echo "usage: bench/compare-profiler.sh [ROUNDS]   (a positive integer)" >&2; exit 2; }
mode="${MODE:-ops}"
[[ "${mode}" == ops || "${mode}" == all ]] ||
    { echo "error: MODE must be ops or all (MXNet's profiler records), not '${mode}'" >&2; exit 2; }
cd "$(dirname "${BASH_SOURCE[0]}")/.."

args=(--reps "${REPS:-3}" --bench random_dag)
[[ "${QUICK:-0}" == 1 ]] && args+=(--quick)
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

run() {
    case "$1" in
        ours) "${prefix[@]}" target/release/enginetop bench profiler --json "${args[@]}" ;;
        mxnet) "${prefix[@]}" target/peers/mxnet_engine --threads 2 --profile "${mode}" \
                   "${args[@]}" 2>/dev/null ;;
    esac
}

programs=(ours mxnet)
raw="target/peers/compare-profiler-$(date +%Y%m%d-%H%M%S).jsonl"
mkdir -p target/peers
: > "${raw}"
for round in $(seq 1 "${rounds}"); do
    echo "round ${round}/${rounds}" >&2
    for offset in 0 1; do
        run "${programs[$(((round - 1 + offset) % 2))]}" >> "${raw}"
    done
done

python3 - "${raw}" <<'PY'
import json
import statistics
import sys
from collections import defaultdict

TARGET = 0.1
rows = defaultdict(lambda: defaultdict(list))
notes = defaultdict(list)
left_out = 0
for line in open(sys.argv[1]):
    record = json.loads(line)
    program = "mxnet" if record.get("engine") == "mxnet-1.9.1" else "ours"
    if program == "ours" and record.get("dropped", 0) > 0:
        left_out += 1
        continue
    if record.get("note"):
        notes[program].append(record["note"])
    if record.get("correct") is False:
        notes[program].append("wrong result")
    for key in ("ns_per_op", "added_ns_per_op", "ratio"):
        if record.get(key) is not None:
            rows[program][key].append(record[key])
    if program == "ours":
        rows[program]["dropped"].append(record.get("dropped", 0))
    else:
        rows[program]["records_per_op"].append(record.get("records_per_op", 0))

def spread(values, digits):
    return (f"{statistics.median(values):.{digits}f} "
            f"[{min(values):.{digits}f}, {max(values):.{digits}f}]")

print("random_dag, 2 workers; medians over rounds [min, max] of each round's medians")
print(f"{'profiler':<8} {'rounds':>6} {'ns/op unprofiled':>26} {'added ns/op':>24} "
      f"{'profiled/unprofiled':>24}  other")
for program in ("ours", "mxnet"):
    figures = rows[program]
    if not figures.get("added_ns_per_op"):
        print(f"{program:<8} no figures: {'; '.join(sorted(set(notes[program]))) or 'none printed'}")
        continue
    other = (f"dropped {sum(figures['dropped'])}" if program == "ours"
             else f"{statistics.median(figures['records_per_op']):.2f} records/op")
    print(f"{program:<8} {len(figures['added_ns_per_op']):>6} {spread(figures['ns_per_op'], 1):>26} "
          f"{spread(figures['added_ns_per_op'], 1):>24} {spread(figures['ratio'], 3):>24}  {other}")
if left_out:
    print(f"ours: {left_out} round(s) left out: events dropped (the collector fell behind)")
for program, problems in notes.items():
    for problem in sorted(set(problems)):
        print(f"{program}: {problem}")
ours, theirs = rows["ours"].get("added_ns_per_op"), rows["mxnet"].get("added_ns_per_op")
if ours and theirs:
    added_ours, added_theirs = statistics.median(ours), statistics.median(theirs)
    if min(ours) <= 0 or min(theirs) <= 0:
        print(f"inconclusive: added ns/op per round ranges [{min(ours):.1f}, {max(ours):.1f}] "
              f"(ours) and [{min(theirs):.1f}, {max(theirs):.1f}] (MXNet); a round at or "
              "below zero means the noise exceeds the effect (more rounds or REPS, or a "
              "quieter machine)")
    else:
        share = added_ours / added_theirs
        verdict = "met" if share <= TARGET else "not met"
        low, high = min(ours) / max(theirs), max(ours) / min(theirs)
        print(f"ours / MXNet's added ns/op: {share:.3f} [{low:.3f}, {high:.3f}] "
              f"(target <= {TARGET}: {verdict})")
PY
echo "raw JSON lines: ${raw}" >&2
