#!/usr/bin/env python3
"""The emulator's launch-resource table, made from the nvcc build's report.

scripts/build_cuda.sh compiles every kernel for sm_80 and sm_90 with `-Xptxas -v` and keeps the
report in build-cuda/ptxas.log, with one `ptx: <arch> maxntid x y z <entry>` line per kernel that
declares __launch_bounds__ (from the PTX's .maxntid: ptxas -v does not print it). This script
turns that log into src/backend/cuda/emu/launch_resources.h: per kernel (named as c++filt
demangles its entry symbol, without the return type and the parameter list), per arch, the
registers per thread, the static shared memory, and the threads per block the launch bounds
allow (1024 without). The emulator's strict mode (docs/emulator.md) checks every launch against
it, because CI runs the tests before it runs nvcc.

  scripts/launch_resources.py --write [LOG]   regenerate the header
  scripts/launch_resources.py --check [LOG]   fail (exit 1) when the committed header is stale
"""
import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADER = ROOT / "src/backend/cuda/emu/launch_resources.h"
ARCHS = ("sm_80", "sm_90")
MAX_THREADS = 1024  # without __launch_bounds__: the hardware's limit per block

ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\d+)'")
USED = re.compile(r"Used (\d+) registers(?:.*?, (\d+) bytes smem)?")
MAXNTID = re.compile(r"^ptx: (sm_\d+) maxntid (\d+) (\d+) (\d+) (\S+)$")
TOOLKIT = re.compile(r"^nvcc: .*release (\d+\.\d+)")


def kernel_key(demangled):
    """The qualified name with template arguments: what the emulator's launch computes.

    c++filt writes function templates with their return type ("void ns::k<64>(float*)") and
    every function with its parameter list; both go.
    """
    name = demangled.strip()
    if name.endswith(")"):
        depth = 0
        for i in range(len(name) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(name[i], 0)
            if depth == 0:
                name = name[:i]
                break
    if name.startswith("void "):
        name = name[len("void "):]
    return name


def demangle(symbols):
    out = subprocess.run(["c++filt"], input="\n".join(symbols) + "\n", capture_output=True,
                         text=True, check=True).stdout.splitlines()
    return dict(zip(symbols, out))


def parse(log_text):
    """{mangled: {arch: [regs, smem, max_threads]}} and the toolkit version."""
    kernels, toolkit, current = {}, None, None
    for line in log_text.splitlines():
        if m := TOOLKIT.match(line):
            toolkit = m.group(1)
        elif m := ENTRY.search(line):
            current = (m.group(1), m.group(2))
            kernels.setdefault(current[0], {})[current[1]] = [None, 0, MAX_THREADS]
        elif (m := USED.search(line)) and current:
            row = kernels[current[0]][current[1]]
            row[0], row[1] = int(m.group(1)), int(m.group(2) or 0)
            current = None
        elif m := MAXNTID.match(line):
            arch, x, y, z, sym = m.groups()
            if sym in kernels and arch in kernels[sym]:
                kernels[sym][arch][2] = int(x) * int(y) * int(z)
    return kernels, toolkit


def render(log_text):
    kernels, toolkit = parse(log_text)
    if not kernels:
        sys.exit("launch_resources: no 'Compiling entry function' lines in the log")
    names = demangle(sorted(kernels))
    rows = {}
    for sym, per_arch in kernels.items():
        key = kernel_key(names[sym])
        missing = [a for a in ARCHS if a not in per_arch or per_arch[a][0] is None]
        if missing:
            sys.exit(f"launch_resources: {key}: no ptxas report for {', '.join(missing)}")
        if per_arch[ARCHS[0]][2] != per_arch[ARCHS[1]][2]:
            sys.exit(f"launch_resources: {key}: launch bounds differ between archs")
        row = (per_arch["sm_80"][0], per_arch["sm_80"][1], per_arch["sm_90"][0],
               per_arch["sm_90"][1], per_arch["sm_80"][2])
        if key in rows and rows[key] != row:
            sys.exit(f"launch_resources: two kernels demangle to {key} (overloads or the same "
                     "name in two files' anonymous namespaces): rename one")
        rows[key] = row
    lines = [
        "// Launch resources of every kernel of the nvcc build (scripts/build_cuda.sh), per arch:",
        "// registers per thread and static shared memory bytes (ptxas -v), and the threads per",
        "// block its __launch_bounds__ allow (1024 without). Generated from build-cuda/ptxas.log by",
        f"// scripts/launch_resources.py (CUDA {toolkit or 'unknown'}): do not edit; build_cuda.sh",
        "// fails when it is stale. The emulator's strict mode checks every launch against it",
        "// (backend/cuda/emu/strict.h, docs/emulator.md).",
        "#pragma once",
        "",
        "namespace tda::emu::detail {",
        "",
        "struct KernelResourceRow {",
        "  const char* name;  // c++filt's name of the entry, without return type and parameters",
        "  int regs_sm80, smem_sm80, regs_sm90, smem_sm90, max_threads;",
        "};",
        "",
        f'inline constexpr char kLaunchResourcesToolkit[] = "{toolkit or "unknown"}";',
        "",
        "// clang-format off",
        "inline constexpr KernelResourceRow kLaunchResources[] = {",
    ]
    for key in sorted(rows):
        lines.append(f'    {{"{key}", {", ".join(str(v) for v in rows[key])}}},')
    lines += ["};", "// clang-format on", "", "}  // namespace tda::emu::detail", ""]
    return "\n".join(lines), toolkit


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="regenerate the header")
    mode.add_argument("--check", action="store_true", help="fail if the header is stale")
    ap.add_argument("log", nargs="?", default=str(ROOT / "build-cuda/ptxas.log"))
    ap.add_argument("--header", default=str(HEADER), help="the table (default: %(default)s)")
    args = ap.parse_args()
    header = Path(args.header)
    text, toolkit = render(Path(args.log).read_text())
    if args.write:
        header.write_text(text)
        count = sum(1 for line in text.splitlines() if line.startswith('    {"'))
        print(f"launch_resources: wrote {header} ({count} kernels)")
        return
    committed = header.read_text() if header.exists() else ""
    if committed == text:
        print(f"launch_resources: {header} matches {args.log}")
        return
    want = f'kLaunchResourcesToolkit[] = "{toolkit}"'
    if committed and toolkit and want not in committed:
        # Another toolkit allocates registers differently; the table describes the main one.
        print(f"launch_resources: not compared: {header} was made with another "
              f"CUDA toolkit than this build's {toolkit}")
        return
    old, new = set(committed.splitlines()), set(text.splitlines())
    for line in sorted(old - new):
        print(f"  committed: {line.strip()}", file=sys.stderr)
    for line in sorted(new - old):
        print(f"  ptxas.log: {line.strip()}", file=sys.stderr)
    sys.exit(f"launch_resources: {header} is stale (kernels or their registers, shared memory or "
             f"launch bounds changed): run `python3 scripts/launch_resources.py --write {args.log}` "
             "and commit it")


if __name__ == "__main__":
    main()
