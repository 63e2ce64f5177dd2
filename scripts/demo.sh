#!/usr/bin/env bash
# demo.sh — installs what is missing, builds build/ (RelWithDebInfo), runs the seed examples
# (./build/seeds) and then the quick benchmark table (bench/run --quick) when it exists.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
JOBS=${TJ_JOBS:-2}
B=${TJ_BUILD:-build} # the build tree (TJ_BUILD renames it)

bash scripts/deps.sh

echo "== build $B/ (RelWithDebInfo)"
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$B" -j"$JOBS"

echo "== seed examples (./$B/seeds)"
"./$B/seeds"

# the seed's CNN trained on Fashion-MNIST (S22): one compiled step per batch, the loss every 100
# steps (drop --quiet to print it every step, as the seed's tf.print does)
echo "== training the seed's CNN (./$B/train_cnn --steps ${TJ_TRAIN_STEPS:-1000} --quiet)"
"./$B/train_cnn" --steps "${TJ_TRAIN_STEPS:-1000}" --quiet --every 100

# S28: the CNN's prediction function drawn with its kernels as clusters (TJ_DUMP writes the DOT
# beside the text IR and the LLVM IR; Graphviz renders it)
echo "== a picture of the CNN's graph and kernels ($B/graphs/predict.png)"
rm -rf "$B/graphs" && mkdir -p "$B/graphs"
TJ_DUMP="$B/graphs" TJ_CACHE=0 "./$B/train_cnn" --steps 1 --quiet > /dev/null
dot -Tpng "$B"/graphs/predict.*.kernels.dot -o "$B/graphs/predict.png"
ls -l "$B/graphs/predict.png"

# S27/S28: the seeds again, saving the DemoModule where the module tool can show and run it, and
# recording a profile of the whole run
echo "== a saved module (./$B/tj_module show/run) and a profile of the seeds (S27, S28)"
rm -rf "$B/demo_module"
TJ_SEEDS_MODULE_DIR="$B/demo_module" TJ_PROFILE="$B/seeds_profile.json" "./$B/seeds" > /dev/null
"./$B/tj_module" show "$B/demo_module"
"./$B/tj_module" run "$B/demo_module" addprint 5
echo "profile: $B/seeds_profile.json (open it in ui.perfetto.dev or chrome://tracing)"

# the ONNX frontend: a PyTorch-exported convolution from ONNX's test data, and the conformance
# summary against ONNX's backend tests (issue 13)
D=/usr/share/libonnx-testdata/data
if [ -x "$B/frontends/onnx/tj_onnx" ] && [ -d "$D" ]; then
    echo "== an ONNX model (./$B/frontends/onnx/tj_onnx show/time) and ONNX's backend tests"
    "./$B/frontends/onnx/tj_onnx" show "$D/pytorch-converted/test_Conv2d/model.onnx"
    "./$B/frontends/onnx/tj_onnx" time "$D/pytorch-converted/test_Conv2d/model.onnx" 100 \
        "$D/pytorch-converted/test_Conv2d/test_data_set_0/input_0.pb"
    if [ -x "$B/tests/onnx_conformance" ]; then
        "./$B/tests/onnx_conformance" "$D" --report "$B/onnx_conformance.md" | head -10
    fi
fi

if [ -f bench/run ]; then
    echo "== benchmark table (bench/run --quick)"
    if [ -x bench/run ]; then
        ./bench/run --quick
    else
        bash bench/run --quick
    fi
else
    echo "== bench/run not found: benchmark table skipped"
fi
