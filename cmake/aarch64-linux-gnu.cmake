# aarch64-linux-gnu.cmake — a CMake toolchain for cross-building tracejit for aarch64 on an
# x86-64 Debian with gcc-aarch64-linux-gnu and the arm64 multiarch packages (libffi-dev:arm64,
# zlib1g-dev:arm64, libopenblas0:arm64): scripts/aarch64.sh uses it. Programs run under
# qemu-aarch64 (qemu-user), so ctest runs the tests as they are. No -L sysroot: the programs' loader
# is the multiarch /lib/ld-linux-aarch64.so.1 of libc6:arm64, which loads libc from
# /lib/aarch64-linux-gnu; with -L /usr/aarch64-linux-gnu the cross package's older ld.so was
# paired with that newer libc.so.6 and the first pthread_create spun forever in glibc's stack
# cache (the "qemu hangs with threads" of earlier notes).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
