#!/usr/bin/env bash
# Renders the dashboard on the FakeSource at 160x48 into assets/dashboard.png: tmux runs the
# demo, capture-pane -e keeps the colours, ansi2html.py makes a page, headless Chromium shoots
# it. Needs tmux and chromium (apt-get install tmux chromium fonts-dejavu-core).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet --example dashboard_demo
socket="enginetop-shot-$$"
work="$(mktemp -d)"
trap 'tmux -L "$socket" kill-server 2>/dev/null || true; rm -rf "$work"' EXIT
tmux -L "$socket" new-session -d -x 160 -y 48 -s shot \
  "env TERM=xterm-256color target/debug/examples/dashboard_demo --trace-dir $work"
sleep 10                                    # a history worth looking at
tmux -L "$socket" send-keys -t shot -l '+'  # one more inter-op worker: the sparkline steps up
sleep 3
tmux -L "$socket" send-keys -t shot -l 'e'  # export: the trace path shows in the footer
sleep 1
tmux -L "$socket" capture-pane -e -p -t shot > "$work/screen.ansi"
python3 assets/ansi2html.py "$work/screen.ansi" > "$work/screen.html"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1470,900 \
  --screenshot="$PWD/assets/dashboard.png" "file://$work/screen.html" 2>/dev/null
echo "wrote assets/dashboard.png"
