#!/usr/bin/env bash
# gpu_bundle.sh — prepares .gpu/ (ignored by git) for tests/gpu/run.sh: the lent GPU machines have
# CUDA, CMake and Python but neither LLVM 19 nor libffi's headers, and reach no package registry,
# so the CUDA tests, the seed CNN's training program and the GPU benchmark are built here (Release,
# without LLVM: the CPU backend is not what they test; stripped), with libffi beside them and the
# first 6,000 Fashion-MNIST training images and 1,000 test images (the whole set would not fit the
# 64 MiB a device call carries; the binaries travel as one .tar.xz). Run it here, then carry .gpu
# to the device:
#   bash scripts/gpu_bundle.sh && <device> run --carry .gpu 'bash tests/gpu/run.sh'
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/.gpu"
grep -qx '/.gpu/' "$root/.git/info/exclude" 2>/dev/null || echo '/.gpu/' >>"$root/.git/info/exclude"
cmake -S "$root" -B "$out/build" -DCMAKE_BUILD_TYPE=Release -DTJ_WITH_LLVM=OFF -DTJ_WERROR=ON \
      -DTJ_BACKENDS="cpu;cuda;interp" >/dev/null
tests=(jit_test_cuda_kernels jit_test_cuda_backend jit_test_devices runtime_test_cuda_device
       jit_test_nvrtc jit_test_random_programs)
sems=()
for src in "$root"/tests/semantics/s*.c; do sems+=("semantics_$(basename "$src" .c)"); done
cmake --build "$out/build" -j"$(nproc)" --target "${tests[@]}" "${sems[@]}" train_cnn bench_gpu \
      tj_fake_cuda
rm -rf "$out/bin" "$out/lib" "$out/data"
mkdir -p "$out/bin" "$out/lib" "$out/data"
for t in "${tests[@]}" "${sems[@]}"; do
  cp "$out/build/tests/$t" "$out/bin/" && strip "$out/bin/$t"
done
cp "$out/build/train_cnn" "$out/build/bench/bench_gpu" "$out/bin/" && strip "$out/bin/train_cnn" "$out/bin/bench_gpu"
cp -L "$(ldconfig -p | awk '/libffi.so.8 /{print $NF; exit}')" "$out/lib/"
cp "$out/build/tests/libtj_fake_cuda.so" "$out/lib/" # run.sh --dry: the fake driver
python3 - "$out/data" <<'PY'
import gzip, struct, sys
src, dst = "/usr/share/datasets/fashion-mnist", sys.argv[1]
def cut(name, n):
    raw = gzip.open(f"{src}/{name}").read()
    magic, count = struct.unpack(">II", raw[:8])
    dims = raw[3]
    shape = struct.unpack(">" + "I" * dims, raw[4:4 + 4 * dims])
    per = 1
    for d in shape[1:]:
        per *= d
    n = min(n, count)
    head = raw[:4] + struct.pack(">I", n) + raw[8:4 + 4 * dims]
    with gzip.open(f"{dst}/{name}", "wb") as f:
        f.write(head + raw[4 + 4 * dims: 4 + 4 * dims + n * per])
cut("train-images-idx3-ubyte.gz", 6000)
cut("train-labels-idx1-ubyte.gz", 6000)
cut("t10k-images-idx3-ubyte.gz", 1000)
cut("t10k-labels-idx1-ubyte.gz", 1000)
PY
# the binaries share most of their code: compressed together they travel in a fraction of it
tar -C "$out" -cJf "$out/bin.tar.xz" bin
rm -rf "$out/bin"
du -sh "$out/bin.tar.xz" "$out/lib" "$out/data"
