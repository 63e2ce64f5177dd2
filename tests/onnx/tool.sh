#!/usr/bin/env bash
# tool.sh TJ_ONNX DATA_DIR — the tj_onnx command line: show names the inputs and outputs; run
# saves outputs that match ONNX's expected ones byte for byte (TensorProto, raw data) and prints
# them; time reports load, first call and steady state; bad usage exits 2; a missing or corrupt
# file exits 1 with a message naming it.
set -u
tool=$1
data=$2
case_dir=$data/node/test_relu
[ -f "$case_dir/model.onnx" ] || { echo "no ONNX test data at $data"; exit 77; }
fail=0
check() { # check NAME EXPECTED_STATUS EXPECTED_TEXT -- COMMAND...
  local name=$1 want=$2 text=$3
  shift 4
  out=$("$@" 2>&1)
  got=$?
  if [ "$got" != "$want" ] || ! grep -qF -- "$text" <<< "$out"; then
    echo "FAIL $name: status $got (want $want), output:"
    echo "$out" | head -5
    fail=1
  else
    echo "ok   $name"
  fi
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check show 0 "input 0 'x': float32 [3, 4, 5]" -- "$tool" show "$case_dir/model.onnx"
check run-print 0 "y = " -- "$tool" run "$case_dir/model.onnx" "$case_dir/test_data_set_0/input_0.pb"
check run-save 0 "y -> $tmp/output_0.pb" -- \
  "$tool" run -o "$tmp" "$case_dir/model.onnx" "$case_dir/test_data_set_0/input_0.pb"
if ! cmp -s "$tmp/output_0.pb" "$case_dir/test_data_set_0/output_0.pb"; then
  echo "FAIL run-save: the saved output differs from ONNX's"
  fail=1
fi
check time 0 "median of 5 calls" -- \
  "$tool" time "$case_dir/model.onnx" 5 "$case_dir/test_data_set_0/input_0.pb"
# the process's peak resident memory (Linux's VmHWM), which onnx_models.py reads
check time_peak 0 "; peak resident " -- \
  "$tool" time "$case_dir/model.onnx" 2 "$case_dir/test_data_set_0/input_0.pb"
check usage 2 "usage: tj_onnx" -- "$tool" frobnicate "$case_dir/model.onnx"
check arity 2 "the model takes 1 inputs, 0 given" -- "$tool" run "$case_dir/model.onnx"
check missing 1 "cannot open $tmp/none.onnx" -- "$tool" show "$tmp/none.onnx"
head -c 40 "$case_dir/model.onnx" > "$tmp/cut.onnx"
check corrupt 1 "$tmp/cut.onnx" -- "$tool" show "$tmp/cut.onnx"
check bad-input 1 "is not a serialized TensorProto" -- \
  "$tool" run "$case_dir/model.onnx" "$case_dir/model.onnx"
check unwritable 1 "cannot write /nonexistent/dir/output_0.pb" -- \
  "$tool" run -o /nonexistent/dir "$case_dir/model.onnx" "$case_dir/test_data_set_0/input_0.pb"
exit $fail
