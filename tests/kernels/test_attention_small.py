"""The short-sequence attention kernels (kernels/cpu/attention_small.py) against the NumPy
reference, finite differences and the tiled kernel, and the op's choice between the two."""
import pickle

import numba
import numpy as np
import pytest
from numba import njit

import seqattn
from attention_cases import (CASES, Case, backward_inputs, check_backward, check_forward,
                             finite_difference_check)
from structured_bias_cases import STRUCTURED_CASES
from structured_bias_cases import backward_inputs as structured_backward_inputs
from seqattn.kernels.cpu import attention as tiled
from seqattn.kernels.cpu.attention_bias import DistanceArgs, PairArgs, distance_args, pair_args
from seqattn.kernels.cpu import attention_small as short
from seqattn.ops.attention import AttentionGradients
from seqattn.ops.attention_inputs import prepare_attention

pytestmark = pytest.mark.slow  # minutes in all: the file runs first (tests/conftest.py)

DTYPES = [np.float32, np.float64]
# the cases without structured biases (tests/kernels/test_structured_bias_cpu.py runs those on
# this kernel and on the tiled one): all of CASES
PLAIN_CASES = CASES
NO_STRUCTURED_GRADS = tiled.StructuredGrads(None, None, None, None)


def short_attention(q, k, v, return_lse=False, **opts):
    """``seqattn.attention`` on the short-sequence kernel, whatever the lengths."""
    call = prepare_attention(q, k, v, **opts)
    B, H, N, D = q.shape
    out, lse = np.empty((B, H, N, D), q.dtype), np.empty((B, H, N), q.dtype)
    short.attention_forward(out, lse, call)
    return (out, lse) if return_lse else out


def short_backward(dout, q, k, v, out, lse, bias_requires_grad=False, **opts):
    """``seqattn.attention_backward`` on the short-sequence kernel; the bias gradient, which
    the op takes from the tiled kernel's own pass on either path, from there."""
    call = prepare_attention(q, k, v, **opts)
    dq, dk, dv = np.empty_like(q), np.empty_like(k), np.empty_like(v)
    short.attention_backward(dq, dk, dv, NO_STRUCTURED_GRADS, dout, out, lse, call)
    dbias = None
    if bias_requires_grad:
        dbias = np.empty(call.bias.shape, q.dtype)
        tiled.attention_bias_grad(dbias, dout, out, lse, call)
        dbias = dbias.reshape(call.bias_shape)
    return AttentionGradients(dq, dk, dv, dbias)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("case", PLAIN_CASES, ids=str)
def test_forward_matches_reference(case, dtype):
    check_forward(short_attention, case, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("case", PLAIN_CASES, ids=str)
def test_backward_matches_reference(case, dtype):
    check_backward(short_attention, short_backward, case, dtype)


FD_CASES = [c for c in CASES if c.name in ("basic", "cross_shorter_keys_causal", "gqa_2_groups",
                                           "mqa_one_kv_head", "key_padding", "alibi", "window",
                                           "everything", "key_padding_lengths")]


@pytest.mark.parametrize("case", FD_CASES, ids=str)
def test_backward_matches_finite_differences(case):
    finite_difference_check(short_attention, short_backward, case)


TRAINING_SHAPE = Case("training", B=6, H=4, Hkv=4, N=12, M=12, D=8, key_padding="some")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_matches_the_tiled_kernel(dtype):
    """The same numbers as the tiled kernel, within the rounding of a different order of sums
    (a float32 result compared with float32 slack, a float64 one with float64)."""
    dout, q, k, v, opts = backward_inputs(TRAINING_SHAPE, dtype)
    call = prepare_attention(q, k, v, **opts)
    outputs = {}
    for name, module in (("short", short), ("tiled", tiled)):
        out, lse = np.empty_like(q), np.empty(q.shape[:3], dtype)
        dq, dk, dv = np.empty_like(q), np.empty_like(k), np.empty_like(v)
        module.attention_forward(out, lse, call)
        module.attention_backward(dq, dk, dv, NO_STRUCTURED_GRADS, dout, out, lse, call)
        outputs[name] = dict(out=out, lse=lse, dq=dq, dk=dk, dv=dv)
    tol = 50 * np.finfo(dtype).eps
    for name in ("out", "lse", "dq", "dk", "dv"):
        np.testing.assert_allclose(outputs["short"][name], outputs["tiled"][name], rtol=tol,
                                   atol=tol, err_msg=f"{name}: short and tiled kernels differ")


def test_empty_rows_give_zeros_and_zero_gradients():
    case = Case("all_keys_padded", B=2, key_padding="empty_row")
    dout, q, k, v, opts = backward_inputs(case, np.float32)
    out, lse = short_attention(q, k, v, return_lse=True, **opts)
    assert np.all(out[0] == 0), "a row with nothing to attend to must return zeros"
    assert np.all(np.isneginf(lse[0])), "its lse must be -inf"
    assert np.all(np.isfinite(lse[1])), "batch 1 sees keys: finite lse"
    dq, dk, dv, _ = short_backward(dout, q, k, v, out, lse, **opts)
    for name, g in (("dq", dq), ("dk", dk), ("dv", dv)):
        assert np.all(g[0] == 0), f"{name} must be zero when nothing is attended"
        assert np.any(g[1] != 0), f"{name} of batch 1 must not be zero"


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("N, M", [(0, 5), (4, 0)], ids=["no_queries", "no_keys"])
def test_empty_lengths_give_zeros(N, M, dtype):
    """No query or no key: empty or zero outputs, -inf lse, zero gradients (every gradient
    buffer starts as NaN, so a task that skipped its writes would show)."""
    rng = np.random.default_rng(3)
    q = rng.standard_normal((2, 4, N, 8)).astype(dtype)
    k, v = (rng.standard_normal((2, 2, M, 8)).astype(dtype) for _ in range(2))
    call = prepare_attention(q, k, v)
    out, lse = np.full_like(q, np.nan), np.full(q.shape[:3], np.nan, dtype)
    short.attention_forward(out, lse, call)
    assert np.all(out == 0) and np.all(np.isneginf(lse)), "no key: zeros and -inf"
    dq, dk, dv = (np.full_like(a, np.nan) for a in (q, k, v))
    short.attention_backward(dq, dk, dv, NO_STRUCTURED_GRADS, np.ones_like(q), out, lse, call)
    for name, g in (("dq", dq), ("dk", dk), ("dv", dv)):
        assert np.all(g == 0), f"{name} must be zero"


def test_ragged_lengths_equal_the_truncated_sequences():
    """With a padding mask, each sequence's outputs and gradients on its own tokens are those
    of the sequence cut to its length (with no loss on the padded queries); the padded keys get
    no dk, dv, however large their values (they would dominate every row if the mask were
    ignored)."""
    rng = np.random.default_rng(5)
    B, H, N, D = 3, 2, 11, 8
    lengths = [11, 6, 1]
    q, k, v, dout = (rng.standard_normal((B, H, N, D)).astype(np.float64) for _ in range(4))
    mask = np.arange(N)[None, :] >= np.array(lengths)[:, None]
    k[mask[:, None, :, None].repeat(H, 1).repeat(D, 3)] = 1e3
    # the padded queries still see the real keys: no loss on them, so dk, dv come from the
    # real queries alone
    dout[mask[:, None, :, None].repeat(H, 1).repeat(D, 3)] = 0
    out, lse = short_attention(q, k, v, return_lse=True, key_padding_mask=mask)
    dq, dk, dv, _ = short_backward(dout, q, k, v, out, lse, key_padding_mask=mask)
    for b, n in enumerate(lengths):
        cut = (slice(b, b + 1), slice(None), slice(0, n))
        want_out, want_lse = short_attention(q[cut], k[cut], v[cut], return_lse=True)
        want = short_backward(dout[cut], q[cut], k[cut], v[cut], want_out, want_lse)
        np.testing.assert_allclose(out[cut], want_out, rtol=1e-12, atol=1e-12,
                                   err_msg=f"out of sequence {b}")
        for name, got, expected in zip(("dq", "dk", "dv"), (dq, dk, dv), want[:3]):
            np.testing.assert_allclose(got[cut], expected, rtol=1e-12, atol=1e-12,
                                       err_msg=f"{name} of sequence {b}")
        assert np.all(dk[b, :, n:] == 0) and np.all(dv[b, :, n:] == 0), (
            f"padded keys of sequence {b} must get no gradient")


def test_inputs_are_not_modified_and_results_are_reproducible():
    dout, q, k, v, opts = backward_inputs(TRAINING_SHAPE, np.float32)
    copies = [a.copy() for a in (dout, q, k, v, opts["key_padding_mask"])]
    first = short_attention(q, k, v, return_lse=True, **opts)
    first_grads = short_backward(dout, q, k, v, *first, **opts)
    second = short_attention(q, k, v, return_lse=True, **opts)
    second_grads = short_backward(dout, q, k, v, *second, **opts)
    for name, a, b in zip(("out", "lse", "dq", "dk", "dv"), (*first, *first_grads[:3]),
                          (*second, *second_grads[:3])):
        assert np.array_equal(a, b), f"{name} differs between two identical calls"
    for name, before, after in zip(("dout", "q", "k", "v", "key_padding_mask"), copies,
                                   (dout, q, k, v, opts["key_padding_mask"])):
        assert np.array_equal(before, after), f"{name} was modified"


def _op_results(case):
    dout, q, k, v, opts = backward_inputs(case, np.float32)
    out, lse = seqattn.attention(q, k, v, return_lse=True, **opts)
    grads = seqattn.attention_backward(dout, q, k, v, out, lse, **opts)
    return (out, lse, *grads[:3]), (dout, q, k, v, opts)


def _kernel_results(module, dout, q, k, v, opts):
    call = prepare_attention(q, k, v, **opts)
    out, lse = np.empty_like(q), np.empty(q.shape[:3], q.dtype)
    dq, dk, dv = np.empty_like(q), np.empty_like(k), np.empty_like(v)
    module.attention_forward(out, lse, call)
    module.attention_backward(dq, dk, dv, NO_STRUCTURED_GRADS, dout, out, lse, call)
    return out, lse, dq, dk, dv


@pytest.mark.parametrize("N, D, expected", [(768, 8, short), (512, 32, short), (769, 8, tiled),
                                            (769, 16, tiled)],
                         ids=["short_d8", "short_d32", "tiled_d8", "tiled_d16"])
def test_the_op_runs_the_short_kernel_up_to_its_limit(N, D, expected):
    """seqattn.attention and attention_backward give the bits of the short kernel while the
    longest length is at most MAX_LENGTH, whatever the head dim, of the tiled one beyond."""
    assert (N <= short.MAX_LENGTH) == (expected is short)
    case = Case("limit", B=2, H=2, Hkv=2, N=N, M=N, D=D, key_padding="some")
    got, inputs = _op_results(case)
    want = _kernel_results(expected, *inputs)
    for name, a, b in zip(("out", "lse", "dq", "dk", "dv"), got, want):
        assert np.array_equal(a, b), f"{name}: the op did not run the {expected.__name__} kernel"


def _parallel_case_inputs(structured):
    if structured:  # a distance bias (types, smooth cutoff) and relative pair codes
        case = next(c for c in STRUCTURED_CASES if c.name == "distance_and_pair")
        return structured_backward_inputs(case, np.float32)
    return backward_inputs(Case("parallel", B=3, H=4, Hkv=2, N=9, M=11, D=8, causal=True,
                                key_padding="some"), np.float32)


@pytest.mark.parametrize("structured", [False, True], ids=["plain", "structured"])
def test_the_parallel_version_gives_the_serial_bits(structured):
    """Each (batch, head) task owns its outputs (the structured biases' gradients included, the
    distance table's shared by a fixed set of tasks), so the kernels compiled with prange, the
    tasks split into chunks, give the bits of their serial copies in one chunk (which the small
    launches of the other tests run)."""
    dout, q, k, v, opts = _parallel_case_inputs(structured)
    call = prepare_attention(q, k, v, **opts)
    (mods, geometry), scale = short._mods_and_geometry(call), np.float32(call.scale)
    results = {}
    for version, chunks in (("serial", 1), ("parallel", 3)):
        out, lse = np.empty_like(q), np.empty(q.shape[:3], np.float32)
        dq, dk, dv = np.empty_like(q), np.empty_like(k), np.empty_like(v)
        parts = short.task_parts(call, sets=2)
        getattr(short._forward_tasks, version)(chunks, out, lse, q, k, v, scale, structured,
                                               mods, geometry)
        getattr(short._backward_tasks, version)(chunks, dq, dk, dv, parts, dout, out, lse, q, k,
                                                v, scale, structured, mods, geometry)
        results[version] = (out, lse, dq, dk, dv, *parts)
    assert not structured or np.any(results["serial"][5] != 0), "no table gradient was written"
    for name, a, b in zip(("out", "lse", "dq", "dk", "dv", "dtable", "dpair", "dx", "dy"),
                          results["serial"], results["parallel"]):
        assert np.array_equal(a, b), f"{name}: the parallel version differs from the serial"


def test_the_distance_table_gradient_sums_its_sets_of_tasks():
    """With the tasks' table gradients in several sets (as at larger sizes), each set holds a
    part and their sum is the gradient of one set, up to the order of the additions."""
    dout, q, k, v, opts = _parallel_case_inputs(structured=True)
    call = prepare_attention(q, k, v, **opts)
    (mods, geometry), scale = short._mods_and_geometry(call), np.float32(call.scale)
    out, lse = np.empty_like(q), np.empty(q.shape[:3], np.float32)
    short._forward_tasks.serial(1, out, lse, q, k, v, scale, True, mods, geometry)
    tables = {}
    for sets in (1, 2):
        dq, dk, dv = np.empty_like(q), np.empty_like(k), np.empty_like(v)
        parts = short.task_parts(call, sets=sets)
        short._backward_tasks.serial(1, dq, dk, dv, parts, dout, out, lse, q, k, v, scale, True,
                                     mods, geometry)
        tables[sets] = parts[0]
    assert all(part.any() for part in tables[2]), "a set of tasks wrote no table gradient"
    np.testing.assert_allclose(tables[2].sum(axis=0), tables[1][0], rtol=1e-5, atol=1e-6,
                               err_msg="the sets' sum differs from one set's gradient")


@njit
def _structured_probe(s, ds, mods, geometry, task_grads):
    """What a task of the short kernels does with the structured biases (not cached, so the
    functions it reaches are typed in this process whatever the disk cache holds)."""
    short._add_structured_biases(s, 0, 0, mods, geometry)
    short._add_structured_grads(ds, 0, 0, mods, geometry, task_grads)


@pytest.mark.parametrize("structured", [False, True], ids=["plain", "structured"])
def test_a_call_without_structured_biases_compiles_none_of_their_code(structured):
    dout, q, k, v, opts = _parallel_case_inputs(structured)
    call = prepare_attention(q, k, v, **opts)
    mods, geometry = short._mods_and_geometry(call)
    dtable, dpair, dx, dy = short.task_parts(call)
    s = np.zeros(q.shape[2:3] + k.shape[2:3], np.float32)
    _structured_probe(s, np.ones_like(s), mods, geometry,
                      (dtable[0], dpair[0], dx[0, 0, 0], dy[0, 0]))
    assert (s != 0).any() == structured and dtable.any() == structured
    typed = [numba.typeof(mods) in signature
             for signature in short._structured_biases_added.overloads]
    assert any(typed) == structured, "the structured biases' code compiled for a plain call"


@pytest.mark.parametrize("name", [None, "distance", "pair_codes", "distance_and_pair"])
def test_an_absent_structured_bias_passes_none_for_its_arrays(name):
    """The kernels' wrappers unbox no placeholder: an absent bias's arrays are None in the
    mods tuple (attention._mods, which the tiled kernels take too), and a call without a
    distance bias passes no batch geometry."""
    if name is None:
        dout, q, k, v, opts = _parallel_case_inputs(structured=False)
    else:
        case = next(c for c in STRUCTURED_CASES if c.name == name)
        dout, q, k, v, opts = structured_backward_inputs(case, np.float32)
    call = prepare_attention(q, k, v, **opts)
    mods, geometry = short._mods_and_geometry(call)
    # split in Python: the @njit _structured_biases would compile for each case's tuple
    distance = DistanceArgs(*mods[tiled.STRUCTURED_AT:tiled.PAIR_AT])
    pair = PairArgs(*mods[tiled.PAIR_AT:])
    assert tiled._mods(call)[tiled.STRUCTURED_AT:] == mods[tiled.STRUCTURED_AT:]
    for present, fields in ((call.distance.has, distance), (bool(call.pair.mode), pair)):
        arrays = [field for field in fields if isinstance(field, np.ndarray)]
        assert bool(arrays) == present, f"{type(fields).__name__}: {fields}"
    assert (geometry is None) == (not call.distance.has)
    assert name is None or (distance.has, pair.mode) != (None, None)


def test_an_absent_bias_kernel_form_is_made_once_and_its_cache_stays_small():
    """attention._mods takes an absent structured bias's kernel form from a cache, one entry per
    placeholder: the same fields as made afresh, for the shared placeholder and for copies of
    it (a call the compile helper unpickled), which do not grow the cache past its bound."""
    dout, q, k, v, opts = _parallel_case_inputs(structured=False)
    call = prepare_attention(q, k, v, **opts)
    fresh = (tiled._arrays_as_none(distance_args(call.distance, call.q.dtype))
             + tiled._arrays_as_none(pair_args(call.pair)))
    assert tiled._mods(call)[tiled.STRUCTURED_AT:] == fresh
    assert tiled._mods(call)[tiled.STRUCTURED_AT:] == fresh  # from the cache
    for _ in range(3 * tiled.ABSENT_FORMS_KEPT):
        copy = pickle.loads(pickle.dumps(call))
        assert tiled._mods(copy)[tiled.STRUCTURED_AT:] == fresh
        assert len(tiled._ABSENT_FORMS) <= tiled.ABSENT_FORMS_KEPT
    # a present bias still passes its own arrays (not a cached form)
    case = next(c for c in STRUCTURED_CASES if c.name == "distance_and_pair")
    dout, q, k, v, opts = structured_backward_inputs(case, np.float32)
    present = prepare_attention(q, k, v, **opts)
    mods = tiled._mods(present)
    assert mods[tiled.STRUCTURED_AT + DistanceArgs._fields.index("x")] is present.distance.x
    assert mods[tiled.PAIR_AT + PairArgs._fields.index("table")] is present.pair.table


@njit  # not cached, as _structured_probe
def _dense_probe(s, mods):
    bias, attn_mask, _, alibi_slopes, _, _, has_bias, has_mask, _, has_alibi = \
        mods[:tiled.STRUCTURED_AT]
    short._add_dense_modifications_if_any(s, 0, 0, 0, 0, bias, attn_mask, alibi_slopes,
                                          has_bias, has_mask, has_alibi)


@pytest.mark.parametrize("dense", [None, "bias", "attn_mask", "alibi_slopes"])
def test_a_call_without_dense_modifications_compiles_none_of_their_code(dense):
    q = np.random.default_rng(0).standard_normal((1, 2, 4, 8)).astype(np.float32)
    opts = {"bias": np.ones((1, 2, 4, 4), np.float32),
            "attn_mask": np.tril(np.ones((4, 4), bool)),
            "alibi_slopes": np.ones(2, np.float32)}
    call = prepare_attention(q, q, q, **({dense: opts[dense]} if dense else {}))
    mods, _ = short._mods_and_geometry(call)
    # None where the call has none of them (the kernels then type the no-op), else all three
    assert [m is None for m in (mods[0], mods[1], mods[3])] == [dense is None] * 3
    s = np.zeros(4, np.float32)
    _dense_probe(s, mods)
    assert (s != 0).any() == (dense is not None)


def test_a_short_call_with_dense_modifications_hands_its_backward_to_the_helper(monkeypatch):
    handed = []
    monkeypatch.setattr(seqattn.first_run, "hand_over_structured_backward", handed.append)
    q = np.random.default_rng(1).standard_normal((1, 2, 8, 8)).astype(np.float32)
    seqattn.ops.attention(q, q, q)  # the helper's fixed short-backward job has its signature
    assert handed == []
    seqattn.ops.attention(q, q, q, alibi_slopes=np.ones(2, np.float32))
    assert len(handed) == 1 and handed[0].has_alibi
