#!/usr/bin/env bash
# test.sh — the project's one test command (CI runs it through .ci/run).
# Installs missing packages, builds build/ (RelWithDebInfo) and build-asan/ (Debug, ASan+UBSan),
# runs ctest in both (the normal tree also runs the install test: find_package + pkg-config
# consumers), a ThreadSanitizer tree for the threaded tests, and build-aarch64/ (cross-built, its
# tests under qemu-aarch64: scripts/aarch64.sh), and ends with one combined line
# "total: N passed, N failed, N skipped".
# Exits non-zero if any step fails. TJ_JOBS overrides the parallelism (default 2); TJ_BUILD
# renames the trees (default "build": build/ and build-asan/).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
JOBS=${TJ_JOBS:-2}
B=$ROOT/${TJ_BUILD:-build}
BA=$B-asan

bash scripts/deps.sh

# ---- format: a warning only, never a failure -----------------------------------------------------
format_check() {
    local cf=clang-format-14 bad=() f
    if ! command -v "$cf" >/dev/null 2>&1; then
        echo "format: $cf not found, skipped"
        return 0
    fi
    while IFS= read -r -d '' f; do
        if ! "$cf" --dry-run --Werror "$f" >/dev/null 2>&1; then
            bad+=("${f#./}")
        fi
    done < <(git ls-files -z -- 'include/*.h' 'ir/*.[ch]' 'passes/*.[ch]' 'runtime/*.[ch]' 'api/*.[ch]' \
                 'jit/*.[ch]' 'tests/*.[ch]' 'examples/*.c' 'bench/*.[ch]' 2>/dev/null)
    if [ ${#bad[@]} -eq 0 ]; then
        echo "format: all files match .clang-format"
    else
        echo "format: WARNING: ${#bad[@]} file(s) differ from .clang-format (not an error):"
        printf '  %s\n' "${bad[@]}" | head -n 30
    fi
}
format_check

# ---- build both trees -----------------------------------------------------------------------------
echo "== configure + build ${B#"$ROOT"/}/ (RelWithDebInfo)"
cmake -S "$ROOT" -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTJ_WERROR=ON -DTJ_SANITIZE=OFF
cmake --build "$B" -j"$JOBS"

echo "== configure + build ${BA#"$ROOT"/}/ (Debug, ASan + UBSan)"
cmake -S "$ROOT" -B "$BA" -DCMAKE_BUILD_TYPE=Debug -DTJ_SANITIZE=ON -DTJ_WERROR=ON \
      -DTJ_BUILD_BENCH=OFF
cmake --build "$BA" -j"$JOBS"

# ---- run ctest in both; the sanitizer run comes last ---------------------------------------------
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
if [ -f "$ROOT/tests/lsan.supp" ]; then
    # leaks inside system libraries (libLLVM, libffi) that are not ours
    export LSAN_OPTIONS="suppressions=$ROOT/tests/lsan.supp:print_suppressions=0"
fi

TOTAL_PASS=0
TOTAL_FAIL=0
TOTAL_SKIP=0
RC=0

# run_ctest DIR [REGEX]: runs ctest in DIR (the tests matching REGEX), adds its counts to the
# totals, never exits the script.
run_ctest() {
    local dir=$1 filter=${2:-} log summary total failed skipped rc=0
    log=$(mktemp)
    echo "== ctest in ${dir#"$ROOT"/}/${filter:+ (${filter})}"
    (cd "$dir" && ctest --output-on-failure -j"$JOBS" --no-tests=error ${filter:+-R "$filter"}) 2>&1 |
        tee "$log" || rc=$?
    summary=$(grep -E '[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1 || true)
    if [ -z "$summary" ]; then
        echo "test.sh: ctest in $dir printed no summary (rc=$rc)"
        TOTAL_FAIL=$((TOTAL_FAIL + 1))
        RC=1
    else
        total=$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$summary")
        failed=$(sed -E 's/.*, ([0-9]+) tests? failed.*/\1/' <<<"$summary")
        skipped=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*\*\*\*(Skipped|Not Run)' "$log" || true)
        TOTAL_PASS=$((TOTAL_PASS + total - failed - skipped))
        TOTAL_FAIL=$((TOTAL_FAIL + failed))
        TOTAL_SKIP=$((TOTAL_SKIP + skipped))
        if [ "$rc" -ne 0 ] || [ "$failed" -ne 0 ]; then
            RC=1
        fi
    fi
    rm -f "$log"
}

# ---- double releases: a tensor released by hand that a scope also owns is caught (and logged
# under TJ_LOG=misuse) only while its header is among the last 1024 its thread freed
# (runtime/lifetime.c); past that it is a use after free, which one more test once exposed. The
# normal tree's tests run with the misuse log on, and a double release any of them logs fails
# the run (jit_test_hardening makes some on purpose, into its own log sink).
TJ_LOG=misuse run_ctest "$B"
doubles=$(awk '/^[0-9]+\/[0-9]+ Testing: /{t=$3} /was already released/ && t != "jit_test_hardening" {print t}' \
              "$B/Testing/Temporary/LastTest.log" 2>/dev/null | sort | uniq -c || true)
if [ -n "$doubles" ]; then
    echo "test.sh: tests released tensors twice (by hand and by their scope; TJ_LOG=misuse):"
    echo "$doubles"
    TOTAL_FAIL=$((TOTAL_FAIL + 1))
    RC=1
fi

# ---- the Python package (python/): installed into a venv beside the tree, against the tree's own
# library, then pytest; its summary joins the totals. The system Python is not touched.
run_pytest() {
    local venv=$B-py log rc=0 summary n
    echo "== python: pip install ./python into ${venv#"$ROOT"/}/ (against ${B#"$ROOT"/}/), pytest"
    log=$(mktemp)
    {
        [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
        "$venv/bin/pip" install -q --disable-pip-version-check numpy pytest setuptools wheel
        TJ_BUILD_DIR=$B "$venv/bin/pip" install -q --disable-pip-version-check --no-build-isolation \
            --force-reinstall --no-deps "$ROOT/python"
        (cd "$venv" && "$venv/bin/python" -m pytest -q -p no:cacheprovider "$ROOT/python/tests")
    } 2>&1 | tee "$log" || rc=$?
    summary=$(grep -E '[0-9]+ (passed|failed|errors?)' "$log" | tail -n 1 || true)
    if [ -z "$summary" ]; then
        echo "test.sh: the Python package's tests printed no summary (rc=$rc)"
        TOTAL_FAIL=$((TOTAL_FAIL + 1))
        RC=1
    else
        for kind in passed failed skipped error; do
            n=$(grep -oE "[0-9]+ ${kind}s?" <<<"$summary" | grep -oE '[0-9]+' || echo 0)
            case $kind in
            passed) TOTAL_PASS=$((TOTAL_PASS + n)) ;;
            skipped) TOTAL_SKIP=$((TOTAL_SKIP + n)) ;;
            *) TOTAL_FAIL=$((TOTAL_FAIL + n)) ;;
            esac
        done
        [ "$rc" -eq 0 ] || RC=1
    fi
    rm -f "$log"
}
run_pytest

# ---- ThreadSanitizer: the tests that run calls, pools and variables on many threads -------------
THREADED='^(jit_test_cache|jit_test_kernel_reuse|jit_test_quick_compile|jit_test_unknown_dims|jit_test_shape_reuse|jit_test_compile_split|jit_test_compile_split_four|jit_test_tiered|jit_test_churn_interp|jit_test_call_into|jit_test_cpu_pool|jit_test_cpu_program|jit_test_fused_kernels|runtime_test_cuda_device_fake_ok|jit_test_cuda_backend_cubin|semantics_s10_captured_variables|semantics_s13_host_callback)$'
BT=$B-tsan
echo "== configure + build ${BT#"$ROOT"/}/ (ThreadSanitizer, threaded tests only)"
cmake -S "$ROOT" -B "$BT" -DCMAKE_BUILD_TYPE=Debug -DTJ_TSAN=ON -DTJ_WERROR=ON -DTJ_BUILD_BENCH=OFF
# shellcheck disable=SC2046
cmake --build "$BT" -j"$JOBS" --target $(sed -E 's/[\^$()]//g; s/\|/ /g; s/_interp|_four|_fake_ok|_cubin//g' <<<"$THREADED")
export TSAN_OPTIONS=halt_on_error=1
run_ctest "$BT" "$THREADED"

run_ctest "$BA"

# ---- aarch64: cross-built, its tests run under qemu-aarch64 (scripts/aarch64.sh) ------------------
# TJ_AARCH64=0 skips it (counted as one skipped step). Its two ctest summaries join the totals.
if [ "${TJ_AARCH64:-1}" = 0 ] || [ "$(uname -m)" != x86_64 ]; then
    echo "== aarch64 under qemu: skipped (TJ_AARCH64=0 or not an x86-64 host)"
    TOTAL_SKIP=$((TOTAL_SKIP + 1))
else
    echo "== aarch64: cross-build ${B#"$ROOT"/}-aarch64/ and its tests under qemu-aarch64"
    log=$(mktemp)
    rc=0
    JOBS=$JOBS bash scripts/aarch64.sh "$B-aarch64" 2>&1 | tee "$log" || rc=$?
    sums=$(grep -E '[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" || true)
    if [ "$rc" -ne 0 ] || [ "$(wc -l <<<"$sums")" -ne 2 ]; then
        echo "test.sh: the aarch64 step failed (rc=$rc)"
        RC=1
    fi
    while read -r line; do
        [ -n "$line" ] || continue
        total=$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$line")
        failed=$(sed -E 's/.*, ([0-9]+) tests? failed.*/\1/' <<<"$line")
        TOTAL_PASS=$((TOTAL_PASS + total - failed))
        TOTAL_FAIL=$((TOTAL_FAIL + failed))
        [ "$failed" -eq 0 ] || RC=1
    done <<<"$sums"
    skipped=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*\*\*\*(Skipped|Not Run)' "$log" || true)
    TOTAL_PASS=$((TOTAL_PASS - skipped))
    TOTAL_SKIP=$((TOTAL_SKIP + skipped))
    rm -f "$log"
fi

echo "total: $TOTAL_PASS passed, $TOTAL_FAIL failed, $TOTAL_SKIP skipped"
exit "$RC"
