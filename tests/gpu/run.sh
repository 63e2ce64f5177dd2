#!/usr/bin/env bash
# tests/gpu/run.sh — the CUDA backend on a machine with an NVIDIA GPU, in one go, well inside 10
# minutes, ending with a summary. It runs what CI can only emulate:
#   1. the CUDA tests on the GPU: the device and its allocator, NVRTC, every generated kernel's
#      values against the reference kernels (jit_test_cuda_kernels), the backend's behaviour
#      (jit_test_cuda_backend), 300 random programs, and every semantics test S1-S29 (S22 trains
#      the seed CNN) with TJ_BACKEND=cuda;
#   2. examples/train_cnn --device cuda on a Fashion-MNIST subset: the loss falls, the accuracy
#      (the bundle has no LLVM, so its CPU runs would be interpreted: compare with a CPU build's);
#   3. jit_test_cuda_backend once under compute-sanitizer's memcheck (where it is installed);
#   4. bench_gpu and its peers (PyTorch eager and torch.compile, JAX, CuPy) on the same GPU.
# It runs the binaries scripts/gpu_bundle.sh built into .gpu/ (the lent machines have no LLVM or
# libffi headers); carry .gpu there. Logs and JSON go to $OUT (the device tool's) or /tmp/tj-gpu.
#   bash scripts/gpu_bundle.sh            # here
#   bash tests/gpu/run.sh [--quick]       # there (--quick: no peers, no batch-512 step)
#   bash tests/gpu/run.sh --dry           # here: the script itself, on the fake driver and the
#                                         # emulation at tiny sizes (its figures mean nothing)
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
B="$root/.gpu/bin"
OUTDIR="${OUT:-/tmp/tj-gpu}"
mkdir -p "$OUTDIR"
quick=""
dry=0
[ "${1:-}" = "--quick" ] && quick="--quick"
[ "${1:-}" = "--dry" ] && dry=1 && quick="--smoke"
export LD_LIBRARY_PATH="$root/.gpu/lib:${LD_LIBRARY_PATH:-}"
export TJ_CACHE_DIR="$OUTDIR/cache"
if [ ! -x "$B/jit_test_cuda_kernels" ] && [ -f "$root/.gpu/bin.tar.xz" ]; then
  tar -C "$root/.gpu" -xJf "$root/.gpu/bin.tar.xz"
fi
if [ ! -x "$B/jit_test_cuda_kernels" ]; then
  echo "run.sh: no $B: run scripts/gpu_bundle.sh where LLVM and libffi are installed, carry .gpu"
  exit 2
fi
if [ $dry = 1 ]; then
  export TJ_CUDA_DRIVER="$root/.gpu/lib/libtj_fake_cuda.so" TJ_CUDA_EMULATE=cc TJ_CUBLAS=0
  echo "== --dry: the fake driver and the emulation, no GPU"
else
  echo "== $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
fi
echo "== $(date -u +%FT%TZ), $(nproc) cores, tracejit $(git rev-parse --short HEAD 2>/dev/null || echo ?)"

pass=0
fail=0
summary=()
# step NAME TIMEOUT CMD...: runs CMD with its output in $OUTDIR/NAME.log, records the verdict
step() {
  local name=$1 limit=$2 t0 rc
  shift 2
  t0=$(date +%s.%N)
  timeout "$limit" "$@" >"$OUTDIR/$name.log" 2>&1
  rc=$?
  local dt
  dt=$(printf '%.1f' "$(echo "$(date +%s.%N) - $t0" | bc)")
  if [ $rc -eq 0 ] || [ $rc -eq 77 ]; then
    pass=$((pass + 1))
    summary+=("$(printf '%-34s %-6s %6ss  %s' "$name" "$([ $rc -eq 77 ] && echo skip || echo ok)" "$dt" "$(tail -n 1 "$OUTDIR/$name.log" | cut -c1-70)")")
  else
    fail=$((fail + 1))
    summary+=("$(printf '%-34s %-6s %6ss  rc=%s: %s' "$name" "FAIL" "$dt" "$rc" "$(grep -m1 -E 'FAIL|failed|error' "$OUTDIR/$name.log" | cut -c1-90)")")
    echo "---- $name failed (rc=$rc); the end of its log:"
    tail -n 15 "$OUTDIR/$name.log"
  fi
  echo "${summary[-1]}"
}

# ---- 1. the tests on the GPU ----------------------------------------------------------------------
cd "$root/tests"
step cuda_device 60 "$B/runtime_test_cuda_device"
step devices 60 "$B/jit_test_devices"
step nvrtc 120 "$B/jit_test_nvrtc"
step cuda_kernels 180 "$B/jit_test_cuda_kernels"
step cuda_backend 180 "$B/jit_test_cuda_backend"
step random_programs_cuda 180 env TJ_BACKEND=cuda TJ_OUTPUT_DEVICE=cpu TJ_TEST_TOL=1e-4 \
  TJ_TEST_SEED=1 "$B/jit_test_random_programs"
for s in "$B"/semantics_s*; do
  n=$(basename "$s")
  case $n in *s27_save_load) continue ;; esac # the CPU backend's saved images: not a GPU behaviour
  [ $dry = 1 ] && case $n in *s22_train_step) continue ;; esac # minutes when emulated
  step "${n}_cuda" 240 env TJ_BACKEND=cuda TJ_OUTPUT_DEVICE=cpu \
    TJ_FASHION_MNIST="$root/.gpu/data" "$s"
done
cd "$root"

# ---- 2. the seed CNN trained on the GPU ------------------------------------------------------------
steps=300
[ $dry = 1 ] && steps=3
step train_cnn_cuda 240 "$B/train_cnn" --device cuda --data "$root/.gpu/data" --steps $steps \
  --quiet --every 50 --test-images 1000

# ---- 3. memcheck ----------------------------------------------------------------------------------
if [ $dry = 0 ] && command -v compute-sanitizer >/dev/null; then
  step memcheck_cuda_backend 300 compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$B/jit_test_cuda_backend"
else
  summary+=("memcheck: compute-sanitizer not installed")
fi

# ---- 4. benchmarks ---------------------------------------------------------------------------------
export TJ_BENCH_JSON="$OUTDIR/bench_gpu.jsonl"
: >"$TJ_BENCH_JSON"
step bench_gpu 300 "$B/bench_gpu" $quick
cat "$OUTDIR/bench_gpu.log"
# the convolution, CNN and host-cost rows again on the generated direct kernels and without
# graphs: cuDNN's and the graphs' A/Bs in the same session
step bench_gpu_direct 200 env TJ_CUDNN=0 "$B/bench_gpu" --convs $quick
cat "$OUTDIR/bench_gpu_direct.log"
step bench_gpu_nographs 200 env TJ_CUDA_GRAPHS=0 "$B/bench_gpu" --convs $quick
cat "$OUTDIR/bench_gpu_nographs.log"
if [ -z "$quick" ] || [ $dry = 1 ]; then
  step gpu_peers 300 python3 "$root/bench/peers/gpu_peers.py" --out "$OUTDIR/gpu_peers.jsonl" \
    $([ $dry = 1 ] && echo --smoke)
  cat "$OUTDIR/gpu_peers.log"
fi

echo
echo "== summary: $pass passed, $fail failed (logs in $OUTDIR)"
printf '%s\n' "${summary[@]}"
grep -h -E '^(final loss|first step)' "$OUTDIR"/train_cnn_*.log
[ "$fail" -eq 0 ]
