"""Shared attention test cases and checks, used by the CPU and the CUDA-simulator tests alike.

A :class:`Case` names a shape and a set of options; ``case.inputs(dtype)`` builds seeded arrays.
``check_forward`` / ``check_backward`` / ``check_weights`` run an implementation on a case and
compare it with ``tests/helpers/reference.py`` under tolerances derived as docs/DESIGN.md asks: a result may be
off the float64 reference by at most a small multiple of what the naive same-precision NumPy
computation is off by, plus a few ulps of the values' magnitude.
"""
from dataclasses import dataclass

import numpy as np

import reference

# How much worse than the naive same-precision NumPy computation a kernel may be. Tiled online
# softmax reorders sums and uses a polynomial exp on float32, so it is not bit-identical.
NAIVE_ERROR_FACTOR = 8.0
# Floor in ulps of the largest reference value, for elements where the naive error happens to be 0.
ULP_FLOOR = 64.0


@dataclass(frozen=True)
class Case:
    name: str
    B: int = 2
    H: int = 2
    Hkv: int = 2
    N: int = 5
    M: int = 5
    D: int = 4
    causal: bool = False
    # None, "some" (a few keys), "empty_row" (batch 0 all padded) or "lengths" (padded tails of
    # decreasing lengths from M, the second batch with a padded key before its tail too)
    key_padding: str = None
    mask_shape: tuple = None
    bias_shape: tuple = None
    alibi: bool = False
    window: tuple = None
    scale: float = None
    small: bool = True  # small enough for the CUDA simulator

    def inputs(self, dtype, seed=0):
        """(q, k, v, options) with options as keyword arguments for attention()."""
        rng = np.random.default_rng(seed)
        q = rng.standard_normal((self.B, self.H, self.N, self.D)).astype(dtype)
        k = rng.standard_normal((self.B, self.Hkv, self.M, self.D)).astype(dtype)
        v = rng.standard_normal((self.B, self.Hkv, self.M, self.D)).astype(dtype)
        opts = {"causal": self.causal}
        if self.key_padding == "lengths":
            lengths = self.M - np.arange(self.B) * self.M // (self.B + 1)
            kpm = np.arange(self.M)[None, :] >= lengths[:, None]
            kpm[1 % self.B, lengths[1 % self.B] // 3] = True
            opts["key_padding_mask"] = kpm
        elif self.key_padding is not None:
            kpm = rng.random((self.B, self.M)) < 0.3
            kpm[:, -1] = False  # keep at least one key per batch for "some"
            if self.key_padding == "empty_row":
                kpm[0, :] = True
            opts["key_padding_mask"] = kpm
        if self.mask_shape is not None:
            mask = rng.random(self.mask_shape) < 0.7
            opts["attn_mask"] = mask
        if self.bias_shape is not None:
            opts["bias"] = rng.standard_normal(self.bias_shape).astype(dtype)
        if self.alibi:
            opts["alibi_slopes"] = (0.5 ** np.arange(1, self.H + 1)).astype(dtype)
        if self.window is not None:
            opts["window"] = self.window
        if self.scale is not None:
            opts["scale"] = self.scale
        return q, k, v, opts

    def __str__(self):
        return self.name


CASES = [
    Case("basic"),
    Case("single_token", B=1, N=1, M=1, D=3),
    Case("cross_longer_keys", N=3, M=7, D=5),
    Case("cross_shorter_keys_causal", N=7, M=3, causal=True),
    Case("causal_square", N=6, M=6, causal=True),
    Case("gqa_2_groups", H=4, Hkv=2),
    Case("mqa_one_kv_head", H=4, Hkv=1, N=3, M=6),
    Case("key_padding", key_padding="some", N=4, M=6),
    Case("key_padding_empty_row", key_padding="empty_row"),
    Case("key_padding_lengths", B=3, key_padding="lengths", N=6, M=9),
    Case("mask_2d", mask_shape=(5, 5)),
    Case("mask_per_batch", mask_shape=(2, 1, 5, 5)),
    Case("bias_full", bias_shape=(2, 2, 5, 5)),
    Case("bias_per_head", bias_shape=(1, 2, 5, 5)),
    Case("bias_3d", bias_shape=(2, 5, 5)),
    Case("bias_key_only", bias_shape=(2, 1, 1, 5)),
    Case("bias_query_only", bias_shape=(5, 1)),
    Case("alibi", alibi=True, N=4, M=6),
    Case("window", window=(2, 1), N=6, M=6),
    Case("window_diagonal_only", window=(0, 0), N=4, M=4),
    Case("window_right_only", window=(None, 1), N=5, M=7),
    Case("custom_scale", scale=0.3),
    Case("everything", H=4, Hkv=2, N=6, M=8, causal=True, key_padding="some",
         mask_shape=(1, 4, 6, 8), bias_shape=(4, 6, 8), alibi=True, window=(3, None)),
    Case("odd_lengths_over_tiles", B=1, H=2, Hkv=1, N=67, M=131, D=8, causal=True,
         bias_shape=(1, 2, 67, 131), small=False),
    Case("long_keys_over_tiles", B=1, H=1, Hkv=1, N=300, M=1100, D=16, key_padding="some",
         small=False),
    Case("key_padding_lengths_over_tiles", B=3, H=2, Hkv=1, N=64, M=600, D=16,
         key_padding="lengths", small=False),
    Case("key_padding_lengths_causal_over_tiles", B=3, H=1, Hkv=1, N=600, M=600, D=8,
         causal=True, key_padding="lengths", small=False),
    Case("window_over_tiles", B=1, H=1, Hkv=1, N=200, M=200, D=8, window=(70, 5),
         small=False),
]
SMALL_CASES = [c for c in CASES if c.small]


def assert_close(name, got, want, naive, dtype):
    """got vs the float64 reference ``want``; ``naive`` is the same-precision NumPy result."""
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    assert got.shape == want.shape, f"{name}: shape {got.shape}, expected {want.shape}"
    assert np.isfinite(got).all(), f"{name}: contains NaN or inf"
    eps = np.finfo(dtype).eps
    magnitude = max(1.0, float(np.abs(want).max(initial=0.0)))
    naive_err = float(np.abs(np.asarray(naive, np.float64) - want).max(initial=0.0))
    tol = NAIVE_ERROR_FACTOR * naive_err + ULP_FLOOR * eps * magnitude
    err = float(np.abs(got - want).max(initial=0.0))
    assert err <= tol, f"{name}: max error {err:.3g} > tolerance {tol:.3g} (naive {naive_err:.3g})"


def assert_lse_close(got, want, naive, dtype):
    """lse is -inf exactly where a row sees no key; elsewhere compared like any value."""
    got = np.asarray(got, np.float64)
    empty = np.isneginf(want)
    assert np.array_equal(np.isneginf(got), empty), "lse: -inf rows differ from the reference"
    assert_close("lse", got[~empty], want[~empty], np.asarray(naive)[~empty], dtype)


def check_forward(attention_fn, case, dtype):
    """attention_fn(q, k, v, return_lse=True, **opts) -> (out, lse) as NumPy arrays."""
    q, k, v, opts = case.inputs(dtype)
    out, lse = attention_fn(q, k, v, return_lse=True, **opts)
    want_out, want_lse = reference.attention_forward(q, k, v, **opts)
    naive_out, naive_lse = reference.attention_forward(q, k, v, dtype=dtype, **opts)
    assert np.asarray(out).dtype == dtype, f"out has dtype {np.asarray(out).dtype}"
    assert_close("out", out, want_out, naive_out, dtype)
    assert_lse_close(lse, want_lse, naive_lse, dtype)


def backward_inputs(case, dtype):
    q, k, v, opts = case.inputs(dtype)
    dout = np.random.default_rng(1).standard_normal((case.B, case.H, case.N, case.D)).astype(dtype)
    return dout, q, k, v, opts


def check_backward(attention_fn, backward_fn, case, dtype):
    """Gradients from backward_fn(dout, q, k, v, out, lse, **opts) against the reference."""
    dout, q, k, v, opts = backward_inputs(case, dtype)
    out, lse = attention_fn(q, k, v, return_lse=True, **opts)
    wants_bias = "bias" in opts
    got = backward_fn(dout, q, k, v, out, lse, bias_requires_grad=wants_bias, **opts)
    want = reference.attention_backward(dout, q, k, v, bias_requires_grad=wants_bias, **opts)
    naive = reference.attention_backward(dout, q, k, v, bias_requires_grad=wants_bias,
                                         dtype=dtype, **opts)
    for name, g, w, n in zip(("dq", "dk", "dv"), got, want, naive):
        assert_close(name, g, w, n, dtype)
    if wants_bias:
        assert got[3].shape == np.shape(opts["bias"]), "dbias must have the bias's own shape"
        assert_close("dbias", got[3], want[3], naive[3], dtype)
    else:
        assert got[3] is None, "dbias must be None unless bias_requires_grad"


def check_weights(weights_fn, case, dtype):
    q, k, _, opts = case.inputs(dtype)
    got = weights_fn(q, k, **opts)
    want = reference.attention_weights(q, k, **opts)
    naive = reference.attention_weights(q, k, dtype=dtype, **opts)
    assert_close("weights", got, want, naive, dtype)


def finite_difference_check(attention_fn, backward_fn, case, coords_per_input=6, step=1e-6):
    """Central differences of L = sum(out * dout) in float64 against the analytic gradients.

    Checks ``coords_per_input`` random coordinates of each of q, k, v (and bias when present),
    with one named assertion per gradient.
    """
    dout, q, k, v, opts = backward_inputs(case, np.float64)
    out, lse = attention_fn(q, k, v, return_lse=True, **opts)
    wants_bias = "bias" in opts
    grads = dict(zip(("q", "k", "v", "bias"),
                     backward_fn(dout, q, k, v, out, lse, bias_requires_grad=wants_bias, **opts)))
    arrays = {"q": q, "k": k, "v": v}
    if wants_bias:
        arrays["bias"] = opts.pop("bias")
    rng = np.random.default_rng(2)

    def loss(**override):
        args = {**arrays, **override}
        extra = {"bias": args["bias"]} if wants_bias else {}
        o = attention_fn(args["q"], args["k"], args["v"], **opts, **extra)
        return float((np.asarray(o) * dout).sum())

    for name, x in arrays.items():
        for _ in range(coords_per_input):
            idx = tuple(int(rng.integers(s)) for s in x.shape)
            plus, minus = x.copy(), x.copy()
            plus[idx] += step
            minus[idx] -= step
            numeric = (loss(**{name: plus}) - loss(**{name: minus})) / (2 * step)
            analytic = float(np.asarray(grads[name])[idx])
            assert abs(numeric - analytic) <= 1e-6 + 1e-5 * abs(numeric), (
                f"d{name}{idx}: analytic {analytic:.8g} vs finite difference {numeric:.8g}")
