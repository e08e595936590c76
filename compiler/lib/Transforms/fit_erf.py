"""The rational approximation of erf that MathApproximation.cpp uses where
the result is rounded to a 16-bit float:

    erf(x) ~= x * P(x^2) / Q(x^2) on |x| <= 4 (erf(4) = 1 - 1.5e-8),

P of degree 6 and Q of degree 5 with Q(0) = 1, fitted to erf(x) / x in
relative error by iteratively reweighted least squares (Lawson's method)
on t = x^2 in [0, 16], in float64. Prints the fit's largest relative error
(2.0e-9) and the coefficients rounded to f32, lowest degree first, as
C++ initialisers, and the largest error of the f32 evaluation (Horner with
fused multiply-adds, as the pass builds it) in units of f32's last place
over every f32 in [0, 4.5] (6.1 ulp).
Runs about three minutes.

usage: python3 fit_erf.py   (needs numpy and scipy: bench/.venv has them)
"""

import numpy as np
from scipy.special import erf

P_DEGREE, Q_DEGREE, T_MAX = 6, 5, 16.0


def fit():
    t = np.unique(np.concatenate([np.linspace(0, T_MAX, 20001),
                                  np.linspace(0, 1, 4001) ** 2 * T_MAX]))
    x = np.sqrt(t)
    g = np.where(x > 0, erf(x) / np.where(x > 0, x, 1), 2 / np.sqrt(np.pi))
    s = t / T_MAX  # on [0, 1] for a better conditioned system
    w, q_prev = np.ones_like(s), np.ones_like(s)
    vp = np.vander(s, P_DEGREE + 1, increasing=True)
    vq = np.vander(s, Q_DEGREE + 1, increasing=True)[:, 1:]
    for _ in range(200):
        # P(s) - g Q'(s) = g, with Q = 1 + Q', weighted to relative error.
        a = np.hstack([vp, -g[:, None] * vq])
        scale = w / q_prev / g
        c, *_ = np.linalg.lstsq(a * scale[:, None], g * scale, rcond=None)
        p = c[:P_DEGREE + 1]
        q = np.concatenate([[1.0], c[P_DEGREE + 1:]])
        big_q = np.polyval(q[::-1], s)
        err = (np.polyval(p[::-1], s) / big_q - g) / g
        q_prev = big_q
        w = w * (np.abs(err) / np.abs(err).max() + 1e-3) ** 0.5
        w /= w.mean()
    print("fit: largest relative error %.2e" % np.abs(err).max())
    return (p / T_MAX ** np.arange(P_DEGREE + 1),
            q / T_MAX ** np.arange(Q_DEGREE + 1))


def evaluate_f32(x, p, q):
    """The pass's arithmetic in f32: fma rounds once."""
    f32 = np.float32

    def fma(a, b, c):
        return (a.astype(np.float64) * b + c).astype(f32)

    a = np.minimum(np.abs(x), f32(4))
    t = a * a
    big_p = np.full_like(t, p[-1])
    for c in p[-2::-1]:
        big_p = fma(big_p, t, c)
    big_q = np.full_like(t, q[-1])
    for c in q[-2::-1]:
        big_q = fma(big_q, t, c)
    return np.copysign(np.minimum((a * big_p) / big_q, f32(1)), x)


def main():
    p, q = fit()
    p, q = p.astype(np.float32), q.astype(np.float32)
    for name, c in (("P", p), ("Q", q)):
        print("%s: {%s}" % (name, ", ".join("%.9ef" % v for v in c)))
    worst = 0.0
    bits = np.arange(0, np.float32(4.5).view(np.int32), dtype=np.int64)
    for chunk in np.array_split(bits, 64):
        x = chunk.astype(np.int32).view(np.float32)
        ref = erf(x.astype(np.float64))
        ulp = np.spacing(ref.astype(np.float32)).astype(np.float64)
        worst = max(worst, (np.abs(evaluate_f32(x, p, q) - ref) / ulp).max())
    print("f32 evaluation: largest error %.1f ulp" % worst)


if __name__ == "__main__":
    main()
