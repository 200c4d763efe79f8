#!/usr/bin/env python3
"""Instructions per 64x64 key tile of the tiled attention kernels, read from their SASS.

A static measure of the inner loop, for comparing our kernels with another implementation's
(FlashAttention-2, built outside the repository) without a GPU. For each kernel:
  1. `cuobjdump -sass` listing, cut into basic blocks; an edge to a block that dominates its source
     closes a natural loop (the blocks that reach the edge without passing its target);
  2. the key loop is an innermost loop that both copies a tile from global to shared memory and
     multiplies on tensor cores (HMMA): one pass per tile; a kernel with several reports each;
  3. instructions executed per pass of the key loop = its own instructions (both sides of every
     branch inside it, once) + each inner loop's, times that loop's trip count:
       - an inner loop with global loads and no HMMA is a tile load (load_tile): it moves
         64 rows x D columns with 128 threads, D/2 elements per thread, so its trips are
         (D/2) / (global loads per pass);
       - an inner loop with HMMA is the dk/dv kernel's pass over two 32-query halves: 2 trips;
       - any other inner loop has no known trip count and is an error (--trips overrides);
  4. per 64x64 tile = per pass x warps / (64x64 tiles per pass); ours: 4 warps, one tile.
Counts are per warp (SASS is the program of one warp). HMMA counts m16n8k16 units (an
m16n8k8 is half of one). Code outside the loop (division slow paths, the exits) is not counted. It is a static model: it counts both sides of a branch, and it cannot
see stalls, bank conflicts or occupancy: only a GPU measures speed.

Usage:
  scripts/bench/sass_tiles.py [--build build-cuda] [--arch 80 90] [--json]
      our softmax and tda kernels (fwd, dq, dk/dv; head dim 64) from build-cuda/*.o
  scripts/bench/sass_tiles.py --sass LISTING --kernel REGEX --warps W --tiles N [--label L]
      any cuobjdump -sass listing (another implementation's cubin), W warps per block, N tiles of
      64x64 per pass of its key loop
cuobjdump (and the nvdisasm it runs) come from $CUDA_HOME/bin, PATH, or .venv (pip packages
nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm, which scripts/setup.sh installs).
"""
import argparse
import bisect
import glob
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Instruction classes, by opcode (the mnemonic before the first '.').
CLASSES = [
    ("mma", {"HMMA"}),
    ("lds", {"LDS", "LDSM"}),
    ("sts", {"STS"}),
    ("ldg", {"LDG", "LDGSTS", "LDGDEPBAR"}),
    ("stg", {"STG", "RED", "ATOM", "ATOMG", "REDG"}),
    ("cvt", {"F2F", "F2FP", "I2F", "F2I", "I2FP", "F2IP", "FRND"}),
    ("local", {"LDL", "STL"}),
    ("shfl", {"SHFL"}),
    ("mufu", {"MUFU"}),
    ("fp32", {"FADD", "FMUL", "FFMA", "FMNMX", "FSETP", "FSEL", "FCHK", "FSWZADD", "FSET"}),
    ("ctrl", {"BAR", "BRA", "BSSY", "BSYNC", "WARPSYNC", "DEPBAR", "VOTE", "VOTEU", "EXIT",
              "CALL", "RET", "BMOV", "YIELD", "BREAK", "JMP", "BRX", "ELECT"}),
]
COLUMNS = [c for c, _ in CLASSES] + ["int"]  # int: integer, address, moves, predicates, the rest

INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P[0-9T]+\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Z0-9_]+)*)([^;]*);")
FUNC = re.compile(r"^\s*Function : (\S+)", re.M)
TARGET = re.compile(r"0x([0-9a-f]+)")


def opclass(op):
    for name, ops in CLASSES:
        if op in ops:
            return name
    return "int"


class Insn:
    def __init__(self, addr, pred, op, mods, rest):
        self.addr, self.pred, self.op, self.mods, self.rest = addr, pred, op, mods, rest

    def target(self):
        # CALL.REL.NOINC is a jump (no return address kept): ptxas leaves loops with it
        jump = self.op == "BRA" or (self.op == "CALL" and ".NOINC" in self.mods)
        t = TARGET.search(self.rest) if jump else None
        return int(t.group(1), 16) if t else None


def parse(listing):
    """{mangled name: [Insn]} of a cuobjdump -sass listing (NOPs dropped)."""
    out = {}
    starts = [(m.start(), m.group(1)) for m in FUNC.finditer(listing)]
    for k, (pos, name) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(listing)
        out[name] = [Insn(int(m.group(1), 16), bool(m.group(2)), m.group(3), m.group(4), m.group(5))
                     for m in INSN.finditer(listing[pos:end]) if m.group(3) != "NOP"]
    return out


def mma_units(insn):
    return 0.5 if ".1688" in insn.mods else 1.0


def blocks_of(insns):
    """Basic blocks {start address: [Insn]} and successor edges {start: [start]}."""
    addrs = [i.addr for i in insns]

    def landing(t):  # a jump may land on a NOP (dropped by parse): the next kept instruction
        k = bisect.bisect_left(addrs, t)
        return addrs[k] if k < len(addrs) else None
    leaders = {insns[0].addr} if insns else set()
    for k, i in enumerate(insns):
        if i.target() is not None and landing(i.target()) is not None:
            leaders.add(landing(i.target()))
        if (i.target() is not None or i.op in ("EXIT", "RET", "BRX", "JMP")) and k + 1 < len(insns):
            leaders.add(insns[k + 1].addr)
    blocks, order = {}, []
    for i in insns:
        if i.addr in leaders:
            order.append(i.addr)
            blocks[i.addr] = []
        blocks[order[-1]].append(i)
    succ = {}
    for k, b in enumerate(order):
        last = blocks[b][-1]
        nxt = order[k + 1] if k + 1 < len(order) else None
        out = []
        if last.target() is not None and landing(last.target()) is not None:
            out.append(landing(last.target()))
        ends = last.op in ("EXIT", "RET", "BRX", "JMP") or last.target() is not None
        if (not ends or last.pred) and nxt is not None:  # falls through (a predicated jump or exit)
            out.append(nxt)
        succ[b] = [t for t in out if t in blocks]
    return blocks, succ


class Loop:
    def __init__(self, header, body):
        self.header, self.body, self.children = header, set(body), []

    @property
    def name(self):
        return f"{self.header:x}+{len(self.body)}"


def dominators(blocks, succ):
    """Immediate dominators of the blocks reachable from the entry (Cooper, Harvey, Kennedy)."""
    entry = min(blocks)
    order, seen, stack = [], {entry}, [(entry, iter(succ[entry]))]
    while stack:  # post-order, iteratively
        b, it = stack[-1]
        nxt = next((v for v in it if v not in seen), None)
        if nxt is None:
            order.append(b)
            stack.pop()
        else:
            seen.add(nxt)
            stack.append((nxt, iter(succ[nxt])))
    rpo = order[::-1]
    index = {b: k for k, b in enumerate(rpo)}
    pred = {b: [] for b in rpo}
    for u in rpo:
        for v in succ[u]:
            pred[v].append(u)
    idom = {entry: entry}

    def meet(a, b):
        while a != b:
            while index[a] > index[b]:
                a = idom[a]
            while index[b] > index[a]:
                b = idom[b]
        return a
    changed = True
    while changed:
        changed = False
        for b in rpo[1:]:
            ps = [p for p in pred[b] if p in idom]
            new = ps[0]
            for p in ps[1:]:
                new = meet(p, new)
            if idom.get(b) != new:
                idom[b], changed = new, True
    return idom, pred


def loops_of(blocks, succ):
    """Natural loops: an edge u -> h where h dominates u closes one (its body: the blocks that
    reach u without passing h); loops of one header merge, and nest by body inclusion."""
    idom, pred = dominators(blocks, succ)

    def dominates(h, u):
        while True:
            if u == h:
                return True
            if idom[u] == u:
                return False
            u = idom[u]
    bodies = {}
    for u in idom:
        for h in succ[u]:
            if dominates(h, u):
                body, stack = {h}, [u]
                while stack:
                    x = stack.pop()
                    if x not in body:
                        body.add(x)
                        stack.extend(pred[x])
                bodies.setdefault(h, set()).update(body)
    ordered = sorted((Loop(h, b) for h, b in bodies.items()), key=lambda l: len(l.body))
    roots = []
    for k, l in enumerate(ordered):
        parent = next((p for p in ordered[k + 1:] if l.body < p.body), None)
        (parent.children if parent else roots).append(l)
    return roots


def insns_in(blocks, addrs):
    return [i for a in sorted(addrs) for i in blocks[a]]


def own(blocks, loop):
    """Instructions of `loop` outside its inner loops."""
    inner = set().union(*(c.body for c in loop.children)) if loop.children else set()
    return insns_in(blocks, loop.body - inner)


def trip_count(blocks, loop, head_dim, overrides):
    if loop.name in overrides:
        return overrides[loop.name], "given"
    body = insns_in(blocks, loop.body)
    if any(i.op == "HMMA" for i in body):
        return 2, "two 32-query halves"
    loads = sum(1 for i in body if i.op == "LDG")
    if loads:
        per_thread = 64 * head_dim // 128
        if per_thread % loads:
            raise SystemExit(f"sass_tiles: loop {loop.name}: {loads} loads per pass do not divide "
                             f"the {per_thread} a thread loads per tile (--trips {loop.name}=N)")
        return per_thread // loads, f"tile load, {loads} per pass"
    raise SystemExit(f"sass_tiles: loop {loop.name} ({len(body)} instructions, no load, no HMMA): "
                     f"no known trip count (give one: --trips {loop.name}=N)")


def dynamic(blocks, loop, head_dim, overrides, notes):
    counts = {c: 0.0 for c in COLUMNS}
    for i in own(blocks, loop):
        counts[opclass(i.op)] += mma_units(i) if i.op == "HMMA" else 1
    for child in loop.children:
        trips, why = trip_count(blocks, child, head_dim, overrides)
        notes.append(f"inner loop {child.name}: {trips} trips ({why})")
        sub = dynamic(blocks, child, head_dim, overrides, notes)
        for c in COLUMNS:
            counts[c] += trips * sub[c]
    return counts


def key_loops(blocks, succ):
    """The innermost loops that both stream a tile from global into shared memory (cp.async, or
    loads and shared stores) and multiply on tensor cores: one pass per tile (FlashAttention-2's backward has an outer loop over key blocks
    around it; our dk/dv kernel an inner loop over two query halves, with no load, inside it)."""
    def streams(l):
        body = insns_in(blocks, l.body)
        ops = {i.op for i in body}
        return "HMMA" in ops and ("LDGSTS" in ops or {"LDG", "STS"} <= ops)
    found = []

    def walk(ls):
        for l in ls:
            inner = len(found)
            walk(l.children)
            if len(found) == inner and streams(l):
                found.append(l)
    walk(loops_of(blocks, succ))
    return sorted(found, key=lambda l: l.header)


def measure(insns, warps, tiles, head_dim=64, overrides=None):
    """One row per key loop: instructions per 64x64 tile by class, and notes. The loop is named
    by its header's address and its count of basic blocks."""
    blocks, succ = blocks_of(insns)
    rows = []
    for l in key_loops(blocks, succ):
        notes = []
        c = dynamic(blocks, l, head_dim, overrides or {}, notes)
        per_tile = {k: v * warps / tiles for k, v in c.items()}
        total = sum(per_tile.values())
        rows.append({"loop": l.name, "per_tile": per_tile, "total": total,
                     "per_mma": total / per_tile["mma"] if per_tile["mma"] else None,
                     "notes": notes})
    return rows


def find_cuobjdump():
    cands = []
    if os.environ.get("CUDA_HOME"):
        cands.append(os.path.join(os.environ["CUDA_HOME"], "bin", "cuobjdump"))
    if shutil.which("cuobjdump"):
        cands.append(shutil.which("cuobjdump"))
    cands += sorted(glob.glob(str(ROOT / ".venv/lib/python3*/site-packages/nvidia/cu*/bin/cuobjdump")))
    cands.append("/usr/local/cuda/bin/cuobjdump")
    for c in cands:
        if c and os.access(c, os.X_OK):
            return c
    raise SystemExit("sass_tiles: no cuobjdump (CUDA toolkit, or pip install nvidia-cuda-cuobjdump "
                     "nvidia-cuda-nvdisasm into .venv)")


def sass_of(obj, arch):
    tool = find_cuobjdump()
    # cuobjdump runs nvdisasm for SASS: look for it beside cuobjdump first (the pip packages
    # nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm share one bin folder)
    env = dict(os.environ, PATH=os.path.dirname(tool) + os.pathsep + os.environ.get("PATH", ""))
    r = subprocess.run([tool, "-sass", "-arch", f"sm_{arch}", str(obj)], capture_output=True,
                       text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"sass_tiles: cuobjdump {obj}: {r.stderr.strip()}")
    return r.stdout


# Our kernels at head dim 64 (Dqk = Dv = 64): softmax, and tda's math (threshold, two views, power 2);
# the dk/dv kernel in both backwards (attention.deterministic true: dq in its own kernel; false: dq
# added by atomics from the same kernel). tda's atomic kernel is left out: its tile loop compiles to
# branches the loop finder reads as three loops, so its row would count a third of a tile.
OURS = [
    ("softmax", "fwd", "attention_fwd.o", r"fa_forward_kernelINS0_2fa17SoftmaxExp2PolicyELb0ELi64ELi64ELb0ELi1ELi64E"),
    ("softmax", "dq", "attention_bwd.o", r"fa_dq_kernelINS0_2fa17SoftmaxExp2PolicyELb0ELi64ELi64E"),
    ("softmax", "dk/dv", "attention_bwd.o", r"fa_dkdv_kernelINS0_2fa17SoftmaxExp2PolicyELb0ELi64ELi64ELb0ELi1EE"),
    ("softmax", "dk/dv+dq atomic", "attention_bwd.o", r"fa_dkdv_kernelINS0_2fa17SoftmaxExp2PolicyELb0ELi64ELi64ELb1ELi1EE"),
    ("tda", "fwd", "attention_fwd.o", r"fa_forward_kernelINS_4attn18ThresholdPowPolicyILi2EEELb1ELi64ELi64ELb0ELi1ELi64E"),
    ("tda", "dq", "attention_bwd.o", r"fa_dq_kernelINS_4attn18ThresholdPowPolicyILi2EEELb1ELi64ELi64E"),
    ("tda", "dk/dv", "attention_bwd.o", r"fa_dkdv_kernelINS_4attn18ThresholdPowPolicyILi2EEELb1ELi64ELi64ELb0ELi1EE"),
]


def pick(funcs, pattern, where):
    names = [n for n in funcs if re.search(pattern, n)]
    if len(names) != 1:
        raise SystemExit(f"sass_tiles: {where}: {len(names)} kernels match {pattern!r}")
    return funcs[names[0]]


def table(results):
    head = "| kernel | arch | loop | " + " | ".join(COLUMNS) + " | total | per mma |"
    lines = [head, "|" + "---|" * (len(COLUMNS) + 5)]
    for r in results:
        pt = r["per_tile"]
        cells = " | ".join(f"{pt[c]:.0f}" for c in COLUMNS)
        per = f"{r['per_mma']:.2f}" if r["per_mma"] else "-"
        lines.append(f"| {r['label']} | sm_{r['arch']} | {r['loop']} | {cells} | {r['total']:.0f} | {per} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=str(ROOT / "build-cuda"))
    ap.add_argument("--arch", nargs="+", default=["80", "90"])
    ap.add_argument("--sass", help="a cuobjdump -sass listing to read instead of our objects")
    ap.add_argument("--kernel", help="regex of the kernel's mangled name (with --sass)")
    ap.add_argument("--warps", type=int, default=4)
    ap.add_argument("--tiles", type=float, default=1, help="64x64 tiles per pass of the key loop")
    ap.add_argument("--label", default="")
    ap.add_argument("--trips", action="append", default=[], help="LOOP=N, LOOP as the notes name it (header+blocks)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    overrides = {}
    for t in a.trips:
        k, _, v = t.partition("=")
        overrides[k] = int(v)
    results = []
    if a.sass:
        if not a.kernel:
            ap.error("--sass needs --kernel")
        listing = Path(a.sass).read_text()
        insns = pick(parse(listing), a.kernel, a.sass)
        arch = re.search(r"sm_(\d+)", listing[:4000])
        for r in measure(insns, a.warps, a.tiles, overrides=overrides):
            results.append(dict(r, label=a.label or a.kernel, arch=arch.group(1) if arch else "?"))
    else:
        for arch in a.arch:
            cache = {}
            for kind, part, obj, pattern in OURS:
                path = Path(a.build) / obj
                if not path.exists():
                    raise SystemExit(f"sass_tiles: {path}: missing (bash scripts/build_cuda.sh)")
                if obj not in cache:
                    cache[obj] = parse(sass_of(path, arch))
                insns = pick(cache[obj], pattern, f"{path} sm_{arch}")
                for r in measure(insns, 4, 1, overrides=overrides):
                    results.append(dict(r, label=f"{kind} {part}", arch=arch))
    if a.json:
        json.dump(results, sys.stdout, indent=1)
        print()
    else:
        print(table(results))
        for r in results:
            for n in r["notes"]:
                print(f"  {r['label']} sm_{r['arch']} {r['loop']}: {n}")


if __name__ == "__main__":
    main()
