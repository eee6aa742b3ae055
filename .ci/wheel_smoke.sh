#!/usr/bin/env bash
# The README's first command, the way a new user meets it: the wheel, installed into a
# clean venv WITHOUT extras, then the main path headless on the simulated cluster
# (sim up, containers, convert, setup-ray, submit, steps in `status --json`, stop,
# sim down) and `rlconsole demo` painting the nodes under tmux.
#
# Runs outside the checkout (so nothing is imported from the source tree) with its own
# XDG and sim dirs. Usage: .ci/wheel_smoke.sh WORKDIR   (from the repository root)
set -euo pipefail
repo=$(pwd)
work=$(realpath -m "${1:?usage: wheel_smoke.sh WORKDIR}")
rm -rf "$work" && mkdir -p "$work"
log() { printf '[wheel-smoke %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

log "building the wheel"
python3 -m venv "$work/build-venv"
"$work/build-venv/bin/python" -m pip install -q --upgrade pip
"$work/build-venv/bin/python" -m pip wheel -q --no-deps -w "$work/dist" "$repo"
wheel=$(ls "$work"/dist/rlconsole-*.whl)

log "installing $(basename "$wheel") into a clean venv, no extras"
python3 -m venv "$work/venv"
py="$work/venv/bin/python"
"$py" -m pip install -q --upgrade pip
"$py" -m pip install -q "$wheel"
"$py" -m pip check
rl="$work/venv/bin/rlconsole"

cd "$work"   # never the checkout: imports must come from the installed wheel
export XDG_STATE_HOME="$work/xdg/state" XDG_CONFIG_HOME="$work/xdg/config" XDG_CACHE_HOME="$work/xdg/cache"
export RLCONSOLE_SIM_DIR="$work/sim"
unset RLCONSOLE_PROFILE RLCONSOLE_STATE_DIR RLCONSOLE_CONFIG_DIR

log "importing every module of the installed package"
"$py" - <<'EOF'
import importlib, pathlib, pkgutil, sys
import tui, widgets, profiles
count = 0
for pkg in (tui, widgets, profiles):
    where = pathlib.Path(pkg.__file__).parent
    assert "site-packages" in str(where), f"{pkg.__name__} imported from {where}, not the wheel"
    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
        if ".sim.tree" in m.name:   # the stand-in VeRL tree is data run on the nodes
            continue
        importlib.import_module(m.name)
        count += 1
print(f"imported {count} modules from the wheel")
EOF

cleanup() {
  [ -n "${tmux_sock:-}" ] && tmux -L "$tmux_sock" kill-server 2>/dev/null || true
  "$rl" sim down >/dev/null 2>&1 || true
}
trap cleanup EXIT

log "sim up"
profile=$("$rl" sim up | tail -n 1)
test -f "$profile" || { echo "sim up printed no profile path: $profile"; exit 1; }
P=(--profile "$profile")
for action in containers convert setup-ray submit; do
  log "rlconsole $action"
  "$rl" "$action" "${P[@]}" --yes
done

log "waiting for steps in status --json"
ok=
for _ in $(seq 1 60); do
  if "$rl" status "${P[@]}" --json > "$work/status.json" 2> "$work/status.err" && "$py" - "$work/status.json" <<'EOF'
import json, sys
job = json.load(open(sys.argv[1])).get("job") or {}
print(f"  job {job.get('id')} {job.get('status')} step {job.get('step')}/{job.get('total_steps')}")
sys.exit(0 if job.get("status") == "RUNNING" and (job.get("step") or 0) >= 2 else 1)
EOF
  then ok=1; break; fi
  sleep 3
done
[ -n "$ok" ] || { echo "no RUNNING job with steps after 180 s"; cat "$work/status.json" "$work/status.err"; exit 1; }

log "rlconsole stop"
"$rl" stop "${P[@]}" --yes
"$rl" sim down
log "sim down: done"

log "rlconsole demo under tmux"
tmux_sock="rlc-smoke-$$"
tmux -L "$tmux_sock" new-session -d -x 160 -y 50 \
  "env TERM=xterm-256color $rl demo; echo DEMO-EXITED \$?; sleep 120"
painted=
for _ in $(seq 1 120); do
  screen=$(tmux -L "$tmux_sock" capture-pane -p 2>/dev/null || true)
  if grep -q node4 <<<"$screen" && grep -q SIMULATED <<<"$screen"; then painted=1; break; fi
  sleep 1
done
[ -n "$painted" ] || { echo "demo did not paint 4 nodes:"; echo "$screen"; exit 1; }
tmux -L "$tmux_sock" send-keys q
for _ in $(seq 1 60); do
  screen=$(tmux -L "$tmux_sock" capture-pane -p)
  if grep -q "Stop the simulated cluster?" <<<"$screen"; then break; fi
  sleep 1
done
tmux -L "$tmux_sock" send-keys y Enter
for _ in $(seq 1 60); do
  screen=$(tmux -L "$tmux_sock" capture-pane -p)
  if grep -q "DEMO-EXITED" <<<"$screen"; then break; fi
  sleep 1
done
grep -q "DEMO-EXITED 0" <<<"$screen" || { echo "demo did not exit cleanly:"; echo "$screen"; exit 1; }
log "demo painted the nodes and exited 0; the wheel runs the README's first command"
