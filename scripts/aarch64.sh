#!/usr/bin/env bash
# scripts/aarch64.sh — tracejit built for aarch64 and its tests run under qemu-aarch64, on this
# x86-64 machine (issue 25's aarch64 CI). Installs what is missing: the cross compiler, qemu-user
# and the arm64 multiarch libraries. Without an arm64 LLVM the build has no code generator
# (TJ_WITH_LLVM=OFF): what runs is the runtime (the NEON direct kernels, the reference kernels),
# the interpreter, tracing, the passes and the ONNX-free API. Runs: the IR, pass and runtime
# unit tests, the seed semantics tests (S1-S29) and the NN-op, fused-kernel and channel-order
# tests, each once as the CPU has it (neon) and the kernel tests again under TJ_ISA=generic.
# Usage: scripts/aarch64.sh [build dir] (default build-aarch64).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
B="${1:-$ROOT/build-aarch64}"
JOBS="${JOBS:-$(nproc)}"

need=()
command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu)
command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
    apt-get update -q
fi
for p in libffi-dev:arm64 zlib1g-dev:arm64 libopenblas0:arm64; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    apt-get install -y -q "${need[@]}"
fi

cmake -S "$ROOT" -B "$B" -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/aarch64-linux-gnu.cmake" \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTJ_WITH_LLVM=OFF -DTJ_BUILD_BENCH=OFF -DTJ_WERROR=ON
cmake --build "$B" -j"$JOBS"
TESTS='^(ir_|passes_|runtime_|semantics_|jit_test_nn_ops|jit_test_fused_kernels|jit_test_channel_order)'
(cd "$B" && ctest -j"$JOBS" --output-on-failure -R "$TESTS" -E '_(avx2|isa_target)')
(cd "$B" && TJ_ISA=generic ctest -j"$JOBS" --output-on-failure \
    -R '^(runtime_test_kernels|jit_test_nn_ops|jit_test_channel_order)$')
# the runtime tells which kernels it runs: NEON on aarch64
out=$(cd "$B" && qemu-aarch64 -L /usr/aarch64-linux-gnu ./tests/jit_test_fused_kernels 2>&1 | tail -1)
echo "aarch64: $out"
