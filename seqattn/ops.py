"""seqattn's operators: one function per op, dispatching to the CPU or CUDA kernels by array type.

NumPy arrays run on the CPU kernels (``seqattn.kernels.cpu``); numba.cuda device arrays run on the
GPU kernels (``seqattn.kernels.cuda``) and the results stay on the device. Each kernel module
exposes the same launchers with the same semantics; this file validates arguments once and
allocates outputs, so the launchers only check what is specific to their device.
"""
import numpy as np

from .attention_inputs import prepare_attention, shapes_of
from .backend import CPU, backend_of, empty_like_on, kernels_for
from .kernels import loss_math
from .op_checks import (expect_last_dim, expect_positive, expect_probability, expect_shape,
                        expect_updatable, flat, prepared, rows, shape_of)


def _attention_kernels(call):
    return kernels_for(call.device, "attention")


def attention(q, k, v, *, causal=False, key_padding_mask=None, attn_mask=None, bias=None,
              alibi_slopes=None, window=None, scale=None, return_lse=False):
    """Fused scaled dot-product attention, softmax(q k^T * scale + bias) v, in O(N + M) memory.

    Shapes: q (B, H, N, D); k and v (B, Hkv, M, D) with H a multiple of Hkv (grouped-query
    attention; Hkv == H is ordinary multi-head attention, M != N is cross-attention).

    Parameters
    ----------
    causal : bool
        Query i sees keys j <= i + (M - N) (aligned bottom-right, as FlashAttention does).
    key_padding_mask : bool (B, M), optional
        True marks a padded key to ignore (as in torch.nn).
    attn_mask : bool, broadcastable to (B, H, N, M), optional
        True means "may attend" (as in torch's scaled_dot_product_attention).
    bias : float, broadcastable to (B, H, N, M), optional
        Added to the scaled scores.
    alibi_slopes : float (H,), optional
        Adds -slope[h] * |i + M - N - j| to the scores of head h.
    window : (left, right), optional
        Key j is visible only if i + M - N - left <= j <= i + M - N + right; None on a side
        means unlimited.
    scale : float, optional
        Defaults to 1 / sqrt(D).
    return_lse : bool
        Also return the per-row log-sum-exp (B, H, N), which :func:`attention_backward` needs.

    A query row that may attend to nothing returns zeros (and lse = -inf).
    Returns ``out`` (B, H, N, D), or ``(out, lse)`` with ``return_lse``.
    """
    call = prepare_attention(q, k, v, causal=causal, key_padding_mask=key_padding_mask,
                             attn_mask=attn_mask, bias=bias, alibi_slopes=alibi_slopes,
                             window=window, scale=scale)
    B, H, Hkv, N, M, D = shapes_of(call)
    out = empty_like_on(call.device, (B, H, N, D), call.q.dtype)
    lse = empty_like_on(call.device, (B, H, N), call.q.dtype)
    _attention_kernels(call).attention_forward(out, lse, call)
    return (out, lse) if return_lse else out


def _check_saved(name, x, shape, dtype):
    if tuple(int(s) for s in x.shape) != shape:
        raise ValueError(f"{name} has shape {tuple(x.shape)}; expected {shape}")
    if np.dtype(x.dtype) != dtype:
        raise TypeError(f"{name} has dtype {np.dtype(x.dtype)}; expected {dtype} like q")


def attention_backward(dout, q, k, v, out, lse, *, causal=False, key_padding_mask=None,
                       attn_mask=None, bias=None, alibi_slopes=None, window=None, scale=None,
                       bias_requires_grad=False):
    """Gradients of :func:`attention` given ``dout`` = dLoss/dout.

    ``out`` and ``lse`` are what ``attention(..., return_lse=True)`` returned for the same inputs
    and options, which must be passed again. Scores are recomputed tile by tile from ``lse``, so
    memory stays O(N + M) per batch and head.

    Returns ``(dq, dk, dv, dbias)``. ``dbias`` is None unless ``bias_requires_grad``; it then has
    the shape of ``bias`` as passed (broadcast dims summed), e.g. a learnable (1, H, N, M) bias
    gets the gradient summed over the batch.
    """
    call = prepare_attention(q, k, v, causal=causal, key_padding_mask=key_padding_mask,
                             attn_mask=attn_mask, bias=bias, alibi_slopes=alibi_slopes,
                             window=window, scale=scale)
    if bias_requires_grad and not call.has_bias:
        raise ValueError("bias_requires_grad=True but no bias was passed")
    B, H, Hkv, N, M, D = shapes_of(call)
    dtype = np.dtype(call.q.dtype)
    kernels = _attention_kernels(call)
    backend_of(q=call.q, dout=dout, out=out, lse=lse)
    for name, x in (("dout", dout), ("out", out)):
        _check_saved(name, x, (B, H, N, D), dtype)
    _check_saved("lse", lse, (B, H, N), dtype)
    if call.device == CPU:
        dout, out, lse = (np.ascontiguousarray(a) for a in (dout, out, lse))
    dq = empty_like_on(call.device, (B, H, N, D), dtype)
    dk = empty_like_on(call.device, (B, Hkv, M, D), dtype)
    dv = empty_like_on(call.device, (B, Hkv, M, D), dtype)
    kernels.attention_backward(dq, dk, dv, dout, out, lse, call)
    dbias = None
    if bias_requires_grad:
        dbias = empty_like_on(call.device, tuple(call.bias.shape), dtype)
        kernels.attention_bias_grad(dbias, dout, out, lse, call)
        dbias = dbias.reshape(call.bias_shape)
    return dq, dk, dv, dbias


def attention_weights(q, k, *, causal=False, key_padding_mask=None, attn_mask=None, bias=None,
                      alibi_slopes=None, window=None, scale=None):
    """The attention probabilities (B, H, N, M), for inspection and plots.

    Same arguments and semantics as :func:`attention`. This is the only attention function that
    uses O(N * M) memory: it materialises what the fused operator never stores.
    """
    call = prepare_attention(q, k, None, causal=causal, key_padding_mask=key_padding_mask,
                             attn_mask=attn_mask, bias=bias, alibi_slopes=alibi_slopes,
                             window=window, scale=scale)
    B, H, Hkv, N, M, D = shapes_of(call)
    weights = empty_like_on(call.device, (B, H, N, M), call.q.dtype)
    _attention_kernels(call).attention_weights(weights, call)
    return weights


# ---------------------------------------------------------------------------------------------
# Layer ops: linear, norms, activations, dropout, adds, embedding, heads, RoPE, additive scores.
# Token tensors are (B, N, E); any leading dims are flattened into token rows R.
# Backward functions that take ``*_grad`` arrays ADD the parameter gradients into them in place
# (gradients accumulate over calls, as in torch); every other output is a new array.
# ---------------------------------------------------------------------------------------------


def linear(x, weight, bias=None):
    """y (..., O) = x (..., K) @ weight (O, K)^T + bias (O,)."""
    device, a = prepared({"x": x, "weight": weight, "bias": bias})
    x, weight, bias = a["x"], a["weight"], a["bias"]
    if weight.ndim != 2:
        raise ValueError(f"weight has shape {shape_of(weight)}; expected 2 dims (O, K)")
    O, K = shape_of(weight)
    expect_last_dim("x", x, K, "in_features, weight.shape[1]")
    if bias is not None:
        expect_shape("bias", bias, (O,), "(O,)")
    out = empty_like_on(device, shape_of(x)[:-1] + (O,), x.dtype)
    kernels_for(device, "linear").linear_forward(rows(out), rows(x), weight,
                                                 weight if bias is None else bias,
                                                 bias is not None)
    return out


def linear_backward(dout, x, weight, *, weight_grad, bias_grad=None, need_input_grad=True):
    """Gradients of :func:`linear`: returns dx (None unless ``need_input_grad``).

    Adds dLoss/dweight into ``weight_grad`` (O, K) and dLoss/dbias into ``bias_grad`` (O,).
    """
    device, a = prepared({"dout": dout, "x": x, "weight": weight, "weight_grad": weight_grad,
                          "bias_grad": bias_grad})
    O, K = shape_of(a["weight"])
    expect_last_dim("x", a["x"], K, "in_features")
    expect_shape("dout", a["dout"], shape_of(a["x"])[:-1] + (O,), "(..., O)")
    expect_shape("weight_grad", a["weight_grad"], (O, K), "(O, K)")
    expect_updatable("weight_grad", weight_grad, a["weight_grad"])
    if bias_grad is not None:
        expect_shape("bias_grad", a["bias_grad"], (O,), "(O,)")
        expect_updatable("bias_grad", bias_grad, a["bias_grad"])
    dx = empty_like_on(device, shape_of(a["x"]), a["x"].dtype) if need_input_grad else None
    kernels_for(device, "linear").linear_backward(
        rows(dx) if need_input_grad else rows(a["x"]), a["weight_grad"],
        a["weight_grad"] if bias_grad is None else a["bias_grad"],
        rows(a["dout"]), rows(a["x"]), a["weight"], need_input_grad, bias_grad is not None)
    return dx


def _row_stats(device, x):
    R = int(x.size) // shape_of(x)[-1]
    return empty_like_on(device, (R,), x.dtype)


def layer_norm(x, weight, bias, eps=1e-5):
    """Layer norm over the last axis: returns (out, mean, rstd); backward needs mean and rstd.

    Shapes: x (..., E), weight and bias (E,), mean and rstd (R,) for R = x.size / E.
    """
    expect_positive("eps", eps)
    device, a = prepared({"x": x, "weight": weight, "bias": bias})
    x = a["x"]
    E = shape_of(x)[-1]
    expect_shape("weight", a["weight"], (E,), "(E,) with E = x.shape[-1]")
    expect_shape("bias", a["bias"], (E,), "(E,) with E = x.shape[-1]")
    out = empty_like_on(device, shape_of(x), x.dtype)
    mean, rstd = _row_stats(device, x), _row_stats(device, x)
    kernels_for(device, "layer_norm").layer_norm_forward(rows(out), mean, rstd, rows(x),
                                                         a["weight"], a["bias"], float(eps))
    return out, mean, rstd


def layer_norm_backward(dout, x, mean, rstd, weight, *, weight_grad, bias_grad):
    """Gradients of :func:`layer_norm`: returns dx; adds into weight_grad and bias_grad."""
    device, a = prepared({"dout": dout, "x": x, "mean": mean, "rstd": rstd, "weight": weight,
                          "weight_grad": weight_grad, "bias_grad": bias_grad})
    x = a["x"]
    E = shape_of(x)[-1]
    expect_shape("dout", a["dout"], shape_of(x), "x.shape")
    for name in ("mean", "rstd"):
        expect_shape(name, a[name], (int(x.size) // E,), "(R,)")
    for name in ("weight", "weight_grad", "bias_grad"):
        expect_shape(name, a[name], (E,), "(E,)")
    expect_updatable("weight_grad", weight_grad, a["weight_grad"])
    expect_updatable("bias_grad", bias_grad, a["bias_grad"])
    dx = empty_like_on(device, shape_of(x), x.dtype)
    kernels_for(device, "layer_norm").layer_norm_backward(
        rows(dx), a["weight_grad"], a["bias_grad"], rows(a["dout"]), rows(x), a["mean"],
        a["rstd"], a["weight"])
    return dx


def rms_norm(x, weight, eps=1e-6):
    """RMS norm over the last axis: returns (out, rstd). Shapes: x (..., E), weight (E,)."""
    expect_positive("eps", eps)
    device, a = prepared({"x": x, "weight": weight})
    x = a["x"]
    expect_shape("weight", a["weight"], (shape_of(x)[-1],), "(E,) with E = x.shape[-1]")
    out = empty_like_on(device, shape_of(x), x.dtype)
    rstd = _row_stats(device, x)
    kernels_for(device, "rms_norm").rms_norm_forward(rows(out), rstd, rows(x), a["weight"],
                                                     float(eps))
    return out, rstd


def rms_norm_backward(dout, x, rstd, weight, *, weight_grad):
    """Gradients of :func:`rms_norm`: returns dx; adds into weight_grad."""
    device, a = prepared({"dout": dout, "x": x, "rstd": rstd, "weight": weight,
                          "weight_grad": weight_grad})
    x = a["x"]
    E = shape_of(x)[-1]
    expect_shape("dout", a["dout"], shape_of(x), "x.shape")
    expect_shape("rstd", a["rstd"], (int(x.size) // E,), "(R,)")
    for name in ("weight", "weight_grad"):
        expect_shape(name, a[name], (E,), "(E,)")
    expect_updatable("weight_grad", weight_grad, a["weight_grad"])
    dx = empty_like_on(device, shape_of(x), x.dtype)
    kernels_for(device, "rms_norm").rms_norm_backward(rows(dx), a["weight_grad"],
                                                      rows(a["dout"]), rows(x), a["rstd"],
                                                      a["weight"])
    return dx


def _pointwise(name, arrays, *options):
    """Run the activation kernel ``name`` over same-shaped arrays; returns the new output(s)."""
    device, a = prepared(arrays)
    first = next(iter(a.values()))
    for arg, x in a.items():
        expect_shape(arg, x, shape_of(first), "the shape of the other inputs")
    kernels = kernels_for(device, "activations")
    outputs = 2 if name == "swiglu_backward" else 1
    results = [empty_like_on(device, shape_of(first), first.dtype) for _ in range(outputs)]
    getattr(kernels, name)(*(flat(r) for r in results), *(flat(x) for x in a.values()),
                           *options)
    return results[0] if outputs == 1 else tuple(results)


def _gelu_is_tanh(approximate):
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    return approximate == "tanh"


def gelu(x, approximate="none"):
    """GELU: x * Phi(x) (``approximate='tanh'``: the tanh formula), as torch.nn.GELU."""
    return _pointwise("gelu_forward", {"x": x}, _gelu_is_tanh(approximate))


def gelu_backward(dout, x, approximate="none"):
    return _pointwise("gelu_backward", {"dout": dout, "x": x}, _gelu_is_tanh(approximate))


def relu(x):
    return _pointwise("relu_forward", {"x": x})


def relu_backward(dout, x):
    return _pointwise("relu_backward", {"dout": dout, "x": x})


def silu(x):
    """SiLU (swish): x * sigmoid(x)."""
    return _pointwise("silu_forward", {"x": x})


def silu_backward(dout, x):
    return _pointwise("silu_backward", {"dout": dout, "x": x})


def swiglu(gate, up):
    """The SwiGLU gate silu(gate) * up, for feed-forward blocks of LLaMA style."""
    return _pointwise("swiglu_forward", {"gate": gate, "up": up})


def swiglu_backward(dout, gate, up):
    """Returns (dgate, dup)."""
    return _pointwise("swiglu_backward", {"dout": dout, "gate": gate, "up": up})


def _check_seed(seed):
    if not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**63:
        raise ValueError(f"seed must be an integer in [0, 2**63), got {seed!r}")
    return int(seed)


def dropout(x, p, seed):
    """Inverted dropout: zero each element with probability p, scale the rest by 1 / (1 - p).

    The mask is a function of (seed, element index) only, the same on CPU and GPU; pass the same
    seed to :func:`dropout_backward`, which recomputes the mask instead of storing it.
    """
    expect_probability("p", p)
    return _dropout("dropout_forward", x, p, seed)


def dropout_backward(dout, p, seed):
    expect_probability("p", p)
    return _dropout("dropout_backward", dout, p, seed)


def _dropout(name, x, p, seed):
    device, a = prepared({"x": x})
    x = a["x"]
    out = empty_like_on(device, shape_of(x), x.dtype)
    getattr(kernels_for(device, "dropout"), name)(flat(out), flat(x), float(p), _check_seed(seed))
    return out


def add(a, b):
    """a + b, where b's shape equals the trailing dims of a's (a residual, a bias (E,), or a
    positional table (N, E) added to every batch element)."""
    device, arrays = prepared({"a": a, "b": b})
    a, b = arrays["a"], arrays["b"]
    if b.ndim > a.ndim or shape_of(a)[a.ndim - b.ndim:] != shape_of(b):
        raise ValueError(f"b has shape {shape_of(b)}, which is not the trailing part of a's "
                         f"shape {shape_of(a)}")
    out = empty_like_on(device, shape_of(a), a.dtype)
    if a.size:
        kernels_for(device, "elementwise").add_forward(flat(out), flat(a), flat(b))
    return out


def sum_leading(x, shape, *, out=None):
    """Sum x over its leading dims down to ``shape`` (its trailing dims): the backward of the
    broadcast in :func:`add`. With ``out``, the sum is ADDED into ``out`` in place."""
    shape = tuple(int(s) for s in shape)
    device, a = prepared({"x": x, "out": out})
    x = a["x"]
    if len(shape) > x.ndim or shape_of(x)[x.ndim - len(shape):] != shape:
        raise ValueError(f"shape {shape} is not the trailing part of x's shape {shape_of(x)}")
    accumulate = out is not None
    if accumulate:
        expect_shape("out", a["out"], shape, "shape")
        expect_updatable("out", out, a["out"])
        result = a["out"]
    else:
        result = empty_like_on(device, shape, x.dtype)
    size = int(np.prod(shape, dtype=np.int64))
    kernels_for(device, "reductions").sum_over_rows(
        flat(result), x.reshape(int(x.size) // size if size else 0, size), accumulate)
    return result


def add_into(dst, src):
    """dst += src in place (same shape): sums gradients that reach one tensor along two paths."""
    device, a = prepared({"dst": dst, "src": src})
    expect_shape("src", a["src"], shape_of(dst), "dst.shape")
    expect_updatable("dst", dst, a["dst"])
    if dst.size:
        kernels_for(device, "elementwise").add_into(flat(dst), flat(a["src"]))
    return dst


def fill(x, value):
    """x[...] = value in place, on either device (zeroing gradients)."""
    device, a = prepared({"x": x})
    expect_updatable("x", x, a["x"])
    if x.size:
        kernels_for(device, "elementwise").fill(flat(x), float(value))
    return x


def embedding(ids, weight):
    """out (..., E) = weight (V, E)[ids (...)]: a learned vector per category."""
    device, a = prepared({"ids": ids, "weight": weight}, float_names=("weight",))
    ids, weight = a["ids"], a["weight"]
    if weight.ndim != 2:
        raise ValueError(f"weight has shape {shape_of(weight)}; expected (V, E)")
    _check_ids(device, ids, int(weight.shape[0]))
    out = empty_like_on(device, shape_of(ids) + (int(weight.shape[1]),), weight.dtype)
    if out.size:
        kernels_for(device, "embedding").embedding_forward(rows(out), flat(ids), weight)
    return out


def embedding_backward(dout, ids, *, weight_grad, padding_idx=None):
    """Adds dLoss/dweight into ``weight_grad`` (V, E); rows with id ``padding_idx`` get none."""
    device, a = prepared({"dout": dout, "ids": ids, "weight_grad": weight_grad},
                         float_names=("dout", "weight_grad"))
    V, E = shape_of(a["weight_grad"])
    expect_updatable("weight_grad", weight_grad, a["weight_grad"])
    _check_ids(device, a["ids"], V)
    expect_shape("dout", a["dout"], shape_of(a["ids"]) + (E,), "ids.shape + (E,)")
    if a["dout"].size:
        kernels_for(device, "embedding").embedding_backward(
            a["weight_grad"], rows(a["dout"]), flat(a["ids"]),
            -1 if padding_idx is None else int(padding_idx))
    return a["weight_grad"]


def _check_ids(device, ids, V):
    if not np.issubdtype(np.dtype(ids.dtype), np.integer):
        raise TypeError(f"ids has dtype {np.dtype(ids.dtype)}; expected integers")
    # Device ids are not copied back to check them; the CUDA kernel maps bad ids to zero rows.
    if device == CPU and ids.size and (ids.min() < 0 or ids.max() >= V):
        raise ValueError(f"ids must lie in [0, {V}) (the number of embeddings); "
                         f"got values in [{ids.min()}, {ids.max()}]")


def split_heads(x, num_heads, parts=1):
    """(B, N, H * D) -> (B, H, N, D).

    With ``parts`` > 1, x is (B, N, parts * H * D), e.g. q, k and v side by side from one packed
    projection, and the result is a tuple of ``parts`` arrays (B, H, N, D), one per block.
    """
    device, a = prepared({"x": x})
    x = a["x"]
    if not isinstance(parts, (int, np.integer)) or parts < 1:
        raise ValueError(f"parts must be a positive integer, got {parts!r}")
    if x.ndim != 3 or int(x.shape[2]) % (num_heads * parts):
        raise ValueError(f"x has shape {shape_of(x)}; expected (B, N, E) with E divisible by "
                         f"num_heads = {num_heads}" + (f" times parts = {parts}" if parts > 1
                                                       else ""))
    B, N, width = shape_of(x)
    E = width // parts
    out = empty_like_on(device, (parts, B, num_heads, N, E // num_heads), x.dtype)
    if x.size:
        kernel = kernels_for(device, "heads").split_heads_forward
        for p in range(parts):
            # The kernel reads block p as a strided view: no copy of the packed input.
            kernel(out[p], x[:, :, p * E:(p + 1) * E])
    return out[0] if parts == 1 else tuple(out[p] for p in range(parts))


def merge_heads(*heads):
    """(B, H, N, D) -> (B, N, H * D); the inverse of :func:`split_heads`.

    Several inputs of one shape are merged side by side into (B, N, P * H * D), the inverse of
    ``split_heads(..., parts=P)``.
    """
    if not heads:
        raise ValueError("merge_heads needs at least one (B, H, N, D) array")
    names = ["x"] if len(heads) == 1 else [f"heads[{p}]" for p in range(len(heads))]
    device, a = prepared(dict(zip(names, heads)))
    first = a[names[0]]
    if first.ndim != 4:
        raise ValueError(f"{names[0]} has shape {shape_of(first)}; expected (B, H, N, D)")
    for name in names[1:]:
        expect_shape(name, a[name], shape_of(first), "the shape of heads[0]")
    B, H, N, D = shape_of(first)
    E = H * D
    out = empty_like_on(device, (B, N, len(heads) * E), first.dtype)
    if first.size:
        kernel = kernels_for(device, "heads").split_heads_backward
        for p, name in enumerate(names):
            kernel(out[:, :, p * E:(p + 1) * E], a[name])
    return out


def rope(x, cos, sin):
    """Rotary position embedding of x (B, H, N, D) with angle tables cos, sin (N, D / 2)."""
    return _rope("rope_forward", x, cos, sin)


def rope_backward(dout, cos, sin):
    return _rope("rope_backward", dout, cos, sin)


def _rope(name, x, cos, sin):
    device, a = prepared({"x": x, "cos": cos, "sin": sin})
    x = a["x"]
    if x.ndim != 4 or int(x.shape[3]) % 2:
        raise ValueError(f"x has shape {shape_of(x)}; expected (B, H, N, D) with D even")
    N, D = int(x.shape[2]), int(x.shape[3])
    for table in ("cos", "sin"):
        expect_shape(table, a[table], (N, D // 2), "(N, D / 2)")
    out = empty_like_on(device, shape_of(x), x.dtype)
    if x.size:
        getattr(kernels_for(device, "rope"), name)(out, x, a["cos"], a["sin"])
    return out


def additive_scores(qp, kp, v):
    """Bahdanau scores (B, N, M): v . tanh(qp[b, n] + kp[b, m]) for qp (B, N, A), kp (B, M, A)."""
    device, a = prepared({"qp": qp, "kp": kp, "v": v})
    qp, kp = a["qp"], a["kp"]
    _check_additive(qp, kp, a["v"])
    B, N, A = shape_of(qp)
    scores = empty_like_on(device, (B, N, int(kp.shape[1])), qp.dtype)
    if scores.size:
        kernels_for(device, "additive_scores").additive_scores_forward(scores, qp, kp, a["v"])
    return scores


def additive_scores_backward(dscores, qp, kp, v, *, v_grad):
    """Returns (dqp, dkp); adds dLoss/dv into ``v_grad`` (A,)."""
    device, a = prepared({"dscores": dscores, "qp": qp, "kp": kp, "v": v, "v_grad": v_grad})
    qp, kp = a["qp"], a["kp"]
    _check_additive(qp, kp, a["v"])
    B, N, A = shape_of(qp)
    expect_shape("dscores", a["dscores"], (B, N, int(kp.shape[1])), "(B, N, M)")
    expect_shape("v_grad", a["v_grad"], (A,), "(A,)")
    expect_updatable("v_grad", v_grad, a["v_grad"])
    dqp = empty_like_on(device, shape_of(qp), qp.dtype)
    dkp = empty_like_on(device, shape_of(kp), kp.dtype)
    if qp.size and kp.size:
        kernels_for(device, "additive_scores").additive_scores_backward(
            dqp, dkp, a["v_grad"], a["dscores"], qp, kp, a["v"])
    return dqp, dkp


def _check_additive(qp, kp, v):
    if qp.ndim != 3 or kp.ndim != 3:
        raise ValueError(f"qp {shape_of(qp)} and kp {shape_of(kp)} must be (B, N, A), (B, M, A)")
    if int(kp.shape[0]) != int(qp.shape[0]) or int(kp.shape[2]) != int(qp.shape[2]):
        raise ValueError(f"kp has shape {shape_of(kp)}; expected (B, M, A) matching qp "
                         f"{shape_of(qp)}")
    expect_shape("v", v, (int(qp.shape[2]),), "(A,)")


# ---------------------------------------------------------------------------------------------
# Training ops: losses, optimizer updates, pooling, key/value caches.
# A loss op returns (sum of weighted element losses, sum of weights) as host floats, so its
# caller can form a weighted mean; its backward takes ``scale`` = dLoss / (that first sum).
# Optimizer ops update their arrays in place; ``grad_scale`` is the clipping factor.
# ---------------------------------------------------------------------------------------------

POINTWISE_LOSSES = {"mse": loss_math.MSE, "mae": loss_math.MAE, "huber": loss_math.HUBER,
                    "bce_with_logits": loss_math.BCE_WITH_LOGITS}


def _loss_sums(device, terms):
    """(sum of terms[:, 0], sum of terms[:, 1]) as host floats."""
    sums = sum_leading(terms, (2,))
    if device != CPU:
        sums = sums.copy_to_host()
    return float(sums[0]), float(sums[1])


def _pointwise_loss_args(pred, target, kind, weight):
    if kind not in POINTWISE_LOSSES:
        raise ValueError(f"kind must be one of {sorted(POINTWISE_LOSSES)}, got {kind!r}")
    device, a = prepared({"pred": pred, "target": target, "weight": weight})
    expect_shape("target", a["target"], shape_of(a["pred"]), "pred.shape")
    if weight is not None:
        expect_shape("weight", a["weight"], shape_of(a["pred"]), "pred.shape")
        weight = flat(a["weight"])
    else:
        weight = empty_like_on(device, (1,), a["pred"].dtype)
    return device, flat(a["pred"]), flat(a["target"]), weight


def pointwise_loss(pred, target, kind, *, weight=None, delta=1.0, skip_nan=False):
    """Elementwise loss ``kind`` ('mse', 'mae', 'huber', 'bce_with_logits' on logits ``pred``)
    of pred against target (same shapes), times ``weight`` (same shape) if given.

    With ``skip_nan``, elements whose target is NaN count with weight 0. Returns (sum of weighted
    losses, sum of weights) as floats.
    """
    expect_positive("delta", delta)
    device, pred, target, weight_flat = _pointwise_loss_args(pred, target, kind, weight)
    terms = empty_like_on(device, (int(pred.size), 2), pred.dtype)
    if pred.size:
        kernels_for(device, "losses").pointwise_loss_forward(
            terms, pred, target, weight_flat, weight is not None, POINTWISE_LOSSES[kind],
            float(delta), bool(skip_nan))
    return _loss_sums(device, terms)


def pointwise_loss_backward(pred, target, kind, *, scale, weight=None, delta=1.0,
                            skip_nan=False):
    """dpred = scale * d(sum of weighted losses)/dpred, shaped like pred."""
    device, pred_flat, target, weight_flat = _pointwise_loss_args(pred, target, kind, weight)
    dpred = empty_like_on(device, shape_of(pred), pred_flat.dtype)
    if pred_flat.size:
        kernels_for(device, "losses").pointwise_loss_backward(
            flat(dpred), pred_flat, target, weight_flat, weight is not None,
            POINTWISE_LOSSES[kind], float(delta), bool(skip_nan), float(scale))
    return dpred


def _cross_entropy_args(logits, targets, class_weight):
    device, a = prepared({"logits": logits, "targets": targets, "class_weight": class_weight},
                         float_names=("logits", "class_weight"))
    logits, targets = a["logits"], a["targets"]
    if logits.ndim < 2:
        raise ValueError(f"logits has shape {shape_of(logits)}; expected (..., C) classes last")
    C = shape_of(logits)[-1]
    expect_shape("targets", targets, shape_of(logits)[:-1], "logits.shape[:-1]")
    if not np.issubdtype(np.dtype(targets.dtype), np.integer):
        raise TypeError(f"targets has dtype {np.dtype(targets.dtype)}; expected integer class "
                        "ids (use a regression or BCE loss for float targets)")
    if class_weight is None:
        class_weight = empty_like_on(device, (C,), logits.dtype)
        fill(class_weight, 1.0)
    else:
        expect_shape("class_weight", a["class_weight"], (C,), "(C,)")
        class_weight = a["class_weight"]
    return device, rows(logits), flat(targets), class_weight


def cross_entropy(logits, targets, *, class_weight=None, label_smoothing=0.0, ignore_index=-100):
    """Softmax cross-entropy of logits (..., C) against integer targets (...), as
    torch.nn.functional.cross_entropy: class weights, label smoothing, ``ignore_index``.

    Returns (sum of weighted losses, sum of target class weights, lse (R,)); ``lse`` is what
    :func:`cross_entropy_backward` needs.
    """
    expect_probability("label_smoothing", label_smoothing)
    device, logits, targets, class_weight = _cross_entropy_args(logits, targets, class_weight)
    R, C = shape_of(logits)
    if device == CPU and R:
        outside = (targets != ignore_index) & ((targets < 0) | (targets >= C))
        if outside.any():
            raise ValueError(f"targets must lie in [0, {C}) (the number of classes) or equal "
                             f"ignore_index = {ignore_index}; got {targets[outside][0]}")
    terms = empty_like_on(device, (R, 2), logits.dtype)
    lse = empty_like_on(device, (R,), logits.dtype)
    if R:
        kernels_for(device, "losses").cross_entropy_forward(
            terms, lse, logits, targets, class_weight, float(label_smoothing), int(ignore_index))
    total, weight_sum = _loss_sums(device, terms)
    return total, weight_sum, lse


def cross_entropy_backward(logits, lse, targets, *, scale, class_weight=None,
                           label_smoothing=0.0, ignore_index=-100):
    """dlogits = scale * d(sum of weighted losses)/dlogits, shaped like logits."""
    device, logits_rows, targets, class_weight = _cross_entropy_args(logits, targets,
                                                                     class_weight)
    expect_shape("lse", lse, (shape_of(logits_rows)[0],), "(R,)")
    dlogits = empty_like_on(device, shape_of(logits), logits_rows.dtype)
    if logits_rows.size:
        kernels_for(device, "losses").cross_entropy_backward(
            rows(dlogits), logits_rows, lse, targets, class_weight, float(label_smoothing),
            int(ignore_index), float(scale))
    return dlogits


def _updatable_flat(device, name, x, like):
    if device != backend_of(**{name: x, "param": like}) or shape_of(x) != shape_of(like):
        raise ValueError(f"{name} has shape {shape_of(x)}; expected the parameter's "
                         f"{shape_of(like)} on its device")
    if device == CPU and not x.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous: it is updated in place")
    return flat(x)


def sgd_step(param, grad, velocity, *, lr, momentum=0.0, weight_decay=0.0, nesterov=False,
             grad_scale=1.0):
    """In place: one SGD step of ``param`` (momentum buffer ``velocity``), as torch.optim.SGD."""
    device = backend_of(param=param, grad=grad, velocity=velocity)
    arrays = [_updatable_flat(device, n, x, param)
              for n, x in (("param", param), ("velocity", velocity), ("grad", grad))]
    if param.size:
        kernels_for(device, "optimizers").sgd_update(*arrays, float(lr), float(momentum),
                                                     float(weight_decay), bool(nesterov),
                                                     float(grad_scale))


def adam_step(param, grad, exp_avg, exp_avg_sq, *, step, lr, betas=(0.9, 0.999), eps=1e-8,
              weight_decay=0.0, decoupled_weight_decay=False, grad_scale=1.0):
    """In place: Adam step number ``step`` (1, 2, ...) of ``param``, as torch.optim.Adam, or
    AdamW with ``decoupled_weight_decay``."""
    device = backend_of(param=param, grad=grad, exp_avg=exp_avg, exp_avg_sq=exp_avg_sq)
    arrays = [_updatable_flat(device, n, x, param)
              for n, x in (("param", param), ("exp_avg", exp_avg), ("exp_avg_sq", exp_avg_sq),
                           ("grad", grad))]
    beta1, beta2 = (float(b) for b in betas)
    if param.size:
        kernels_for(device, "optimizers").adam_update(
            *arrays, float(lr), beta1, beta2, float(eps), float(weight_decay),
            bool(decoupled_weight_decay), 1.0 - beta1 ** step, 1.0 - beta2 ** step,
            float(grad_scale))


def sum_of_squares(arrays):
    """Sum of squares of all elements of ``arrays`` (one device), in float64, as a host float:
    the squared global norm that gradient clipping uses."""
    arrays = list(arrays)
    device = backend_of(**{f"arrays[{i}]": x for i, x in enumerate(arrays)})
    total = empty_like_on(device, (1,), np.float64)
    fill(total, 0.0)
    kernels = kernels_for(device, "optimizers")
    for x in arrays:
        if x.size:
            kernels.add_sum_of_squares(total, flat(x))
    return float(total[0] if device == CPU else total.copy_to_host()[0])


def _tokens_and_padding(x, key_padding_mask):
    device, a = prepared({"x": x, "key_padding_mask": key_padding_mask},
                         float_names=("x",))
    x = a["x"]
    if x.ndim != 3:
        raise ValueError(f"x has shape {shape_of(x)}; expected tokens (B, N, E)")
    B, N, _ = shape_of(x)
    padding = a["key_padding_mask"]
    if padding is None:
        padding = np.zeros((B, N), np.bool_)
        if device != CPU:
            from numba import cuda

            padding = cuda.to_device(padding)
    else:
        expect_shape("key_padding_mask", padding, (B, N), "(B, N)")
        if np.dtype(padding.dtype) != np.bool_:
            raise TypeError(f"key_padding_mask has dtype {np.dtype(padding.dtype)}; expected "
                            "bool (True = padded)")
    return device, x, padding


def masked_mean(x, key_padding_mask=None):
    """(B, E) mean of tokens x (B, N, E) over the unpadded ones (key_padding_mask True =
    padded); a sequence that is all padding pools to zeros."""
    device, x, padding = _tokens_and_padding(x, key_padding_mask)
    out = empty_like_on(device, (shape_of(x)[0], shape_of(x)[2]), x.dtype)
    kernels_for(device, "pooling").masked_mean_forward(out, x, padding)
    return out


def masked_mean_backward(dout, x, key_padding_mask=None):
    """dx (B, N, E) of :func:`masked_mean` (``x`` gives the shape and device)."""
    device, x, padding = _tokens_and_padding(x, key_padding_mask)
    B, N, E = shape_of(x)
    expect_shape("dout", dout, (B, E), "(B, E)")
    dx = empty_like_on(device, (B, N, E), x.dtype)
    kernels_for(device, "pooling").masked_mean_backward(dx, dout, padding)
    return dx


def prepend_token(x, token, length=None):
    """out (B, L, E): ``token`` (E,) at position 0, then x (B, N, E); L = N + 1 by default
    (a class token), L = N shifts x right by one and drops its last token (decoder inputs).
    Works for float tokens, integer ids (E = 1) and bool masks."""
    device = backend_of(x=x, token=token)
    if x.ndim != 3 or shape_of(token) != (shape_of(x)[2],):
        raise ValueError(f"x {shape_of(x)} and token {shape_of(token)} must be (B, N, E), (E,)")
    B, N, E = shape_of(x)
    length = N + 1 if length is None else int(length)
    if not 1 <= length <= N + 1:
        raise ValueError(f"length must lie in [1, N + 1 = {N + 1}], got {length}")
    if device == CPU:
        x, token = np.ascontiguousarray(x), np.ascontiguousarray(token, dtype=x.dtype)
    out = empty_like_on(device, (B, length, E), x.dtype)
    kernels_for(device, "pooling").prepend_token_forward(out, x, token)
    return out


def prepend_token_backward(dout, x, *, token_grad):
    """dx (B, N, E) of :func:`prepend_token`; adds the token's gradient into ``token_grad``."""
    device, a = prepared({"dout": dout, "x": x, "token_grad": token_grad})
    B, N, E = shape_of(a["x"])
    if a["dout"].ndim != 3 or shape_of(a["dout"])[::2] != (B, E):
        raise ValueError(f"dout has shape {shape_of(dout)}; expected (B, L, E) with B, E of x")
    expect_shape("token_grad", a["token_grad"], (E,), "(E,)")
    expect_updatable("token_grad", token_grad, a["token_grad"])
    dx = empty_like_on(device, (B, N, E), a["x"].dtype)
    kernels_for(device, "pooling").prepend_token_backward(dx, a["token_grad"], a["dout"])
    return dx


def first_token(x):
    """(B, E) = x[:, 0] for tokens x (B, N, E), on either device."""
    device, a = prepared({"x": x})
    x = a["x"]
    if x.ndim != 3 or not x.shape[1]:
        raise ValueError(f"x has shape {shape_of(x)}; expected tokens (B, N, E) with N >= 1")
    out = empty_like_on(device, (shape_of(x)[0], shape_of(x)[2]), x.dtype)
    kernels_for(device, "pooling").first_token_forward(out, x)
    return out


def first_token_backward(dout, x):
    """dx (B, N, E) of :func:`first_token`: dout at token 0, zeros elsewhere."""
    device, a = prepared({"dout": dout, "x": x})
    B, N, E = shape_of(a["x"])
    expect_shape("dout", a["dout"], (B, E), "(B, E)")
    dx = empty_like_on(device, (B, N, E), a["x"].dtype)
    kernels_for(device, "pooling").first_token_backward(dx, a["dout"])
    return dx


def write_positions(cache, new, start):
    """In place: cache[:, :, start:start + n] = new, for a key/value cache (B, H, M, D) and new
    keys or values (B, H, n, D)."""
    device, a = prepared({"cache": cache, "new": new})
    expect_updatable("cache", cache, a["cache"])
    B, H, M, D = shape_of(cache)
    n = shape_of(new)[2] if new.ndim == 4 else -1
    expect_shape("new", a["new"], (B, H, n, D), "(B, H, n, D)")
    if not 0 <= start <= M - n:
        raise ValueError(f"positions {start}..{start + n - 1} do not fit a cache of {M}")
    kernels_for(device, "kv_cache").write_positions(cache, a["new"], int(start))
    return cache
