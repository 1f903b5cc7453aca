#!/usr/bin/env bash
# Where the shared libraries of a bundled binary resolve: every library that the binary and the
# libraries beside it need must resolve inside one of the allowed directories or to the base
# system (glibc, libstdc++, libgcc_s), with only LIBTORCH_LIB on LD_LIBRARY_PATH. Used by
# scripts/dist-check.sh (the tarball) and tests/wheel/run.sh (the installed wheel).
#
# Usage: scripts/resolve-check.sh LABEL LIBTORCH_LIB ALLOWED_DIR… -- ELF_FILE…
# Prints each library that resolves elsewhere (or not at all) and exits 1 if there is one.
set -euo pipefail
label=$1 libtorch_lib=$2
shift 2
allowed=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    allowed+=("$(realpath -m "$1")")
    shift
done
[ "${1:-}" = "--" ] || { echo "usage: $0 LABEL LIBTORCH_LIB ALLOWED_DIR… -- ELF_FILE…" >&2; exit 2; }
shift
base_system='^(linux-vdso|ld-linux-x86-64|libc|libm|libpthread|libdl|librt|libutil|libresolv|libstdc\+\+|libgcc_s)\.so'
inside() {
    local dir
    for dir in "${allowed[@]}"; do
        [[ $1 == "$dir"/* ]] && return 0
    done
    return 1
}
unresolved=0
for file in "$@"; do
    while read -r soname arrow path _; do
        [ "$arrow" = "=>" ] || continue  # the loader itself and the vDSO
        if [ "$path" != "not" ]; then
            path=$(realpath -m "$path")
            inside "$path" && continue
            [[ $soname =~ $base_system ]] && continue
        fi
        echo "$label: $(basename "$file") needs $soname, resolved to '$path'" >&2
        unresolved=1
    done < <(env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$libtorch_lib" ldd "$file")
done
exit $unresolved
