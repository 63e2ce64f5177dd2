#!/usr/bin/env bash
# deps.sh — installs the Debian packages tracejit needs to build, test and benchmark.
# Idempotent: checks each package with dpkg-query and calls apt-get (update + install) only
# when something is missing, so a machine that has everything prints one line and does nothing.
# Runs without a TTY (CI has no stdin). Needs root, or sudo, only when something is missing.
set -euo pipefail

PKGS=(
    cmake make gcc pkg-config libffi-dev
    llvm-19-dev           # the LLVM backend of jit/
    libopenblas-dev       # BLAS for matmul/conv kernels
    clang-14 libclang-rt-14-dev clang-format-14  # LeakSanitizer runtime, format check
    python3-venv          # peer benchmarks in bench/, the Python package's tests
    python3-dev           # the Python package's C extension (python/)
    zlib1g-dev            # gzip-compressed IDX datasets (tj_idx_load)
    dataset-fashion-mnist # the seed CNN's training data (examples/train_cnn.c)
    graphviz              # `dot`: pictures of graphs (tj_concrete_graph_dot, TJ_DUMP)
    libprotobuf-c-dev protobuf-c-compiler libonnx-dev  # the ONNX frontend (frontends/onnx)
    libonnx-testdata      # ONNX's backend tests, run by tests/onnx/conformance.c
)

missing=()
for p in "${PKGS[@]}"; do
    st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    if [ "$st" != "installed" ]; then
        missing+=("$p")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "deps: all ${#PKGS[@]} packages present"
    exit 0
fi

echo "deps: installing ${missing[*]}"
SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    SUDO=(sudo -n)
fi
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -q </dev/null
"${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
echo "deps: done"
