#!/usr/bin/env bash
# scripts/aarch64.sh — tracejit built for aarch64 and its tests run under qemu-aarch64, on this
# x86-64 machine (issue 25's aarch64 CI). Installs what is missing: the cross compiler, qemu-user
# and the arm64 multiarch libraries, libLLVM 19 for arm64 among them; llvm-19-dev:arm64 cannot be
# installed beside the amd64 one, so its headers are unpacked into the build directory
# (apt-get download + dpkg -x). The library is built with its LLVM code generator: it compiles
# aarch64 code and links it with its own loader (runtime/objload_aarch64.c). Runs: the IR, pass
# and runtime unit tests and the seed semantics tests (all but four, below), as the CPU has it
# (neon), the kernel tests again under TJ_ISA=generic, and the JIT tests that check native code
# runs (a compile that falls back to the interpreter fails them): jit_test_isa_target (neon and
# generic code), jit_test_cpu_smoke, jit_test_exact_env (libm calls through the loader's stubs).
# Usage: scripts/aarch64.sh [build dir] (default build-aarch64). scripts/test.sh runs it (CI), and
# counts the two ctest summaries it prints. Release (no debug info): the cross build is the bulk of
# its ~3 minutes.
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
for p in libc6:arm64 libffi-dev:arm64 zlib1g-dev:arm64 libopenblas0:arm64 libllvm19:arm64; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    apt-get install -y -q "${need[@]}"
fi

LLVM_DEV="$B/llvm-19-dev-arm64"
if [ ! -f "$LLVM_DEV/usr/lib/llvm-19/include/llvm/Config/llvm-config.h" ]; then
    mkdir -p "$LLVM_DEV"
    (cd "$LLVM_DEV" && rm -f ./*.deb && apt-get download -q llvm-19-dev:arm64 &&
        dpkg -x ./llvm-19-dev_*_arm64.deb .)
fi
cmake -S "$ROOT" -B "$B" -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/aarch64-linux-gnu.cmake" \
      -DCMAKE_BUILD_TYPE=Release -DTJ_WERROR=ON \
      -DTJ_LLVM_INCLUDE_DIR="$LLVM_DEV/usr/lib/llvm-19/include" \
      -DTJ_LLVM_LIBRARY=/usr/lib/aarch64-linux-gnu/libLLVM.so.19.1
cmake --build "$B" -j"$JOBS"
# Emulation is 20-50x slower, LLVM's compiles included, so the heaviest tests are left out: S9,
# S22, S29 (minutes each), S27 (it runs the tj_module CLI through the shell, which cannot exec an
# aarch64 binary), S20 and S21 compiled (their graphs take LLVM minutes under qemu; their
# interpreted and eager variants run) and most jit suites (over 5 minutes each under qemu);
# runtime_test_direct_kernels checks the NEON kernels against naive loops instead. Threads as
# natively: the pool's loops and the two-half compiles run as they would on an ARM machine.
TESTS='^(ir_|passes_|runtime_|semantics_|jit_test_(isa_target|cpu_smoke|cpu_fusion|cpu_pool|half_dtypes|perf_map|compile_split)$)'
SLOW='(_avx2|_generic|semantics_s09_|semantics_s22_|semantics_s27_|semantics_s29_|semantics_s20_nested$|semantics_s21_gradients$)'
(cd "$B" && ctest -j"$JOBS" --timeout 600 --output-on-failure -R "$TESTS" -E "$SLOW")
(cd "$B" && TJ_ISA=generic ctest -j"$JOBS" --output-on-failure \
    -R '^(runtime_test_kernels|runtime_test_direct_kernels|jit_test_isa_target_generic)$')
# the runtime says which kernels it runs (NEON on aarch64), the code generator what it targets
(cd "$B" && qemu-aarch64 ./tests/runtime_test_direct_kernels | head -1)
(cd "$B" && qemu-aarch64 ./tests/jit_test_isa_target | head -1)
