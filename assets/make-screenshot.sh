#!/usr/bin/env bash
# Renders the dashboard of a real run at 160x48 into assets/dashboard.png: tmux runs
# `enginetop --workload resnet-like` (2 inter-op workers, 1 intra-op thread), capture-pane -e
# keeps the colours, ansi2html.py makes a page, headless Chromium shoots it. Needs tmux and
# chromium (apt-get install tmux chromium fonts-dejavu-core). The header's % of peak shows when
# this machine's GEMM peak is cached (`enginetop bench gemm`).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet --release
socket="enginetop-shot-$$"
work="$(mktemp -d)"
trap 'tmux -L "$socket" kill-server 2>/dev/null || true; rm -rf "$work"' EXIT
tmux -L "$socket" new-session -d -x 160 -y 48 -s shot \
  "env TERM=xterm-256color target/release/enginetop --workload resnet-like --inter 2 \
     --intra 1 --trace-dir $work"
sleep 10                                    # a history worth looking at
tmux -L "$socket" send-keys -t shot -l '+'  # one more inter-op worker: the sparkline steps up
sleep 3
tmux -L "$socket" send-keys -t shot -l 'e'  # export: the trace path shows in the footer
sleep 1
tmux -L "$socket" capture-pane -e -p -t shot > "$work/screen.ansi"
python3 assets/ansi2html.py "$work/screen.ansi" > "$work/screen.html"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1470,900 \
  --screenshot="$PWD/assets/dashboard.png" "file://$work/screen.html" 2>/dev/null
tmux -L "$socket" send-keys -t shot -l 'q'
echo "wrote assets/dashboard.png"
