#!/usr/bin/env bash
# Builds (if needed) and runs the Apache MXNet 1.9.1 peer of `enginetop bench engine`.
#
#   bench/peers/run-mxnet.sh [--threads T] [--reps N] [--quick] [--bench independent,chain,...]
#                            [--profile ops|all]
#
# Arguments go to target/peers/mxnet_engine unchanged; it prints one JSON line per benchmark,
# {"bench":...,"engine":"mxnet-1.9.1","threads":T,"ns_per_op":...,"correct":...,"reps":N},
# on stdout (MXNet's own log line goes to stderr); with --profile, what MXNet's profiler adds
# per op (see the head of bench/peers/mxnet_engine.cc).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
"${repo_root}/bench/peers/build-mxnet.sh" >&2
exec "${repo_root}/target/peers/mxnet_engine" "$@"
