"""Element-wise accuracy for the device check: besides the norm-wise error,
the largest absolute error and the worst row, against float64; the inputs
that stress the kernels (adversarial cases); float64 references of a
subsample of rows where the whole float64 product would take too long.

The cases, by name (CASES), each for the roles q, k, v (attention) and a, b
(GEMM):

  normal   N(0, 1)
  rising   attention: every query's scores rise along the keys (q[..., 0] =
           2 + |N(0, 1)|, k[..., j, 0] from -30 to 30 with j), so the online
           softmax's running maximum grows at every block of keys and every
           block rescales what came before; the rest N(0, 1)
  spike    N(0, 1) with single spikes: attention, one key per head whose
           score stands out (q[..., 1] = 4, k[..., j*, 1] = 30) and one value
           row of 30s; GEMM, one element of 30 per row of A and one per
           column of B
  large    N(0, 1) * 30 (|x| ~ 30: attention's softmax nearly one-hot)

Uses PyTorch (CPU or GPU), whose generator is seeded by the caller.
"""

import math

import numpy as np
import torch

CASES = ("normal", "rising", "spike", "large")
ATTENTION_CASES = CASES
GEMM_CASES = ("normal", "spike", "large")
# Rows of a float64 reference when the whole one would be too slow: query
# rows per (batch, head) for attention, rows of A for a GEMM.
SAMPLE_ROWS = 64


def draw(case, role, shape, gen, device="cpu"):
    """A float32 tensor of `shape` for `role` ("q", "k", "v", "a", "b") in
    the adversarial `case` (the module's docstring)."""
    x = torch.randn(shape, generator=gen, device=device, dtype=torch.float32)
    if case == "normal":
        return x
    if case == "large":
        return x * 30
    if case == "rising":
        if role == "q":
            x[..., 0] = 2 + x[..., 0].abs()
        elif role == "k":
            n = shape[-2]
            x[..., 0] = torch.linspace(-30, 30, n, device=device)
        return x
    if case == "spike":
        if role == "q":
            x[..., 1] = 4
        elif role in ("k", "v"):
            # One key (k) or value row (v) per (batch, head), at random.
            rows = torch.randint(0, shape[-2], shape[:-2], generator=gen,
                                 device=device)
            hot = torch.nn.functional.one_hot(rows, shape[-2]).bool()
            if role == "k":
                x[..., 1] = torch.where(hot, torch.full_like(x[..., 1], 30),
                                        x[..., 1])
            else:
                x = torch.where(hot[..., None], torch.full_like(x, 30), x)
        elif role in ("a", "b"):
            # One element per row of A ([..., M, K]) or column of B (as
            # multiplied, [..., K, N]; given here in either layout).
            rows = torch.randint(0, shape[-1], shape[:-1], generator=gen,
                                 device=device)
            hot = torch.nn.functional.one_hot(rows, shape[-1]).bool()
            x = torch.where(hot, torch.full_like(x, 30), x)
        return x
    raise ValueError("unknown case %r" % case)


def sample_rows(n, gen, count=SAMPLE_ROWS):
    """`count` sorted row indices of `n` (all of them when n <= count): the
    first and last, the rest at random."""
    if n <= count:
        return torch.arange(n)
    pick = torch.randperm(n - 2, generator=gen)[:count - 2] + 1
    return torch.cat([torch.tensor([0, n - 1]), pick]).sort().values


def attention64(q, k, v, causal, rows=None, scale=None):
    """Attention in float64 of the query rows `rows` (all by default):
    grouped-query heads by repeating K and V; causal as tfc defines it
    (key j visible to row i when j <= i + Skv - Sq)."""
    sq, skv = q.shape[-2], k.shape[-2]
    rows = torch.arange(sq) if rows is None else rows
    g = q.shape[1] // k.shape[1]
    k = k.double().repeat_interleave(g, dim=1)
    v = v.double().repeat_interleave(g, dim=1)
    scale = scale if scale is not None else 1 / math.sqrt(q.shape[-1])
    s = q[:, :, rows.to(q.device)].double() @ k.transpose(-1, -2) * scale
    if causal:
        i = rows.to(q.device)[:, None] + (skv - sq)
        j = torch.arange(skv, device=q.device)[None, :]
        s = s.masked_fill(j > i, -math.inf)
    return torch.softmax(s, -1) @ v


def matmul64(a, b, rows=None):
    """A[..., rows, :] @ B in float64 (B as multiplied, [..., K, N])."""
    rows = torch.arange(a.shape[-2]) if rows is None else rows
    return a[..., rows.to(a.device), :].double() @ b.double()


def stats(got, ref):
    """Errors of `got` against `ref` (same shape; rows are the last axis'
    vectors), in float64: norm-wise relative error, largest absolute error
    and the largest |ref| (what it is read against), the worst row's
    relative error and its index (into the flattened rows), and whether
    every element is finite."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    n = ref.shape[-1] if ref.ndim else 1
    g2, r2 = got.reshape(-1, n), ref.reshape(-1, n)
    diff = g2 - r2
    finite = bool(np.all(np.isfinite(got)))
    diff = np.where(np.isfinite(diff), diff, np.inf)
    dn = np.linalg.norm(diff, axis=1)
    rn = np.linalg.norm(r2, axis=1)
    # A row whose reference is 0 (every key masked) must be 0 too.
    row = np.where(rn > 0, dn / np.where(rn > 0, rn, 1),
                   np.where(dn > 0, np.inf, 0.0))
    worst = int(np.argmax(row)) if row.size else 0
    return {"rel": float(np.linalg.norm(diff) / max(np.linalg.norm(r2),
                                                     1e-300)),
            "max_abs": float(np.abs(diff).max()) if diff.size else 0.0,
            "max_ref": float(np.abs(r2).max()) if r2.size else 0.0,
            "worst_row": float(row[worst]) if row.size else 0.0,
            "worst_index": worst, "finite": finite}


def rounding_floor(ref, round_to):
    """The errors of `ref` rounded by `round_to` (the output type's
    rounding), what no kernel can beat: (norm-wise, worst row, largest
    absolute error as a share of max|ref|)."""
    s = stats(round_to(ref), ref)
    return s["rel"], s["worst_row"], s["max_abs"] / max(s["max_ref"], 1e-300)


def verdict(s, bounds):
    """Whether the errors `s` (stats) are within `bounds` (norm-wise, worst
    row, largest absolute error as a share of max|ref|); and the line that
    says so."""
    bound, row_bound, abs_bound = bounds
    ok = (s["finite"] and s["rel"] <= bound and s["worst_row"] <= row_bound
          and s["max_abs"] <= abs_bound * s["max_ref"])
    return ok, ("rel.err %.2e, worst row %.2e (#%d), max abs %.2e of |ref| "
                "%.3g (bounds %.1e, row %.1e, abs %.1e x |ref|)%s" % (
                    s["rel"], s["worst_row"], s["worst_index"], s["max_abs"],
                    s["max_ref"], bound, row_bound, abs_bound,
                    "" if s["finite"] else ", NON-FINITE values"))
