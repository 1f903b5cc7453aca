#!/usr/bin/env bash
# `make dist`: a relocatable feedbench for a Linux x86_64 machine that has PyTorch 2.11 and
# nothing else of ours (no Rust, no FFmpeg packages, no network).
#
#   dist/feedbench-<version>-x86_64-linux.tar.xz
#     bin/feedbench        launcher: finds libtorch, then runs bin/feedbench.bin
#     bin/feedbench.bin    the stripped release binary, RPATH $ORIGIN/../lib
#     lib/                 the shared libraries it needs beyond glibc, libstdc++, libgcc and
#                          libtorch (FFmpeg's and the codecs'), each with RPATH $ORIGIN, and
#                          stand-ins for those FFmpeg names but feedbench never calls
#                          (lib/STUBS lists them), each under a name of its own
#                          (libavcodec-feedbench-HASH.so.59: lib/SONAMES maps them)
#     configs/ datasets/ README.md docs/ (the README's linked pages)
#     scripts/gpu-check.sh the CUDA path's check (it runs bin/feedbench)
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

# The libraries the binary loads, by soname and resolved path. Left out: the base system's C
# and C++ runtimes, the kernel's vDSO, and libtorch with what it brings (CUDA's runtime,
# OpenMP), which the launcher finds in the user's torch.
base_system='^(linux-vdso|ld-linux-x86-64|libc|libm|libpthread|libdl|librt|libutil|libresolv|libstdc\+\+|libgcc_s)\.so'
# What feedbench calls: FFmpeg's libraries and the codecs it decodes and encodes with (AV1 with
# dav1d and SVT-AV1, H.264 with x264, HEVC with x265), with theirs. Every other library that
# Debian's FFmpeg names (some 150 MB of subtitle, speech, TLS, GPU and codec libraries) gets a
# stand-in with its soname and symbols (scripts/stub_library.py): FFmpeg binds them at load
# time but feedbench never reaches them.
kept='^(libavcodec|libavformat|libavutil|libavfilter|libswscale|libswresample|libdav1d|libSvtAv1Enc|libx264|libx265|libaom|libvpx|libnuma|libz|liblzma|libbz2)\.so'
declare -A resolved
while read -r soname path; do resolved[$soname]=$path; done \
    < <(ldd "$binary" | awk '/=> \// { print $1, $3 }')

bundle_library() {  # soname: copy it or stand in for it, once, then follow what it needs
    local soname=$1 path=${resolved[$1]:-}
    [[ $soname =~ $base_system ]] && return 0
    [ -e "$stage/lib/$soname" ] || [ -n "${stubbed[$soname]:-}" ] && return 0
    case "$path" in
        "") echo "dist: $soname is needed but ldd did not resolve it" >&2; exit 1 ;;
        */torch/lib/* | */libtorch/lib/* | */nvidia/*) return 0 ;;
    esac
    if [[ $soname =~ $kept ]]; then
        cp -L "$path" "$stage/lib/$soname"
        chmod u+w "$stage/lib/$soname"
        strip --strip-unneeded "$stage/lib/$soname" 2>/dev/null || true
        patchelf --set-rpath '$ORIGIN' "$stage/lib/$soname"
        local needed
        for needed in $(readelf -d "$path" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
            bundle_library "$needed"
        done
    else
        stubbed[$soname]=1
    fi
}
declare -A stubbed
for soname in $(readelf -d "$binary" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    bundle_library "$soname"
done
# Each stand-in defines what the copied libraries import from it.
stubs=($(printf '%s\n' "${!stubbed[@]}" | sort))
for soname in "${stubs[@]}"; do
    python3 scripts/stub_library.py "${resolved[$soname]}" "$soname" "$stage/lib/$soname" \
        $(ls "$stage"/lib/*.so* | grep -vxFf <(printf "$stage/lib/%s\n" "${stubs[@]}"))
done
# Names of their own, as auditwheel gives them: each library's soname (and file) gets
# `-feedbench-HASH` (of its content) before `.so`, and every NEEDED entry (and symbol version
# requirement) naming it follows. In a process that loads other copies of these libraries
# (torchcodec's or PyAV's FFmpeg, the system's libX11 that libavdevice pulls in), theirs bind to
# theirs and feedbench's to feedbench's; a stand-in never stands in for anyone else's library.
# lib/SONAMES maps each original soname to its bundled name (wheel.py renames the module's).
declare -A renamed
for path in "$stage"/lib/*.so*; do
    soname=$(basename "$path")
    stem=${soname%%.so*}
    renamed[$soname]="${stem}-feedbench-$(sha256sum "$path" | cut -c1-8)${soname#"$stem"}"
done
for soname in "${!renamed[@]}"; do
    mv "$stage/lib/$soname" "$stage/lib/${renamed[$soname]}"
    patchelf --set-soname "${renamed[$soname]}" "$stage/lib/${renamed[$soname]}"
done
rename_needed() {  # file: its NEEDED entries that name a bundled library, renamed
    local needed replace=()
    for needed in $(readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
        [ -z "${renamed[$needed]:-}" ] || replace+=(--replace-needed "$needed" "${renamed[$needed]}")
    done
    [ ${#replace[@]} -eq 0 ] || patchelf "${replace[@]}" "$1"
}
for path in "$stage"/lib/*.so* "$stage/bin/feedbench.bin"; do rename_needed "$path"; done
for soname in "${!renamed[@]}"; do echo "$soname ${renamed[$soname]}"; done | sort > "$stage/lib/SONAMES"
for soname in "${stubs[@]}"; do echo "${renamed[$soname]}"; done > "$stage/lib/STUBS"
patchelf --set-rpath '$ORIGIN/../lib' "$stage/bin/feedbench.bin"

cat > "$stage/bin/feedbench" <<'LAUNCHER'
#!/bin/sh
# Runs feedbench with libtorch 2.11 from $FEEDBENCH_LIBTORCH, else from python3's torch.
here=$(CDPATH= cd -- "${0%/*}" && pwd)
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

cp -r configs datasets docs "$stage/"
mkdir -p "$stage/scripts"
cp scripts/gpu-check.sh "$stage/scripts/"
cp README.md "$stage/"
XZ_OPT=-T0 tar -C dist -cJf "dist/${name}.tar.xz" "$name"
echo "dist/${name}.tar.xz: $(du -h "dist/${name}.tar.xz" | cut -f1)" \
    "($(($(ls "$stage/lib" | wc -l) - 2 - ${#stubs[@]})) libraries and ${#stubs[@]} stand-ins," \
    "$(du -sh "$stage" | cut -f1) unpacked)"
