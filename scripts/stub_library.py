#!/usr/bin/env python3
"""Builds a stand-in for a shared library that feedbench never calls, for `make dist`.

Debian's FFmpeg libraries are linked against every codec, filter and protocol they were built
with, and are bound at load time (BIND_NOW): every library they name must be present and must
define every symbol they import, even those of code paths feedbench never takes (subtitles
with libass, speech synthesis with flite, TLS with gnutls...). With their own dependencies
these weigh some 150 MB. The stand-in has the library's soname and defines those of its
exported symbols that the bundled libraries import, with the same version and, for data, the
same size; calling any of its functions prints which part was left out of the bundle and
aborts. Weak symbols (C++ templates and inline functions that many libraries carry) are left
out, so that a stand-in never takes the place of the C++ runtime's or a bundled library's.

Usage: stub_library.py REAL_LIBRARY SONAME OUTPUT IMPORTER...
"""
import os
import re
import subprocess
import sys
import tempfile

FUNCTION_TYPES = set("Tti")
DATA_TYPES = set("DdBbRrGgSs")


def imported_names(libraries):
    """The names of the undefined dynamic symbols of these libraries."""
    out = subprocess.run(["nm", "-D", "--undefined-only", *libraries],
                         check=True, capture_output=True, text=True).stdout
    return {line.split()[-1].split("@")[0] for line in out.splitlines() if " U " in line}


def exported_symbols(library):
    """(name, version, default_version, is_function, size) for each exported symbol."""
    out = subprocess.run(
        ["nm", "-D", "-S", "--defined-only", "--with-symbol-versions", library],
        check=True, capture_output=True, text=True).stdout
    symbols = []
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 4:
            _, size, kind, name = fields
        elif len(fields) == 3:
            _, kind, name = fields
            size = "0"
        else:
            continue
        if kind == "A":  # version definitions, not symbols
            continue
        if kind not in FUNCTION_TYPES and kind not in DATA_TYPES:
            continue
        match = re.fullmatch(r"([^@]+)(@@?)(.+)", name)
        if match:
            name, at, version = match.groups()
            default = at == "@@"
        else:
            version, default = None, True
        symbols.append((name, version, default, kind in FUNCTION_TYPES, max(int(size, 16), 8)))
    return symbols


def c_string(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def stub_source(soname, symbols):
    lines = [
        "#include <stdio.h>",
        "#include <stdlib.h>",
        "static void left_out(const char *symbol) {",
        '    fprintf(stderr, "feedbench: %s of ' + soname + ' was called, but this bundle left '
        '%s out (scripts/stub_library.py); install feedbench from source to use it\\n", '
        'symbol, ' + c_string(soname) + ');',
        "    abort();",
        "}",
    ]
    for index, (name, version, default, is_function, size) in enumerate(symbols):
        label = name if default else f"feedbench_stub_{index}"
        if is_function:
            lines.append(f"void stub_{index}(void) __asm__({c_string(label)});")
            lines.append(f"void stub_{index}(void) {{ left_out({c_string(name)}); }}")
        else:
            lines.append(f"char stub_{index}[{size}] __asm__({c_string(label)}) "
                         "__attribute__((aligned(16)));")
        if not default:
            lines.append(f'__asm__(".symver {label}, {name}@{version}");')
    return "\n".join(lines) + "\n"


def version_script(symbols):
    """One node per version, holding the symbols whose default version it is."""
    nodes = {}
    for name, version, default, _, _ in symbols:
        if version is not None:
            nodes.setdefault(version, [])
            if default:
                nodes[version].append(name)
    if not nodes:
        return None
    # Unversioned symbols of a versioned library (rare) take its first version: an
    # unversioned reference binds to a symbol's default version.
    first = next(iter(nodes))
    nodes[first] += [name for name, version, *_ in symbols if version is None]
    text = []
    for version, names in nodes.items():
        body = "".join(f"    {name};\n" for name in names)
        text.append(f"{version} {{\n  global:\n{body}}};\n" if names else f"{version} {{ }};\n")
    return "".join(text)


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__.strip().splitlines()[-1])
    library, soname, output, *importers = sys.argv[1:]
    wanted = imported_names(importers)
    symbols = [symbol for symbol in exported_symbols(library) if symbol[0] in wanted]
    with tempfile.TemporaryDirectory() as work:
        source = os.path.join(work, "stub.c")
        with open(source, "w") as f:
            f.write(stub_source(soname, symbols))
        command = ["cc", "-shared", "-fPIC", "-O1", "-o", output, source,
                   f"-Wl,-soname,{soname}", "-Wl,-z,now"]
        script = version_script(symbols)
        if script is not None:
            path = os.path.join(work, "versions.map")
            with open(path, "w") as f:
                f.write(script)
            command.append(f"-Wl,--version-script={path}")
        subprocess.run(command, check=True)


if __name__ == "__main__":
    main()
