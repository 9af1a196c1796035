"""Shared cases and checks for the structured attention biases (CPU and CUDA simulator alike).

"Structured equals dense": a :class:`StructuredCase` adds a DistanceBias and/or a PairBias to an
``attention_cases.Case`` (which brings causal, windows, masks, ALiBi, a dense bias, GQA,
cross-attention). The reference builds the same biases densely in NumPy (``tests/helpers/reference.py``),
runs plain attention on their sum and differentiates the dense form by the chain rule; a kernel's
outputs and every gradient must match it within the tolerances of ``attention_cases``.
"""
from dataclasses import dataclass, replace

import numpy as np

import reference
from attention_cases import Case, assert_close, assert_lse_close
from gradcheck import assert_gradient, numerical_gradient
from seqattn.ops import DistanceBias, PairBias

# Lattice vectors as rows. The triclinic one is skewed enough that wrapping the fractional
# coordinates alone misses the minimum image for some pairs.
CELLS = {
    "orthorhombic": np.diag([2.6, 3.1, 2.9]),
    "triclinic": np.array([[2.8, 0.0, 0.0], [1.3, 2.6, 0.0], [-0.9, 1.1, 2.7]]),
}
R_MAX = 2.2
N_BINS = 7
N_TYPES = 3


@dataclass(frozen=True)
class StructuredCase:
    name: str
    base: Case
    distance: bool = False
    cell: str = None  # a key of CELLS
    types: bool = False
    cutoff: float = None
    smooth: bool = False
    cross_positions: bool = False  # separate key positions y (cross-attention needs them)
    pair: str = None  # "codes", "codes_per_batch", "relative", "relative_positions"
    code_dtype: type = np.int8
    small: bool = True  # small enough for the CUDA simulator

    def __str__(self):
        return self.name

    def inputs(self, dtype, seed=0):
        """(q, k, v, options) with DistanceBias/PairBias objects among the options."""
        q, k, v, opts = self.base.inputs(dtype, seed)
        rng = np.random.default_rng(seed + 10)
        B, H, N, M = self.base.B, self.base.H, self.base.N, self.base.M
        if self.distance:
            opts["distance_bias"] = self._distance_bias(rng, B, H, N, M, dtype)
        if self.pair is not None:
            opts["pair_bias"] = self._pair_bias(rng, B, H, N, M, dtype)
        return q, k, v, opts

    def _positions(self, rng, B, n):
        if self.cell is None:
            return rng.uniform(0, 2.0, (B, n, 3))
        return rng.random((B, n, 3)) @ CELLS[self.cell]

    def _distance_bias(self, rng, B, H, N, M, dtype):
        x = self._positions(rng, B, N)
        y = self._positions(rng, B, M) if self.cross_positions else None
        table_shape = (H, N_BINS)
        types = key_types = None
        if self.types:
            table_shape = (N_TYPES, N_TYPES, H, N_BINS)
            types = rng.integers(0, N_TYPES, (B, N))
            key_types = rng.integers(0, N_TYPES, (B, M)) if self.cross_positions else None
        return DistanceBias(x.astype(dtype), rng.standard_normal(table_shape).astype(dtype),
                            R_MAX, y=None if y is None else y.astype(dtype), types=types,
                            key_types=key_types, cell=CELLS.get(self.cell),
                            cutoff=self.cutoff, smooth_cutoff=self.smooth)

    def _pair_bias(self, rng, B, H, N, M, dtype):
        if self.pair.startswith("relative"):
            R = 2
            table = rng.standard_normal((H, 2 * R + 1)).astype(dtype)
            if self.pair == "relative":
                return PairBias.relative(table)
            return PairBias.relative(table, rng.integers(0, 9, (B, N)), rng.integers(0, 9, M))
        C = 5
        shape = (B, N, M) if self.pair == "codes_per_batch" else (N, M)
        codes = rng.integers(-1, C, shape).astype(self.code_dtype)  # -1: not connected
        return PairBias(rng.standard_normal((H, C)).astype(dtype), codes)


def dense_options(q, k, opts, dtype):
    """The options with the structured biases replaced by one dense (B, H, N, M) bias."""
    B, H, N = q.shape[:3]
    M = k.shape[2]
    opts = dict(opts)
    distance, pair = opts.pop("distance_bias", None), opts.pop("pair_bias", None)
    total = np.zeros((B, H, N, M), dtype)
    if "bias" in opts:
        total = total + np.asarray(opts["bias"], dtype)
    if distance is not None:
        total = total + reference.distance_bias_dense(distance, dtype)
    if pair is not None:
        total = total + reference.pair_bias_dense(pair, N, M, dtype)
    opts["bias"] = total
    return opts, distance, pair


def reference_run(dout, q, k, v, opts, dtype):
    """(out, lse, gradients by name) of the dense reference computed in ``dtype``."""
    user_bias = opts.get("bias")
    dense, distance, pair = dense_options(q, k, opts, dtype)
    out, lse = reference.attention_forward(q, k, v, dtype=dtype, **dense)
    dq, dk, dv, dbias = reference.attention_backward(dout, q, k, v, bias_requires_grad=True,
                                                     dtype=dtype, **dense)
    grads = {"dq": dq, "dk": dk, "dv": dv}
    if user_bias is not None:
        grads["dbias"] = reference.reduce_to_shape(dbias, np.shape(user_bias))
    if distance is not None:
        grads["distance.table"], grads["distance.x"], dy = reference.distance_bias_backward(
            distance, dbias, dtype)
        if dy is not None:
            grads["distance.y"] = dy
    if pair is not None:
        grads["pair.table"] = reference.pair_bias_backward(pair, dbias, dtype)
    return out, lse, grads


def named_gradients(result):
    """An AttentionGradients as {name: array}, for the gradients that are present."""
    grads = {"dq": result.dq, "dk": result.dk, "dv": result.dv}
    if result.dbias is not None:
        grads["dbias"] = result.dbias
    if result.distance_bias is not None:
        grads["distance.table"] = result.distance_bias.table
        grads["distance.x"] = result.distance_bias.x
        if result.distance_bias.y is not None:
            grads["distance.y"] = result.distance_bias.y
    if result.pair_bias is not None:
        grads["pair.table"] = result.pair_bias.table
    return grads


def backward_inputs(case, dtype):
    q, k, v, opts = case.inputs(dtype)
    B, H, N, D = q.shape
    dout = np.random.default_rng(1).standard_normal((B, H, N, D)).astype(dtype)
    return dout, q, k, v, opts


def check_structured(attention_fn, backward_fn, case, dtype):
    """Outputs, lse and every gradient against the dense reference (float64) with tolerances
    from the naive same-precision computation."""
    dout, q, k, v, opts = backward_inputs(case, dtype)
    out, lse = attention_fn(q, k, v, return_lse=True, **opts)
    want_out, want_lse, want = reference_run(dout, q, k, v, opts, np.float64)
    naive_out, naive_lse, naive = reference_run(dout, q, k, v, opts, dtype)
    assert_close("out", out, want_out, naive_out, dtype)
    assert_lse_close(lse, want_lse, naive_lse, dtype)
    result = backward_fn(dout, q, k, v, out, lse, bias_requires_grad="bias" in opts, **opts)
    got = named_gradients(result)
    assert sorted(got) == sorted(want), f"gradients {sorted(got)}, expected {sorted(want)}"
    for name in want:
        assert np.shape(got[name]) == np.shape(want[name]), f"{name} has the wrong shape"
        assert_close(name, got[name], want[name], naive[name], dtype)


def check_structured_finite_differences(attention_fn, backward_fn, case, samples=6):
    """Table and position gradients against central differences of sum(out * dout), float64."""
    dout, q, k, v, opts = backward_inputs(case, np.float64)
    out, lse = attention_fn(q, k, v, return_lse=True, **opts)
    got = named_gradients(backward_fn(dout, q, k, v, out, lse, **opts))
    rng = np.random.default_rng(3)
    targets = {}
    if "distance_bias" in opts:
        distance = opts["distance_bias"]
        targets.update({"distance.table": ("distance_bias", "table"),
                        "distance.x": ("distance_bias", "x")})
        if distance.y is not None:
            targets["distance.y"] = ("distance_bias", "y")
    if "pair_bias" in opts:
        targets["pair.table"] = ("pair_bias", "table")
    for name, (option, field) in targets.items():
        array = np.array(getattr(opts[option], field), np.float64)

        def loss():
            varied = dict(opts)
            varied[option] = replace(opts[option], **{field: array})
            return float((np.asarray(attention_fn(q, k, v, **varied)) * dout).sum())

        assert_gradient(name, got[name], numerical_gradient(loss, array, samples, rng),
                        rtol=1e-6, atol=1e-8)


BASE = Case("base", B=2, H=2, Hkv=2, N=6, M=6, D=4)
CROSS = Case("cross_gqa", B=2, H=4, Hkv=2, N=5, M=7, D=3)
MASKED = Case("masked_causal", B=2, H=2, Hkv=1, N=7, M=7, D=4, causal=True,
              key_padding="some", mask_shape=(2, 1, 7, 7), alibi=True, bias_shape=(1, 2, 7, 7),
              window=(4, None))

STRUCTURED_CASES = [
    StructuredCase("distance", BASE, distance=True),
    StructuredCase("distance_orthorhombic", BASE, distance=True, cell="orthorhombic"),
    StructuredCase("distance_triclinic_types", BASE, distance=True, cell="triclinic",
                   types=True),
    StructuredCase("distance_cutoff", BASE, distance=True, cutoff=1.3),
    StructuredCase("distance_smooth_cutoff", BASE, distance=True, cutoff=1.6, smooth=True),
    StructuredCase("distance_cross_types", CROSS, distance=True, cross_positions=True,
                   types=True, cutoff=1.8),
    StructuredCase("distance_with_masks_causal", MASKED, distance=True, cell="triclinic",
                   cutoff=1.7),
    StructuredCase("pair_codes", BASE, pair="codes"),
    StructuredCase("pair_codes_int16_per_batch", CROSS, pair="codes_per_batch",
                   code_dtype=np.int16),
    StructuredCase("pair_codes_int32_masked", MASKED, pair="codes", code_dtype=np.int32),
    StructuredCase("pair_relative", CROSS, pair="relative"),
    StructuredCase("pair_relative_positions_masked", MASKED, pair="relative_positions"),
    StructuredCase("distance_and_pair", MASKED, distance=True, cutoff=1.9, smooth=True,
                   types=True, pair="relative"),
    StructuredCase("over_tiles", Case("long", B=1, H=2, Hkv=1, N=70, M=70, D=8, causal=True,
                                      small=False),
                   distance=True, cell="orthorhombic", pair="codes", small=False),
]
FD_CASES = [c for c in STRUCTURED_CASES if c.name in (
    "distance_triclinic_types", "distance_smooth_cutoff", "distance_cross_types",
    "pair_codes_int16_per_batch", "distance_and_pair")]


def pair_at_the_cutoff(dtype, N=4):
    """Attention inputs whose distance bias (smooth cutoff 2) has key 1 exactly at the cutoff
    from query 0, and the same call with that pair hidden by a mask instead: float32's
    a * cutoff rounds past pi / 2, where the envelope's cosine turns negative. Returns (q, k, v,
    options, the options with the pair masked)."""
    rng = np.random.default_rng(7)
    x = rng.uniform(0.0, 1.0, size=(1, N, 3)).astype(dtype)
    x[0, :2] = [[0.5, 0.25, 0.75], [2.5, 0.25, 0.75]]  # exact in binary: d = 2 exactly
    q, k, v = (rng.normal(size=(1, 2, N, 4)).astype(dtype) for _ in range(3))
    bias = DistanceBias(x, rng.normal(size=(2, 5)).astype(dtype), 2.0, cutoff=2.0,
                        smooth_cutoff=True)
    hidden = np.ones((1, 1, N, N), bool)
    hidden[0, 0, 0, 1] = False
    return q, k, v, {"distance_bias": bias}, {"distance_bias": bias, "attn_mask": hidden}


def check_pair_at_the_cutoff(attention_fn, backward_fn, dtype):
    """The pair at the cutoff weighs (next to) nothing: outputs and gradients finite and equal
    to the masked call's within the dtype's tolerance."""
    q, k, v, opts, masked = pair_at_the_cutoff(dtype)
    atol = 1e-5 if dtype == np.float32 else 1e-12
    runs = []
    for options in (opts, masked):
        out, lse = attention_fn(q, k, v, return_lse=True, **options)
        grads = backward_fn(np.ones_like(out), q, k, v, out, lse, **options)
        runs.append({"out": out, "lse": lse, "dq": grads.dq, "dk": grads.dk, "dv": grads.dv,
                     "table": grads.distance_bias.table, "x": grads.distance_bias.x})
    for name, got in runs[0].items():
        assert np.isfinite(got).all(), f"{name} is not finite with a pair at the cutoff"
        np.testing.assert_allclose(got, runs[1][name], atol=atol, err_msg=name)
