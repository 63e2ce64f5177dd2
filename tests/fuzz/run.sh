#!/usr/bin/env bash
# run.sh [SECONDS] [TARGET...] — coverage-guided fuzzing with clang's libFuzzer, bounded in time.
# Targets: parse (the text IR parser), cache (the disk-cache entry decoder and the CPU payload
# parser), checkpoint (the checkpoint reader), module (the saved-module loader), image (saved
# native code: program images and the ELF object loader) and onnx (the ONNX model reader and
# importer). Each runs SECONDS (default 60) under
# ASan + UBSan, starting from its checked-in corpus
# (tests/fuzz/corpus/<target>/, plus the golden .tjir files for parse); inputs that add coverage
# are merged back into the corpus, which CTest replays on every test run (fuzz_replay_*).
# A crash leaves its input in build-fuzz/ and makes this script fail. Not part of CI: run it by
# hand, commit what it adds to the corpus.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
SECONDS_EACH=${1:-60}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(parse cache checkpoint module image onnx)
CC=${FUZZ_CC:-clang-14}
OUT=build-fuzz
mkdir -p "$OUT"
FLAGS=(-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -D_GNU_SOURCE
       -I. -Iinclude $(pkg-config --cflags libffi))

build() {
    case "$1" in
    parse) "$CC" "${FLAGS[@]}" tests/fuzz/fuzz_parse.c ir/*.c -lm -o "$OUT/fuzz_parse" ;;
    cache) "$CC" "${FLAGS[@]}" tests/fuzz/fuzz_cache.c jit/cache.c jit/cpu/payload.c \
               runtime/config.c ir/*.c -lpthread -lm -o "$OUT/fuzz_cache" ;;
    checkpoint) "$CC" "${FLAGS[@]}" tests/fuzz/fuzz_checkpoint.c runtime/*.c runtime/kernels/*.c \
               ir/*.c $(pkg-config --libs libffi) -lz -lpthread -lm -ldl -o "$OUT/fuzz_checkpoint" ;;
    module|image) # the whole library, instrumented for coverage, then the target linked to it
        cmake -S . -B "$OUT/lib" -DCMAKE_C_COMPILER="$CC" -DCMAKE_BUILD_TYPE=Debug \
            -DTJ_BUILD_TESTS=OFF -DTJ_BUILD_BENCH=OFF \
            -DCMAKE_C_FLAGS="-g -O1 -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all" > /dev/null
        cmake --build "$OUT/lib" -j2 --target tracejit_static > /dev/null
        "$CC" "${FLAGS[@]}" -I"$OUT/lib/gen" tests/fuzz/fuzz_$1.c "$OUT/lib/libtracejit.a" \
            $(pkg-config --libs libffi) -lz -L/usr/lib/llvm-19/lib -lLLVM-19 \
            -Wl,-rpath,/usr/lib/llvm-19/lib -lpthread -lm -ldl -o "$OUT/fuzz_$1" ;;
    onnx) # the library and the frontend, instrumented, then the target linked to them
        cmake -S . -B "$OUT/lib" -DCMAKE_C_COMPILER="$CC" -DCMAKE_BUILD_TYPE=Debug \
            -DTJ_BUILD_TESTS=OFF -DTJ_BUILD_BENCH=OFF \
            -DCMAKE_C_FLAGS="-g -O1 -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all" > /dev/null
        cmake --build "$OUT/lib" -j2 --target tracejit_onnx > /dev/null
        "$CC" "${FLAGS[@]}" -Ifrontends/onnx tests/fuzz/fuzz_onnx.c \
            "$OUT/lib/frontends/onnx/libtracejit_onnx.a" "$OUT/lib/libtracejit.a" \
            $(pkg-config --libs libffi libprotobuf-c) -lz -L/usr/lib/llvm-19/lib -lLLVM-19 \
            -Wl,-rpath,/usr/lib/llvm-19/lib -lpthread -lm -ldl -o "$OUT/fuzz_onnx" ;;
    *) echo "run.sh: unknown target $1 (parse, cache, checkpoint, module, image, onnx)" >&2; exit 2 ;;
    esac
}

for t in "${TARGETS[@]}"; do
    echo "== fuzz $t for ${SECONDS_EACH}s"
    build "$t"
    corpus=tests/fuzz/corpus/$t
    fresh=$OUT/new-$t
    mkdir -p "$corpus" "$fresh"
    seeds=()
    [ "$t" = parse ] && seeds=(tests/passes)
    if [ "$t" = image ]; then # this build's own image of the harness's function: a valid start
        mkdir -p "$OUT/image-seeds" "$OUT/image-none"
        echo x > "$OUT/image-none/x"
        FUZZ_IMAGE_SEED="$OUT/image-seeds/genuine" "$OUT/fuzz_image" -runs=1 "$OUT/image-none" \
            > /dev/null 2>&1 || true
        seeds=("$OUT/image-seeds")
    fi
    if [ "$t" = onnx ] && [ -d /usr/share/libonnx-testdata/data/node ]; then
        mkdir -p "$OUT/onnx-seeds" # ONNX's own test models as seeds (not committed)
        for m in /usr/share/libonnx-testdata/data/node/*/model.onnx; do
            cp "$m" "$OUT/onnx-seeds/$(basename "$(dirname "$m")").onnx"
        done
        seeds=("$OUT/onnx-seeds")
    fi
    export TJ_CACHE_DIR="$OUT/cache-dir"
    (cd "$OUT" && ASAN_OPTIONS=detect_leaks=1 "./fuzz_$t" -max_total_time="$SECONDS_EACH" \
        -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
        "../$fresh" "../$corpus" "${seeds[@]/#/../}")
    "./$OUT/fuzz_$t" -merge=1 "$corpus" "$fresh" 2>&1 | tail -n 2
    rm -rf "$fresh"
    echo "== $t: $(ls "$corpus" | wc -l) inputs in $corpus"
done
