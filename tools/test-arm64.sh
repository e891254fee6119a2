#!/usr/bin/env bash
# make test-arm64: every chapter's tests built for 64-bit ARM (aarch64) with
# Debian's cross compiler and run under qemu-aarch64 (user-mode emulation)
# against the same committed goldens. It checks that the code is right on
# ARM (the NEON tile of the matrix product, fused multiply-adds where the
# compiler puts them), not how fast it is: an emulator's timings mean nothing.
#
# The tests run the chapter programs as build/NN_name and write scratch
# files into build/, so they run in build/arm64/, a tree of links to this
# one's files with a build/ of its own; there each ARM program is kept as
# NAME.arm64 behind a two-line script that hands it to qemu-aarch64.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh arm64
root=build/arm64
mkdir -p "$root"
for f in * .data; do
    [ -e "$f" ] && [ "$f" != build ] && ln -sfn "../../$f" "$root/$f"
done
# No -march: the build is for any ARMv8-A CPU, whose NEON is always there.
make -C "$root" -j2 CC=aarch64-linux-gnu-gcc ARCH= all >/dev/null
for exe in "$root"/build/*; do
    [ -f "$exe" ] && [ -x "$exe" ] && [ "${exe%.arm64}" = "$exe" ] || continue
    [ "$(head -c 4 "$exe" | tail -c 3)" = ELF ] || continue      # already wrapped
    mv -f "$exe" "$exe.arm64"
    printf '#!/bin/sh\nexec qemu-aarch64 "$0.arm64" "$@"\n' > "$exe"
    chmod +x "$exe"
done
echo "test-arm64: aarch64 programs under $(qemu-aarch64 --version | head -n 1)"
cd "$root"
tests=()
for t in build/test_[0-9][0-9]_*; do [ "${t%.arm64}" = "$t" ] && tests+=("$t"); done
# An emulated program runs many times slower: 900 s a program, as make sanitize.
TEST_TIMEOUT=${TEST_TIMEOUT:-900} tools/run-tests.sh "${tests[@]}"
