#!/usr/bin/env python3
"""Roofline cost model of one GPT-2-162M ("d12") training step on tda's CUDA backend.

A ROOFLINE BOUND, not a measurement: every number below is max(FLOPs / peak, bytes / HBM
bandwidth) per kernel call, summed: the least time the calls could take, so an upper bound on
speed (tokens/s, MFU). It ignores launch latency, host syncs, caches, occupancy and how many
instructions a kernel spends per FLOP (scripts/bench/sass_tiles.py counts those for attention).
The one GPU run so far (H200, docs/results/gpu-h200-2026-11-26/) took 2.5x this bound.

The call sequence is read off the code: src/model/gpt2.cpp (layer loop), src/attention/
softmax.cpp and tda.cpp (glue), src/backend/cuda/cuda_ops.cu + gemm.cu (matmuls: cublasSgemm
without TF32 for --dtype fp32; for bf16 each fp32 activation operand is cast by its own kernel,
the norm outputs, attention output and MLP activations and the residual and MLP gradients are
stored in bf16, weights from one copy, cublasGemmEx fp32 out except c_fc's bf16
pre-activation), kernels/*.cu (traffic per kernel). The attention kernels read bf16 copies of
q, k, v and dO, made by one cast pass per operand and call (kernels/attention_operands.cu);
under bf16 the backward reuses the forward's (AttnArgs::saved); tda's L2 norms' backward then
reads x~ from those copies too (Bf16Matmuls::l2norm_backward_saved).
Bytes are compulsory: every tensor a call touches, read or written once (a read-modify-write
counts twice). Attention rows also give the upper bound where every streamed 64-row K/V (or
Q/dO) tile is re-read from DRAM per block, with no L2 reuse.
Usage: d12_roofline.py [--kind softmax|tda] [--skip F] [--B 16] [--T 1024] [--dtype both]
       [--markdown] [--by-class]
--by-class: per op class, the calls, bytes and H100 bound of one micro-step without (fused =
False: separate residual adds, two-kernel norm backward, as in the H200 run) and with the fusions.
"""
import argparse

TAG = "roofline bound (the least time; not measured)"
# Dense datasheet peaks (FLOP/s) and HBM bandwidth (B/s). "sgemm" is cublasSgemm under
# CUBLAS_DEFAULT_MATH: plain fp32 FMA units, no TF32 (A100 TF32 would be 156e12; unused).
GPUS = {
    "A100": dict(name="A100-SXM4-80GB", bf16=312e12, sgemm=19.5e12, fp32=19.5e12, fp64=9.7e12,
                 bw=2.039e12),
    "H100": dict(name="H100-SXM5", bf16=989e12, sgemm=67e12, fp32=67e12, fp64=34e12, bw=3.35e12),
    "H200": dict(name="H200-SXM", bf16=989e12, sgemm=67e12, fp32=67e12, fp64=34e12, bw=4.8e12),
}
C, H, D, L, V, VR = 768, 12, 64, 12, 50304, 50257  # configs/gpt2_162m/base.json
F = 4 * C
STEP_TOKENS = 524288
LM_CHUNK = 1024  # kLmHeadChunkRows (src/backend/cuda/cuda_ops.h)
TILE = 64  # attention tile (kTile in attention_tc.cuh)
# Entmax's threshold search: passes over each (query block, key tile) pair, the max pass included,
# as counted on random q, k at T 1,024 (tda bench attention --device cuda --mode count --kind
# entmax, emulated; docs/cuda.md): Halley's steps, the default exact solver.
ENTMAX_PASSES = 5.1


def n_params(kind):
    """Parameter count and tensor count (one adamw launch per tensor) as GPT2's constructor."""
    w = (5 if kind == "tda" else 3) * C
    extra = [1, 1, D] if kind == "tda" else []  # lambda, beta (learn_beta in tda.json), gamma
    per_layer = 2 * C + w * C + C * C + 2 * F * C + sum(extra)
    return 2 * V * C + L * per_layer + C, 3 + L * (6 + len(extra))


def micro_rows(a, dtype):
    """Kernel call types of one forward + backward: (name, phase, calls, flops, bytes, pipe, ub)."""
    B, T, tda = a.B, a.T, a.kind == "tda"
    N = B * T
    NC, nr, W = N * C, B * H * T, (5 if tda else 3) * C
    f4 = 4  # fp32 bytes
    bf = dtype == "bf16"
    rows = []

    def add(name, phase, calls, flops, nbytes, pipe="fp32", ub=None):
        rows.append((name, phase, calls, flops, nbytes, pipe, ub))

    def gemm(name, phase, calls, M, Nn, K, beta=0, sgemm_only=False, bf16_out=False,
             residual=False):
        # C(M,Nn) = A(M,K) B(K,Nn): inputs once, the output written (and read when beta = 1):
        # fp32, or bf16 where the bf16 path stores it (the MLP's pre-activation); a residual
        # (Ops::matmul_residual_forward: cuBLASLt's beta C, C apart from the output) read in fp32
        low = bf and not sgemm_only
        api = "GemmEx bf16" if low else "Sgemm fp32"
        out = 2 if low and bf16_out else f4
        add(f"{name} {M}x{Nn}x{K} ({api})", phase, calls, 2 * M * Nn * K,
            (M * K + K * Nn) * (2 if low else 4) + M * Nn * out * (1 + beta) +
            (M * Nn * f4 if residual else 0), "bf16" if low else "sgemm")

    def column_sum(tag, calls, rows_, width):
        # kernels/reduce.cu: groups of >= 32 rows per block (at most 256 groups), then the groups
        groups = -(-rows_ // max(32, -(-rows_ // 256)))
        if groups > 1:
            add(f"column_sum groups {tag}", "bwd", calls, rows_ * width,
                (rows_ + groups) * width * f4)
        add(f"column_sum {tag}", "bwd", calls, groups * width, (groups + 2) * width * f4)

    def rms(tag, phase_calls, rows_, width, y_bytes=f4, dx16_bytes=0):
        # forward: read x, write y (+rstd; y in bf16 where the bf16 path stores it); backward,
        # one block per 32-row chunk: reads dy, x and read-modify-writes dx (and, in the bf16
        # path, writes dx's bf16 copy, the residual gradient's GEMMs' dy), then the chunk's dw
        # partial from the same rows (cache hits, not counted); then column sums over the chunks.
        # The H200 run's code (fused = False) had the partial in a second kernel reading dy and x
        # from memory again.
        n, ch = rows_ * width, -(-rows_ // 32)
        fw, bw_ = phase_calls
        add(f"rmsnorm_forward {tag}", "fwd", fw, 4 * n, n * (f4 + y_bytes) + (rows_ + width) * f4)
        dx_bytes = (4 * n + rows_ + width) * f4 + n * dx16_bytes
        if fused:
            add(f"rmsnorm_backward (dx, dw partial) {tag}", "bwd", bw_, 10 * n,
                dx_bytes + ch * width * f4)
        else:
            add(f"rmsnorm_backward_dx {tag}", "bwd", bw_, 7 * n, dx_bytes)
            add(f"rmsnorm_dw_partial {tag}", "bwd", bw_, 3 * n, (2 * n + rows_ + ch * width) * f4)
        column_sum(f"(dw chunks of {tag})", bw_, ch, width)

    # --- trunk, forward then backward (gpt2.cpp); GELU/exp/tanh counted as ~1 FLOP each.
    # bf16 stores the activations that are only GEMM inputs (ln_1, ln_2, the attention output and
    # the MLP's pre-activation and GELU; backend/mixed_precision.h): read in 2 bytes, cast once.
    act_b = 2 if bf else f4  # bytes per stored GEMM-input element
    # fused = False: the code of the H200 run (CALIBRATION), before the residual adds went into
    # the GEMMs and the norms' backward into one kernel
    fused = getattr(a, "fused", True)
    add("embedding_forward", "fwd", 1, 0, N * 4 + 2 * NC * f4)
    if bf:
        rms("(N x C, ln_1/ln_2 bf16 out)", (2 * L, 2 * L), N, C, y_bytes=2, dx16_bytes=2)
        rms("(N x C, ln_f)", (1, 1), N, C, dx16_bytes=2)
    else:
        rms("(N x C)", (2 * L + 1, 2 * L + 1), N, C)
    gemm("gemm c_attn fwd", "fwd", L, N, W, C)
    # the output projections add the residual stream in the GEMM; the code of the H200 run
    # (CALIBRATION) ran a separate add_inplace pass after each instead
    gemm("gemm c_proj fwd", "fwd", L, N, C, C, residual=fused)
    gemm("gemm c_fc fwd", "fwd", L, N, F, C, bf16_out=True)
    gemm("gemm mlp_proj fwd", "fwd", L, N, C, F, residual=fused)
    if not fused:
        add("add_inplace (residual)", "fwd", 2 * L, NC, 3 * NC * f4)
    add("gelu_forward", "fwd", L, 10 * N * F, 2 * N * F * act_b)
    for name, ci, oc in (("mlp_proj", F, C), ("c_fc", C, F), ("c_proj", C, C), ("c_attn", C, W)):
        gemm(f"gemm {name} bwd dx", "bwd", L, N, ci, oc)
        gemm(f"gemm {name} bwd dW", "bwd", L, oc, ci, N, beta=1)  # dW += : beta = 1
    # the product dy W read, pre read, dpre written (bf16: in 2 bytes, c_fc's backward dy)
    dpre_b = N * F * (f4 + 2 * act_b) if bf else N * F * (2 * f4 + act_b)
    add("gelu_backward", "bwd", L, 20 * N * F, dpre_b)
    add("zero (dres)", "bwd", 1, 0, NC * f4)
    add("embedding_backward", "bwd", 1, NC, (3 * NC + N) * f4)
    if bf:  # one cast kernel per fp32 activation operand; weights from the bf16 master copy
        # the attention output once (store_bf16: c_proj's forward and dW read it); the residual
        # gradient (mlp_proj's and c_proj's dy) comes in bf16 from the norms' backward, the MLP's
        # dpre (c_fc's dy) from the GELU backward
        add("cast_to_bf16 (N x C act.)", "fwd", L, 0, NC * 6)
        add("cast_to_bf16 (N x W dproj)", "bwd", L, 0, N * W * 6)

    # --- LM head + loss (kernels/lm_head.cu): per 1024-row chunk; in the bf16 path x is cast
    # once, W comes from the bf16 copy and the softmax kernel writes bf16 dlogits (not fp32)
    ch, r = -(-N // LM_CHUNK), min(N, LM_CHUNK)
    if bf:
        add("cast_to_bf16 (N x C, LM head x)", "fwd", 1, 0, NC * 6)
    gemm("lm_head logits", "fwd", ch, r, V, C)
    dl = 2 if bf else f4  # bytes per written dlogit
    add("softmax_xent (chunk)", "fwd", ch, 7 * r * VR, r * V * (f4 + dl) + 2 * r * f4,
        ub=r * V * (2 * f4 + dl) + 2 * r * f4)  # online max/sum-exp, then grad: 2 reads a row
    gemm("lm_head dx", "bwd", ch, r, C, V)
    gemm("lm_head dW", "bwd", ch, V, C, r, beta=1)

    # --- attention glue (softmax.cpp / common.cpp, tda.cpp) and kernels (attention_*.cu)
    # The kernels' operands: one cast per fp32 operand and call (read 4 bytes, write 2): q, k, v
    # (tda: q1, k1, q2, k2, v) in the forward; dO and, unless the forward's copies are kept
    # (bf16), q, k, v again in the backward.
    nops = 5 if tda else 3
    add("cast attention operands to bf16 (q, k, v)", "fwd", nops * L, 0, NC * 6)
    add("cast attention operands to bf16 (dO" + (")" if bf else ", q, k, v)"), "bwd",
        (1 if bf else 1 + nops) * L, 0, NC * 6)
    b2 = 2  # bf16 bytes: the kernels read those copies
    nqk = 4 if tda else 2
    add("rope_forward", "fwd", nqk * L, 3 * NC, (2 * NC + T * D) * f4)
    add("rope_backward", "bwd", nqk * L, 3 * NC, (2 * NC + T * D) * f4)
    add("split_heads", "both", 2 * L, 0, 2 * NC * f4)  # v (fwd); dout or g (bwd)
    add("merge_heads", "both", (3 if tda else 2) * L, 0, 2 * NC * f4)  # o, [o again], dv
    nb = -(-T // TILE)
    tpb = nb * (nb + 1) // 2  # (query block, key tile) pairs per (b, h) up to the diagonal
    tiles, tile = B * H * tpb, TILE * D * b2  # one bf16 tile of an operand copy
    pt = 2 * TILE * TILE * D  # FLOPs of one 64x64xD mma product (masked entries computed too)
    if a.kind == "entmax":
        live, it = 1.0 - a.skip, a.entmax_passes  # pre-pass: the row max, then the search
        # threshold pre-pass: S = QK^T recomputed on every pass; reads q, k; writes (tau, norm)
        add(f"attn entmax threshold ({it} passes)", "fwd", L, it * tiles * pt,
            2 * NC * b2 + 2 * nr * f4, "bf16", ub=B * H * (nb + it * tpb) * tile + 2 * nr * f4)
        # fwd: S, [O += PV]; reads q, k, v, stats; writes o
        add(f"attn fwd (entmax, skip {a.skip:g})", "fwd", L, (1 + live) * tiles * pt,
            3 * NC * b2 + (NC + 2 * nr) * f4, "bf16",
            ub=B * H * (nb + 2 * tpb) * tile + (NC + 2 * nr) * f4)
        # c pre-pass: S, [e = dO V^T]; reads q, g, k, v, stats; writes D (2/row)
        add(f"attn bwd entmax c (skip {a.skip:g})", "bwd", L, (1 + live) * tiles * pt,
            4 * NC * b2 + 4 * nr * f4, "bf16", ub=B * H * (2 * nb + 2 * tpb) * tile + 4 * nr * f4)
        add(f"attn bwd dq (entmax, skip {a.skip:g})", "bwd", L, (1 + 2 * live) * tiles * pt,
            4 * NC * b2 + (NC + 4 * nr) * f4, "bf16",
            ub=B * H * (2 * nb + 2 * tpb) * tile + (NC + 4 * nr) * f4)
        add(f"attn bwd dk/dv (entmax, skip {a.skip:g})", "bwd", L, (1 + 4 * live) * tiles * pt,
            4 * NC * b2 + (2 * NC + 4 * nr) * f4, "bf16",
            ub=B * H * (2 * nb + 2 * tpb) * tile + (tiles * TILE * 3 + 2 * NC) * f4)
    elif not tda:
        # fwd: S = QK^T, O += PV (2 products/tile); reads q,k,v, writes o and the row LSE
        add("attn fwd (softmax)", "fwd", L, 2 * tiles * pt, 3 * NC * b2 + (NC + nr) * f4, "bf16",
            ub=B * H * (nb + 2 * tpb) * tile + (NC + nr) * f4)
        add("attn bwd rowdot D=g.o", "bwd", L, 2 * NC, (2 * NC + 2 * nr) * f4)
        # dq: S, e = dO V^T, dq += dS K (3); reads q, g, k, v, LSE, D (2/row); writes dq
        add("attn bwd dq (softmax)", "bwd", L, 3 * tiles * pt, 4 * NC * b2 + (NC + 3 * nr) * f4,
            "bf16",
            ub=B * H * (2 * nb + 2 * tpb) * tile + (NC + 3 * nr) * f4)
        # dk/dv: S^T, dv += P^T dO, e, dk += dS^T Q (4); writes dk, dv
        add("attn bwd dk/dv (softmax)", "bwd", L, 4 * tiles * pt,
            4 * NC * b2 + (2 * NC + 3 * nr) * f4, "bf16",
            ub=B * H * (2 * nb + 2 * tpb) * tile + (tiles * TILE * 3 + 2 * NC) * f4)
    else:
        live = 1.0 - a.skip  # a skipped tile pays only its two score products in every kernel
        add("l2norm_forward (q1 k1 q2 k2)", "fwd", 4 * L, 3 * NC, (2 * NC + nr) * f4)
        # dx in place; x~ from the kernels' bf16 copies under bf16 (l2norm_backward_saved)
        add("l2norm_backward", "bwd", 4 * L, 4 * NC, (2 * NC + nr) * f4 + NC * (2 if bf else f4))
        rms("(head, NH x D)", (L, L), nr, D)
        add("zero (dom)", "bwd", L, 0, NC * f4)
        # two passes (kernels/variant_ops.cu): chunks of >= 4096 rows, then the chunks in double
        chunks = -(-nr // max(4096, -(-nr // 1024)))
        add("head_row_sum partial (dlambda, dbeta)", "bwd", 2 * L, nr, (nr + T) * f4 + 8 * chunks)
        add("head_row_sum (dlambda, dbeta)", "bwd", 2 * L, chunks, 8 * chunks + 2 * f4)
        # lambda_c and its gate (clamp_affine, fwd); zero + axpby of the gated dlambda (bwd)
        add("clamp_affine (lambda_c, gate)", "fwd", L, 4, 3 * f4)
        add("zero + gated axpby (dlambda)", "bwd", 2 * L, 2, 3 * f4)
        # fwd: S1, S2, [O += (A1 - lambda A2) V]; reads q1 q2 k1 k2 v, tau; writes o
        add(f"attn fwd (tda, skip {a.skip:g})", "fwd", L, (2 + live) * tiles * pt,
            5 * NC * b2 + (NC + T) * f4, "bf16",
            ub=B * H * (2 * nb + 3 * tpb) * tile + (NC + T) * f4)
        # dq: S1, S2, [e, dq1, dq2]; writes dq1 dq2, drow_tau, drow_lambda (no rowdot kernel)
        add(f"attn bwd dq (tda, skip {a.skip:g})", "bwd", L, (2 + 3 * live) * tiles * pt,
            6 * NC * b2 + (2 * NC + 2 * nr + T) * f4, "bf16",
            ub=B * H * (3 * nb + 3 * tpb) * tile + (2 * NC + 2 * nr + T) * f4)
        # dk/dv: liveness S1, S2, then [S1, S2 again, dv, e, dk1, dk2]
        add(f"attn bwd dk/dv (tda, skip {a.skip:g})", "bwd", L, (2 + 6 * live) * tiles * pt,
            6 * NC * b2 + (3 * NC + T) * f4, "bf16",
            ub=B * H * (3 * nb + 3 * tpb) * tile + (tiles * TILE + 3 * NC) * f4)
    return rows


def opt_rows(kind, dtype, ranks):
    """Once per optimizer step (trainer.cpp, ZeRO-1 path of base.json); rank-local work."""
    P, nt = n_params(kind)
    sh = -(-P // ranks)  # ZeRO-1 shard (padded)
    rows = [("zero_grad", "opt", 1, 0, 4 * P, "fp32", None),
            ("sum_squares (fp64, shard)", "opt", 1, 2 * sh, 4 * sh, "fp64", None),
            ("scale grads (only if clipped)", "opt", 1, sh, 8 * sh, "fp32", None),
            ("adamw (per tensor, avg)", "opt", nt, 15 * sh / nt, 28 * sh / nt, "fp32", None)]
    if ranks > 1 and sh * ranks != P:  # padded flat copy of grads and params (cudaMemcpy D2D)
        rows.append(("flat copies (P % ranks != 0)", "opt", 1, 0, 4 * 2 * (2 * P + sh), "fp32",
                     None))
    if dtype == "bf16":  # weights_changed(): the whole master buffer, wte and lm_head included
        rows.append(("cast_to_bf16 weights", "opt", 1, 0, 6 * P, "fp32", None))
    return rows


# The op classes of `tda bench train --profile` (ProfileOps' labels, scripts/gpu/report.py) that
# each kernel call row belongs to: the class is the Ops call the kernel runs inside (operand
# casts and the fused GELU inside the matmul ops, the attention operand casts inside
# attention_forward/backward, the LM head's GEMMs inside lm_head_loss).
OP_CLASSES = ("attention", "matmul", "lm_head", "norms", "optimizer", "other")


def op_class(name, phase):
    if phase == "opt":
        return "optimizer"
    if name.startswith(("attn", "cast attention operands")):
        return "attention"
    if name.startswith(("lm_head", "softmax_xent", "cast_to_bf16 (N x C, LM head")):
        return "lm_head"
    if name.startswith(("gemm", "gelu", "cast_to_bf16")):
        return "matmul"
    if name.startswith(("rmsnorm", "l2norm", "column_sum")):
        return "norms"
    return "other"


def class_bounds(kind, dtype, gpu, B=16, T=1024, skip=0.0, fused=True):
    """Roofline bound (ms) per op class of one micro-step plus one optimizer step on one GPU."""
    a = argparse.Namespace(kind=kind, dtype=dtype, B=B, T=T, skip=skip,
                           entmax_passes=ENTMAX_PASSES,
                           fused=fused)
    g = GPUS[gpu]
    out = dict.fromkeys(OP_CLASSES, 0.0)
    for r in micro_rows(a, dtype) + opt_rows(kind, dtype, 1):
        out[op_class(r[0], r[1])] += r[2] * t_row(r, g) * 1e3
    return out


# Calibration on the one GPU run (docs/results/gpu-h200-2026-11-26: H200, bf16, B 16 x T 1024,
# commit 36927f1; one micro-step + the optimizer per step): measured / bound per op class, where
# the run measured a class. It timed the whole step (softmax 88.0 ms, tda 137.4 ms) and the
# attention calls alone (forward + backward, operand casts included: softmax 3.78 ms, tda 8.00
# ms per call of 16 heads x 16k tokens, i.e. x 12/16 x 12 layers = 34.0 / 72.0 ms per d12
# micro-step), so two classes: attention, and everything else together. Why so far off:
# attention ran at 7% (softmax) of the bf16 peak the bound assumes (one 64-row query block of 4
# warps per CUDA block, a two-kernel backward that recomputes the scores twice: docs/perf.md);
# the rest pays cuBLASLt's efficiency at these shapes, ~600 launches per micro-step and small
# memory-bound kernels well under the HBM bandwidth. A calibrated prediction is bound x factor,
# the factors taken on that run's code (fused = False), the bound of the code now;
# it assumes later kernels reach their bounds as that run's did, and is printed apart from them.
CALIBRATION = {  # (kind, GPU): measured ms per d12 micro-step (+ optimizer) of that run
    ("softmax", "H200"): {"attention": 3.78 * 12 / 16 * 12, "step": 88.0},
    ("tda", "H200"): {"attention": 8.00 * 12 / 16 * 12, "step": 137.4},
}
CALIBRATION_SOURCE = "docs/results/gpu-h200-2026-11-26 (commit 36927f1)"


def calibration_factors(kind, gpu):
    """measured / bound for attention and for the rest of the step, or None."""
    m = CALIBRATION.get((kind, gpu))
    if not m:
        return None
    b = class_bounds(kind, "bf16", gpu, fused=False)  # that run's code
    rest = sum(b.values()) - b["attention"]
    return {"attention": m["attention"] / b["attention"],
            "rest": (m["step"] - m["attention"]) / rest}


def calibrated(kind, dtype, gpu, B=16, T=1024, skip=0.0):
    """Calibrated prediction (ms) per class and in total, or None without a calibration."""
    f = calibration_factors(kind, gpu)
    if not f or dtype != "bf16":
        return None
    b = class_bounds(kind, dtype, gpu, B, T, skip)
    out = {c: b[c] * f["attention" if c == "attention" else "rest"] for c in OP_CLASSES}
    out["total"] = sum(out.values())
    return out


def t_row(row, g, upper=False):
    _, _, _, flops, nbytes, pipe, ub = row
    return max(flops / g[pipe], (ub if upper and ub else nbytes) / g["bw"])


def total(rows, g, upper=False):
    return sum(r[2] * t_row(r, g, upper) for r in rows)


def table(headers, body, md):
    if md:
        out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
        out += ["| " + " | ".join(str(c) for c in row) + " |" for row in body]
    else:
        w = [max(len(str(x)) for x in col) for col in zip(headers, *body)]
        out = ["  ".join(str(c).rjust(n) if i else str(c).ljust(n)
                         for i, (c, n) in enumerate(zip(row, w))) for row in [headers] + body]
    print("\n".join(out) + "\n")


def title(text, md):
    print(f"### {text}\n" if md else f"== {text} ==")


def by_class(a, dtypes, md):
    """One micro-step per op class: kernel calls, bytes and H100 bound, fused False / True."""
    g = GPUS["H100"]
    for dt in dtypes:
        rows = {f: micro_rows(argparse.Namespace(**{**vars(a), "fused": f}), dt)
                for f in (False, True)}
        body = []
        for c in OP_CLASSES[:-2] + ("other",):  # the optimizer runs once per step, not here
            sel = {f: [r for r in rows[f] if op_class(r[0], r[1]) == c] for f in rows}
            calls = {f: sum(r[2] for r in sel[f]) for f in sel}
            gb = {f: sum(r[2] * r[4] for r in sel[f]) / 1e9 for f in sel}
            ms = {f: total(sel[f], g) * 1e3 for f in sel}
            body.append([c, calls[False], calls[True], f"{gb[False]:.2f}", f"{gb[True]:.2f}",
                         f"{ms[False]:.2f}", f"{ms[True]:.2f}"])
        body.append(["total"] + [str(sum(int(r[i]) for r in body)) for i in (1, 2)] +
                    [f"{sum(float(r[i]) for r in body):.2f}" for i in (3, 4, 5, 6)])
        title(f"d12 micro-step by op class, {a.kind}, B={a.B}, T={a.T}, --dtype {dt}: before "
              f"(separate residual adds, two-kernel norm backward) and now; {TAG}", md)
        table(["op class", "calls before", "calls now", "GB before", "GB now", "H100 ms before",
               "H100 ms now"], body, md)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kind", choices=["softmax", "tda", "entmax"], default="softmax")
    ap.add_argument("--skip", type=float, default=0.0,
                    help="tda, entmax: fraction of skipped tiles")
    ap.add_argument("--entmax-passes", type=float, default=ENTMAX_PASSES,
                    help="entmax: threshold passes per tile pair, the max pass included")
    ap.add_argument("--B", type=int, default=16)
    ap.add_argument("--T", type=int, default=1024)
    ap.add_argument("--dtype", choices=["fp32", "bf16", "both"], default="both")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--by-class", action="store_true",
                    help="calls, bytes and bound per op class, without and with the fusions")
    a = ap.parse_args()
    if not 0.0 <= a.skip <= 1.0 or a.B < 1 or a.T < 1:
        ap.error("need 0 <= --skip <= 1, --B >= 1, --T >= 1")
    if a.kind == "softmax":
        a.skip = 0.0
    md, dtypes = a.markdown, ["fp32", "bf16"] if a.dtype == "both" else [a.dtype]
    if a.by_class:
        by_class(a, dtypes, md)
        return
    A, Hh = GPUS["A100"], GPUS["H100"]
    cfg = f"{a.kind}, B={a.B}, T={a.T}" + (f", skip={a.skip:g}" if a.kind == "tda" else "")
    for dt in dtypes:
        rows = micro_rows(a, dt)
        body = []
        for r in rows:
            name, phase, calls, flops, nbytes, pipe, ub = r
            body.append([name, phase, calls, f"{flops / 1e9:.3f}", f"{nbytes / 1e6:.2f}",
                         f"{ub / 1e6:.1f}" if ub else "", f"{flops / nbytes:.1f}", pipe,
                         f"{t_row(r, A) * 1e6:.1f}", f"{t_row(r, Hh) * 1e6:.1f}",
                         f"{calls * t_row(r, A) * 1e3:.3f}", f"{calls * t_row(r, Hh) * 1e3:.3f}"])
        title(f"d12 micro-step kernels, {cfg}, --dtype {dt}: {TAG}", md)
        table(["kernel call", "phase", "calls", "GFLOP/call", "MB/call", "MB/call, no L2 reuse",
               "FLOP/B", "peak", "A100 us/call", "H100 us/call", "A100 ms", "H100 ms"], body, md)
        print(f"{TAG}: {sum(r[2] for r in rows)} kernel calls per micro-step (cuBLAS may launch "
              f"more than one kernel per GEMM call); A100 = {A['name']}, H100 = {Hh['name']}.\n")
        body = [[f"{n} (x{ranks} GPUs)", calls, f"{flops / 1e9:.3f}", f"{nbytes / 1e6:.1f}", pipe,
                 f"{calls * t_row(r, A) * 1e3:.3f}", f"{calls * t_row(r, Hh) * 1e3:.3f}"]
                for ranks in (1, 8) for r in opt_rows(a.kind, dt, ranks)
                for n, _, calls, flops, nbytes, pipe, _ in [r]]
        title(f"optimizer step kernels (once per step, per GPU), --dtype {dt}: {TAG}", md)
        table(["kernel call", "calls", "GFLOP/call", "MB/call", "peak", "A100 ms", "H100 ms"],
              body, md)
    # Totals: micro-steps per optimizer step on 1 and on 8 GPUs, plus the optimizer work.
    P, _ = n_params(a.kind)
    per_tok = 3 * (2 * (P - V * C) + 4 * (a.T / 2) * C * L)  # GPT2::train_flops_per_token
    body = []
    for dt in dtypes:
        rows = micro_rows(a, dt)
        for key, g in GPUS.items():
            tm, tu = total(rows, g), total(rows, g, upper=True)
            t1 = STEP_TOKENS / (a.B * a.T) * tm + total(opt_rows(a.kind, dt, 1), g)
            t8 = STEP_TOKENS / (a.B * a.T * 8) * tm + total(opt_rows(a.kind, dt, 8), g)
            tok1, tok8 = STEP_TOKENS / t1, STEP_TOKENS / t8
            body.append([key, dt, f"{tm * 1e3:.2f}", f"{tu * 1e3:.2f}", f"{t1 * 1e3:.0f}",
                         f"{tok1:,.0f}", f"{t8 * 1e3:.1f}", f"{tok8:,.0f}",
                         f"{100 * per_tok * tok1 / g['bf16']:.1f}%"])
    title(f"d12 totals, {cfg}, {STEP_TOKENS} tokens/step: {TAG}", md)
    table(["GPU", "dtype", "ms/micro-step", "ms/micro (no K/V reuse)", "ms/step 1 GPU",
           "tokens/s 1 GPU", "ms/step 8 GPUs (each)", "tokens/s 8 GPUs (all)",
           "MFU bound 1 GPU (vs bf16 peak)"], body, md)
    print(f"{TAG}: 1 GPU = {STEP_TOKENS / (a.B * a.T):g} micro-steps/step, 8 GPUs = "
          f"{STEP_TOKENS / (a.B * a.T * 8):g} per GPU (ZeRO-1 optimizer on a 1/8 shard; "
          f"NCCL reduce-scatter/all-gather not modelled). MFU uses train_flops_per_token = "
          f"{per_tok / 1e6:.1f} MFLOP/token (docs/perf.md), P = {P:,}.\n")
    # Calibrated predictions, apart from the bounds: bound x (measured / bound) of the GPU run
    for key in GPUS:
        f = calibration_factors(a.kind, key)
        c = calibrated(a.kind, "bf16", key, a.B, a.T, a.skip) if "bf16" in dtypes else None
        if not f or not c:
            continue
        b = class_bounds(a.kind, "bf16", key, a.B, a.T, a.skip)
        title(f"calibrated prediction, {cfg}, bf16, {key}: this code's bound x measured/bound "
              f"of {CALIBRATION_SOURCE} (factors from that run's code; a prediction, not a "
              f"measurement)", md)
        table(["op class", "bound ms", "factor (measured / bound)", "calibrated ms"],
              [[k, f"{b[k]:.2f}", f"{f['attention' if k == 'attention' else 'rest']:.2f}",
                f"{c[k]:.2f}"] for k in OP_CLASSES] +
              [["total (one micro-step + optimizer)", f"{sum(b.values()):.2f}", "",
                f"{c['total']:.2f}"]], md)
    if a.kind == "tda":  # how tile skipping moves the attention kernels and the total
        body = []
        for s in sorted({0.0, 0.5, 0.9, a.skip}):
            b = argparse.Namespace(**{**vars(a), "skip": s})
            for dt in dtypes:
                rows = micro_rows(b, dt)
                att = [r for r in rows if r[0].startswith("attn")]
                body.append([f"{s:g}", dt] + [f"{total(x, g) * 1e3:.2f}" for g in (A, Hh)
                                              for x in (att, rows)])
        title(f"tda tile skipping, ms per micro-step: {TAG}", md)
        table(["skip", "dtype", "A100 attn kernels", "A100 total", "H100 attn kernels",
               "H100 total"], body, md)


if __name__ == "__main__":
    main()
