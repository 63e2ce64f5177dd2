#!/usr/bin/env bash
# run.sh BUILD_DIR — the install test: installs BUILD_DIR into a temporary prefix, then builds
# and runs two consumers of the installed package: tests/install/consumer through
# find_package(tracejit) and the same main.c through `pkg-config --cflags --libs tracejit`.
# Exits non-zero if any step fails. Registered in CTest as install_find_package.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD=$(cd "${1:-$HERE/../../build}" && pwd)
CC=${CC:-cc}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tj-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

step() { echo "install test: $*"; }

step "cmake --install $BUILD --prefix $prefix"
cmake --install "$BUILD" --prefix "$prefix" >"$tmp/install.log" 2>&1 || {
    cat "$tmp/install.log"
    exit 1
}

# 1. find_package(tracejit REQUIRED) + tracejit::tracejit
step "find_package consumer"
cmake -S "$HERE/consumer" -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_BUILD_TYPE=Release >"$tmp/cm.log" 2>&1 || {
    cat "$tmp/cm.log"
    exit 1
}
found=$(sed -n 's/^tracejit_DIR:PATH=//p' "$tmp/cm/CMakeCache.txt")
case "$found" in
"$prefix"/*) ;;
*)
    echo "install test: find_package found tracejit in '$found', not in $prefix"
    exit 1
    ;;
esac
cmake --build "$tmp/cm" >"$tmp/cm-build.log" 2>&1 || {
    cat "$tmp/cm-build.log"
    exit 1
}
"$tmp/cm/consumer"
if [ -x "$tmp/cm/consumer_static" ]; then
    "$tmp/cm/consumer_static"
fi

# 2. pkg-config (--define-prefix: the .pc file is relocated with the prefix)
step "pkg-config consumer"
pc=$(find "$prefix" -name tracejit.pc -print -quit)
if [ -z "$pc" ]; then
    echo "install test: tracejit.pc not installed under $prefix"
    exit 1
fi
PKG_CONFIG_PATH="$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export PKG_CONFIG_PATH
read -r -a flags <<<"$(pkg-config --define-prefix --cflags --libs tracejit)"
libdir=$(pkg-config --define-prefix --variable=libdir tracejit)
case "${flags[*]}" in
*"-I$prefix/"*) ;;
*)
    echo "install test: pkg-config flags do not point into $prefix: ${flags[*]}"
    exit 1
    ;;
esac
"$CC" -std=c11 -Wall -Wextra -Werror "$HERE/consumer/main.c" -o "$tmp/consumer_pc" "${flags[@]}" \
      -Wl,-rpath,"$libdir"
"$tmp/consumer_pc"

# 3. pkg-config --static against the static library: LLVM and the C++ runtime come from
# Libs.private
step "pkg-config --static consumer (libtracejit.a)"
read -r -a sflags <<<"$(pkg-config --define-prefix --static --cflags --libs tracejit)"
for i in "${!sflags[@]}"; do
    [ "${sflags[$i]}" = "-ltracejit" ] && sflags[$i]="$libdir/libtracejit.a"
done
"$CC" -std=c11 -Wall -Wextra -Werror "$HERE/consumer/main.c" -o "$tmp/consumer_pc_static" \
      "${sflags[@]}"
if ldd "$tmp/consumer_pc_static" | grep -q 'libtracejit'; then
    echo "install test: the --static consumer links libtracejit.so, not the static library"
    exit 1
fi
"$tmp/consumer_pc_static"
# 4. the ONNX importer, when this build has it: find_package(tracejit COMPONENTS onnx) (shared
# and static), pkg-config tracejit_onnx, and the installed tools
if [ -f "$BUILD/frontends/onnx/libtracejit_onnx.so" ]; then
    step "find_package(tracejit COMPONENTS onnx) consumer"
    cmake -S "$HERE/consumer_onnx" -B "$tmp/cmo" -DCMAKE_PREFIX_PATH="$prefix" \
          -DCMAKE_BUILD_TYPE=Release >"$tmp/cmo.log" 2>&1 || {
        cat "$tmp/cmo.log"
        exit 1
    }
    cmake --build "$tmp/cmo" >"$tmp/cmo-build.log" 2>&1 || {
        cat "$tmp/cmo-build.log"
        exit 1
    }
    "$tmp/cmo/consumer_onnx" "$tmp/relu.onnx"
    "$tmp/cmo/consumer_onnx_static"
    step "pkg-config tracejit_onnx consumer"
    read -r -a oflags <<<"$(pkg-config --define-prefix --cflags --libs tracejit_onnx)"
    "$CC" -std=c11 -Wall -Wextra -Werror "$HERE/consumer_onnx/main.c" -o "$tmp/consumer_onnx_pc" \
          "${oflags[@]}" -Wl,-rpath,"$libdir"
    "$tmp/consumer_onnx_pc"
    step "installed tools: tj_onnx show, tj_module"
    shown=$("$prefix/bin/tj_onnx" show "$tmp/relu.onnx" 2>&1 || true)
    case "$shown" in
    *"opset 13, 1 inputs, 1 outputs"*) ;;
    *)
        echo "install test: the installed tj_onnx show printed: $shown"
        exit 1
        ;;
    esac
    usage=$("$prefix/bin/tj_module" 2>&1 || true)
    case "$usage" in
    *"usage: tj_module"*) ;;
    *)
        echo "install test: the installed tj_module printed: $usage"
        exit 1
        ;;
    esac
fi
step "OK (find_package, pkg-config, pkg-config --static, the ONNX component and tools)"
