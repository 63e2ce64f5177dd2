#!/usr/bin/env bash
# bench/peers/run_peers.sh [--quick] — the peer benchmarks (issue 5): creates bench/.venv from
# bench/peers/requirements.txt when missing or changed, runs each peer_*.py in its own process
# (2 threads each; a peer that crashes is reported and the others still run), then report.py
# merges tracejit's bench/out/results.json (running `bench/run --quick` first if it is missing)
# into bench/out/peers.json, bench/out/peers.png and the generated section of bench/PEERS.md.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
mode="${1:-}"
venv="$root/bench/.venv"
py="$venv/bin/python"
[ -x "$py" ] || python3 -m venv "$venv"
want="$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)"
stamp="$venv/.peers-requirements"
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
  echo "== installing the peers into $venv (several GB the first time)"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$here/requirements.txt"
  echo "$want" > "$stamp"
fi
if [ ! -f "$root/bench/out/results.json" ]; then
  "$root/bench/run" --quick || echo "tracejit's benchmarks failed: the peers run without them" >&2
fi
out="$root/bench/out/peers"
mkdir -p "$out"
rm -f "$out"/*.json "$out"/*.log
cat /proc/loadavg > "$out/loadavg.start"
failed=()
for peer in numpy tensorflow jax torch numba onnxruntime; do
  echo "== peer: $peer"
  if ! (cd "$here" && "$py" "peer_$peer.py" $mode 2> "$out/$peer.log"); then
    failed+=("$peer")
    echo "   peer $peer crashed (bench/out/peers/$peer.log):" >&2
    tail -n 5 "$out/$peer.log" >&2
  fi
done
cat /proc/loadavg > "$out/loadavg.end"
echo "== ONNX models: tracejit's importer and ONNX Runtime"
(cd "$here" && "$py" onnx_models.py $mode) || echo "   onnx_models.py failed" >&2
"$py" "$here/report.py" ${failed[@]+--crashed "${failed[*]}"}
