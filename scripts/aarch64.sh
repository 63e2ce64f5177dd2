#!/usr/bin/env bash
# scripts/aarch64.sh — tracejit built for aarch64 and its tests run under qemu-aarch64, on this
# x86-64 machine (issue 25's aarch64 CI). Installs what is missing: the cross compiler, qemu-user
# and the arm64 multiarch libraries. Without an arm64 LLVM the build has no code generator
# (TJ_WITH_LLVM=OFF): what runs is the runtime (the NEON direct kernels, the reference kernels),
# the interpreter, tracing, the passes and the ONNX-free API. Runs: the IR, pass and runtime
# unit tests and the seed semantics tests (all but four, below), as the CPU has it (neon), and
# the kernel tests again under TJ_ISA=generic.
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
# Under qemu-aarch64 the pool's worker threads hang the emulator (a loop's atomics beside a
# spinning thread; seen with this pool and the one before it, never natively): the tests run on
# one thread. Emulation is 20-50x slower, so the heaviest tests are left out: S9, S22, S29 (minutes
# each), S27 (it runs the tj_module CLI through the shell, which cannot exec an aarch64 binary)
# and the jit kernel suites (over 5 minutes each); runtime_test_direct_kernels checks the NEON
# kernels against naive loops instead.
export TJ_NUM_THREADS=1
TESTS='^(ir_|passes_|runtime_|semantics_)'
SLOW='(_avx2|_generic|semantics_s09_|semantics_s22_|semantics_s27_|semantics_s29_)'
(cd "$B" && ctest -j"$JOBS" --output-on-failure -R "$TESTS" -E "$SLOW")
(cd "$B" && TJ_ISA=generic ctest -j"$JOBS" --output-on-failure \
    -R '^(runtime_test_kernels|runtime_test_direct_kernels)$')
# the runtime says which kernels it runs: NEON on aarch64
(cd "$B" && qemu-aarch64 -L /usr/aarch64-linux-gnu ./tests/runtime_test_direct_kernels | head -1)
