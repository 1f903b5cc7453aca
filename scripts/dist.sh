#!/usr/bin/env bash
# `make dist`: a relocatable feedbench for a Linux x86_64 machine that has PyTorch 2.11 and
# nothing else of ours (no Rust, no FFmpeg packages, no network).
#
#   dist/feedbench-<version>-x86_64-linux.tar.xz
#     bin/feedbench        launcher: finds libtorch, then runs bin/feedbench.bin
#     bin/feedbench.bin    the stripped release binary, RPATH $ORIGIN/../lib
#     lib/                 the shared libraries it needs beyond glibc, libstdc++, libgcc and
#                          libtorch (FFmpeg's and the codecs'), each with RPATH $ORIGIN
#     configs/ datasets/ scripts/ README.md
#
# Usage: scripts/dist.sh [BINARY]   (default: target/release/feedbench, built if missing)
set -euo pipefail
cd "$(dirname "$0")/.."

binary=${1:-target/release/feedbench}
[ -x "$binary" ] || cargo build --release
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
name="feedbench-${version}-x86_64-linux"
stage="dist/${name}"
rm -rf "$stage" "dist/${name}.tar.xz"
mkdir -p "$stage/bin" "$stage/lib"

cp "$binary" "$stage/bin/feedbench.bin"
strip --strip-unneeded "$stage/bin/feedbench.bin"

# The libraries the binary loads, by soname and resolved path; left out: the base system's C
# and C++ runtimes, the kernel's vDSO, and libtorch (the launcher finds the user's).
base_system='^(linux-vdso|ld-linux|libc|libm|libpthread|libdl|librt|libutil|libresolv|libstdc\+\+|libgcc_s)\.so'
ldd "$binary" | awk '/=> \// { print $1, $3 }' | while read -r soname path; do
    if [[ $soname =~ $base_system ]]; then continue; fi
    # libtorch and what it brings (CUDA's runtime, OpenMP) come from the user's torch.
    case "$path" in
        */torch/lib/* | */libtorch/lib/* | */nvidia/*) continue ;;
    esac
    cp -L "$path" "$stage/lib/$soname"
    chmod u+w "$stage/lib/$soname"
    strip --strip-unneeded "$stage/lib/$soname" 2>/dev/null || true
    patchelf --set-rpath '$ORIGIN' "$stage/lib/$soname"
done
patchelf --set-rpath '$ORIGIN/../lib' "$stage/bin/feedbench.bin"

cat > "$stage/bin/feedbench" <<'LAUNCHER'
#!/bin/sh
# Runs feedbench with libtorch 2.11 from $FEEDBENCH_LIBTORCH, else from python3's torch.
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
libtorch=${FEEDBENCH_LIBTORCH:-}
if [ -z "$libtorch" ] && command -v python3 >/dev/null 2>&1; then
    libtorch=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null || true)
fi
if [ -z "$libtorch" ] || [ ! -f "$libtorch/lib/libtorch_cpu.so" ]; then
    echo "feedbench: libtorch 2.11.x not found: set FEEDBENCH_LIBTORCH to a libtorch directory" \
        "(one holding lib/libtorch_cpu.so; CPU or CUDA builds both work) or install torch==2.11.*" \
        "for python3" >&2
    exit 2
fi
version=$(cat "$libtorch/version.txt" "$libtorch/build-version" 2>/dev/null | head -1 || true)
case "$version" in
    ""|2.11.*) ;;
    *) echo "feedbench: $libtorch is libtorch $version; this feedbench needs 2.11.x" >&2; exit 2 ;;
esac
LD_LIBRARY_PATH="$libtorch/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/feedbench.bin" "$@"
LAUNCHER
chmod +x "$stage/bin/feedbench"

cp -r configs datasets "$stage/"
mkdir -p "$stage/scripts"
cp README.md "$stage/"
XZ_OPT=-T0 tar -C dist -cJf "dist/${name}.tar.xz" "$name"
echo "dist/${name}.tar.xz: $(du -h "dist/${name}.tar.xz" | cut -f1)" \
    "($(ls "$stage/lib" | wc -l) libraries, $(du -sh "$stage/lib" | cut -f1) unpacked)"
