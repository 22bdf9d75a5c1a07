#!/usr/bin/env bash
# How fast resnet-like's convolutions could be: their GEMMs alone, against the step itself.
#
#   bench/resnet-gemm-ceiling.sh [ROUNDS]        (default 5 rounds)
#
# Writes two workloads into target/ceiling/: one `gemm` op per convolution and direction of
# resnet-like at its default shapes (ResNet-50's widths and [3, 4, 6, 3] blocks, 128x128
# images; BATCH, default 8, as the workload's default), with each conv's shapes
#   forward          M x K x N = C_out x C_in k^2 x N H W
#   input gradient               C_in k^2 x C_out x N H W   (none for the stem)
#   weight gradient              C_out x N H W x C_in k^2
# row-major in `gemms.toml`, and transposed (C^T = B^T A^T: M and N swapped) in
# `gemms-t.toml`, since the gemm crate runs some shapes (64 rows) much faster one way.
# Each round then runs `enginetop bench gemm` (the peak), both GEMM workloads and resnet-like
# (headless, default threads), rotating their order, and prints each one's GFLOP/s and share
# of that round's peak; the last lines are the medians over rounds. No im2col, transposes,
# batch norms or SGD run in the GEMM workloads: what they reach is what the step's
# convolutions could reach through this GEMM and pool, and the gap to resnet-like is
# everything else. Environment: BATCH, ITERATIONS per run (default 6), NO_BUILD=1.
set -euo pipefail

rounds="${1:-5}"
batch="${BATCH:-8}"
iterations="${ITERATIONS:-6}"
for value in "${rounds}" "${batch}" "${iterations}"; do
    [[ "${value}" =~ ^[1-9][0-9]*$ ]] || {
        echo "usage: [BATCH=N] [ITERATIONS=N] bench/resnet-gemm-ceiling.sh [ROUNDS]   (positive integers)" >&2
        exit 2
    }
done
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v python3 > /dev/null || { echo "error: python3 is needed to write the workloads and read the JSON" >&2; exit 2; }

[[ "${NO_BUILD:-0}" == 1 ]] || cargo build --release --bin enginetop
binary=target/release/enginetop
[[ -x "${binary}" ]] || { echo "error: ${binary} is missing; run without NO_BUILD=1" >&2; exit 2; }

out=target/ceiling
mkdir -p "${out}"
python3 - "${batch}" "${out}" <<'PY'
import sys
batch, out = int(sys.argv[1]), sys.argv[2]
# (name, C_in, C_out, kernel, output side, count, has an input gradient): resnet-like's defaults.
convs = [("stem", 3, 64, 7, 64, 1, False)]
for stage, blocks in enumerate([3, 4, 6, 3], start=1):
    c, side = 64 << (stage - 1), 32 >> (stage - 1)
    first_in = 64 if stage == 1 else 2 * c
    convs += [
        (f"s{stage}c1b0", first_in, c, 1, side, 1, True),
        (f"s{stage}c1", 4 * c, c, 1, side, blocks - 1, True),
        (f"s{stage}c2", c, c, 3, side, blocks, True),
        (f"s{stage}c3", c, 4 * c, 1, side, blocks, True),
        (f"s{stage}proj", first_in, 4 * c, 1, side, 1, True),
    ]

def workload(name, transposed):
    tensors, ops = [], []
    for conv, c_in, c_out, k, side, count, has_input_grad in convs:
        pixels, patch = batch * side * side, c_in * k * k
        shapes = [("fwd", c_out, patch, pixels), ("wgrad", c_out, pixels, patch)]
        if has_input_grad:
            shapes.insert(1, ("dgrad", patch, c_out, pixels))
        for direction, m, k_dim, n in shapes:
            if transposed:
                m, n = n, m
            prefix = f"{conv}_{direction}"
            for suffix, rows, cols in (("a", m, k_dim), ("b", k_dim, n), ("c", m, n)):
                tensors.append(f'  {{ name = "{prefix}_{suffix}", shape = [{rows}, {cols}], init = "random" }},')
            for i in range(count):
                ops.append(f'  {{ name = "{prefix}{i}", kernel = "gemm", '
                           f'reads = ["{prefix}_a", "{prefix}_b"], writes = ["{prefix}_c"] }},')
    return (f'name = "{name}"\ndescription = "resnet-like\'s convolution GEMMs alone"\n'
            "tensor = [\n" + "\n".join(tensors) + "\n]\nop = [\n" + "\n".join(ops) + "\n]\n")

for file, transposed in (("gemms.toml", False), ("gemms-t.toml", True)):
    with open(f"{out}/{file}", "w") as f:
        f.write(workload(file.removesuffix(".toml"), transposed))
PY

gflops() { python3 -c "import json, sys; print(f\"{json.load(sys.stdin)['$1']:.1f}\")"; }
programs=("${out}/gemms.toml" "${out}/gemms-t.toml" resnet-like)
labels=("gemms row-major" "gemms transposed" "resnet-like")
declare -A shares
for round in $(seq "${rounds}"); do
    peak=$("${binary}" bench gemm --json | gflops gemm_peak_gflops)
    line="round ${round}: peak ${peak}"
    for offset in 0 1 2; do
        index=$(( (round + offset) % 3 ))
        if [[ ${index} == 2 ]]; then
            rate=$("${binary}" --workload resnet-like --set "batch=${batch}" --headless --iterations "${iterations}" --summary json 2> /dev/null | gflops gflops)
        else
            rate=$("${binary}" --workload "${programs[index]}" --headless --iterations "${iterations}" --summary json 2> /dev/null | gflops gflops)
        fi
        share=$(python3 -c "print(f'{100 * ${rate} / ${peak}:.1f}')")
        shares[${index}]="${shares[${index}]:-} ${share}"
        line="${line} | ${labels[index]} ${rate} (${share}%)"
    done
    echo "${line}"
done
for index in 0 1 2; do
    python3 -c "import statistics; s = [float(x) for x in '${shares[${index}]}'.split()]; print(f'${labels[index]}: median {statistics.median(s):.1f}% of the round\'s GEMM peak ({min(s):.1f}-{max(s):.1f})')"
done
