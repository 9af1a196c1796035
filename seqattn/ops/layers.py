"""Layer ops: linear, norms, activations, dropout, embedding, heads, RoPE, additive scores.

Token tensors are (B, N, E); any leading dims are flattened into token rows R. Backward
functions that take ``*_grad`` arrays ADD the parameter gradients into them in place (gradients
accumulate over calls, as in torch); every other output is a new array.
"""
import numpy as np

from ..backend import CPU, empty_like_on, kernels_for
from .checks import (expect_last_dim, expect_positive, expect_probability, expect_shape,
                     expect_updatable, flat, prepared, rows, shape_of)


def linear(x, weight, bias=None):
    """A linear map, ``y = x @ weight^T + bias``.

    Parameters
    ----------
    x : array (..., K)
        Inputs, on the CPU (NumPy) or the GPU (numba.cuda device array).
    weight : array (O, K)
        The weight, on the device of ``x``.
    bias : array (O,), optional
        Added to every output row.

    Returns
    -------
    array (..., O)
        ``y``, on the device of ``x``.
    """
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
    """Gradients of :func:`linear`.

    Parameters
    ----------
    dout : array (..., O)
        dLoss/dy.
    x : array (..., K)
        The forward call's input.
    weight : array (O, K)
        The forward call's weight.
    weight_grad : array (O, K) or None
        dLoss/dweight is added into it; None: not computed (a frozen weight).
    bias_grad : array (O,), optional
        dLoss/dbias is added into it.
    need_input_grad : bool, default True
        Compute dx (False skips the product when the input needs no gradient).

    Returns
    -------
    array (..., K) or None
        dx, or None unless ``need_input_grad``.
    """
    device, a = prepared({"dout": dout, "x": x, "weight": weight, "weight_grad": weight_grad,
                          "bias_grad": bias_grad})
    O, K = shape_of(a["weight"])
    expect_last_dim("x", a["x"], K, "in_features")
    expect_shape("dout", a["dout"], shape_of(a["x"])[:-1] + (O,), "(..., O)")
    if weight_grad is not None:
        expect_shape("weight_grad", a["weight_grad"], (O, K), "(O, K)")
        expect_updatable("weight_grad", weight_grad, a["weight_grad"])
    if bias_grad is not None:
        expect_shape("bias_grad", a["bias_grad"], (O,), "(O,)")
        expect_updatable("bias_grad", bias_grad, a["bias_grad"])
    dx = empty_like_on(device, shape_of(a["x"]), a["x"].dtype) if need_input_grad else None
    kernels_for(device, "linear").linear_backward(
        rows(dx) if need_input_grad else rows(a["x"]), a["weight_grad"],
        a["weight"] if bias_grad is None else a["bias_grad"],
        rows(a["dout"]), rows(a["x"]), a["weight"], need_input_grad, bias_grad is not None)
    return dx


def _row_stats(device, x):
    R = int(x.size) // shape_of(x)[-1]
    return empty_like_on(device, (R,), x.dtype)


def layer_norm(x, weight, bias, eps=1e-5):
    """Layer normalization over the last axis.

    Parameters
    ----------
    x : array (..., E)
        Inputs, on the CPU (NumPy) or the GPU (numba.cuda device array).
    weight, bias : arrays (E,)
        Scale and shift.
    eps : float, default 1e-5
        Added to the variance.

    Returns
    -------
    out : array (..., E)
        The normalized, scaled and shifted rows.
    mean, rstd : arrays (R,)
        Each row's mean and reciprocal standard deviation, R = x.size / E, which
        :func:`layer_norm_backward` needs.
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
    """Gradients of :func:`layer_norm`.

    Parameters
    ----------
    dout : array (..., E)
        dLoss/dout.
    x : array (..., E)
        The forward call's input.
    mean, rstd : arrays (R,)
        What :func:`layer_norm` returned.
    weight : array (E,)
        The forward call's scale.
    weight_grad, bias_grad : arrays (E,)
        dLoss/dweight and dLoss/dbias are added into them.

    Returns
    -------
    array (..., E)
        dx.
    """
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
    """Root-mean-square normalization over the last axis (no centring, no shift).

    Parameters
    ----------
    x : array (..., E)
        Inputs, on the CPU (NumPy) or the GPU (numba.cuda device array).
    weight : array (E,)
        Scale.
    eps : float, default 1e-6
        Added to the mean square.

    Returns
    -------
    out : array (..., E)
        The normalized and scaled rows.
    rstd : array (R,)
        Each row's reciprocal root mean square, which :func:`rms_norm_backward` needs.
    """
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
    """Gradients of :func:`rms_norm`.

    Parameters
    ----------
    dout : array (..., E)
        dLoss/dout.
    x : array (..., E)
        The forward call's input.
    rstd : array (R,)
        What :func:`rms_norm` returned.
    weight : array (E,)
        The forward call's scale.
    weight_grad : array (E,)
        dLoss/dweight is added into it.

    Returns
    -------
    array (..., E)
        dx.
    """
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
    """GELU, ``x * Phi(x)``, elementwise, as torch.nn.GELU.

    Parameters
    ----------
    x : array
        Inputs, on the CPU (NumPy) or the GPU (numba.cuda device array).
    approximate : str, default 'none'
        ``"none"`` (with erf) or ``"tanh"`` (the tanh formula).

    Returns
    -------
    array
        Shaped like ``x``.
    """
    return _pointwise("gelu_forward", {"x": x}, _gelu_is_tanh(approximate))


def gelu_backward(dout, x, approximate="none"):
    """dx of :func:`gelu`: ``dout * gelu'(x)``.

    Parameters
    ----------
    dout : array
        dLoss/dout, shaped like ``x``.
    x : array
        The forward call's input.
    approximate : str, default 'none'
        As in the forward call.

    Returns
    -------
    array
        dx.
    """
    return _pointwise("gelu_backward", {"dout": dout, "x": x}, _gelu_is_tanh(approximate))


def relu(x):
    """ReLU, ``max(x, 0)``, elementwise.

    Parameters
    ----------
    x : array
        Inputs, on the CPU (NumPy) or the GPU (numba.cuda device array).

    Returns
    -------
    array
        Shaped like ``x``.
    """
    return _pointwise("relu_forward", {"x": x})


def relu_backward(dout, x):
    """dx of :func:`relu`: ``dout`` where x > 0, zeros elsewhere.

    Parameters
    ----------
    dout : array
        dLoss/dout, shaped like ``x``.
    x : array
        The forward call's input.

    Returns
    -------
    array
        dx.
    """
    return _pointwise("relu_backward", {"dout": dout, "x": x})


def silu(x):
    """SiLU (swish), ``x * sigmoid(x)``, elementwise.

    Parameters
    ----------
    x : array
        Inputs, on the CPU (NumPy) or the GPU (numba.cuda device array).

    Returns
    -------
    array
        Shaped like ``x``.
    """
    return _pointwise("silu_forward", {"x": x})


def silu_backward(dout, x):
    """dx of :func:`silu`: ``dout * silu'(x)``.

    Parameters
    ----------
    dout : array
        dLoss/dout, shaped like ``x``.
    x : array
        The forward call's input.

    Returns
    -------
    array
        dx.
    """
    return _pointwise("silu_backward", {"dout": dout, "x": x})


def swiglu(gate, up):
    """The SwiGLU gate of LLaMA-style feed-forward blocks, ``silu(gate) * up``.

    Parameters
    ----------
    gate, up : arrays of one shape
        The two projections, on the CPU (NumPy) or the GPU (numba.cuda device array).

    Returns
    -------
    array
        Shaped like ``gate``.
    """
    return _pointwise("swiglu_forward", {"gate": gate, "up": up})


def swiglu_backward(dout, gate, up):
    """Gradients of :func:`swiglu`.

    Parameters
    ----------
    dout : array
        dLoss/dout, shaped like ``gate``.
    gate, up : arrays
        The forward call's inputs.

    Returns
    -------
    dgate, dup : arrays
        The gradients of the two inputs.
    """
    return _pointwise("swiglu_backward", {"dout": dout, "gate": gate, "up": up})


def _check_seed(seed):
    if not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**63:
        raise ValueError(f"seed must be an integer in [0, 2**63), got {seed!r}")
    return int(seed)


def dropout(x, p, seed):
    """Inverted dropout: zero each element with probability p, scale the rest by 1 / (1 - p).

    The mask is a function of (seed, element index) only, the same on CPU and GPU; pass the same
    seed to :func:`dropout_backward`, which recomputes the mask instead of storing it.

    Parameters
    ----------
    x : array
        Inputs, on the CPU (NumPy) or the GPU (numba.cuda device array).
    p : float
        Probability of zeroing an element, in [0, 1).
    seed : int
        The mask's seed, in [0, 2**63).

    Returns
    -------
    array
        Shaped like ``x``.
    """
    expect_probability("p", p)
    return _dropout("dropout_forward", x, p, seed)


def dropout_backward(dout, p, seed):
    """dx of :func:`dropout`: the same mask (recomputed from ``seed``) and scale applied to
    ``dout``.

    Parameters
    ----------
    dout : array
        dLoss/dout.
    p : float
        As in the forward call.
    seed : int
        As in the forward call.

    Returns
    -------
    array
        dx.
    """
    expect_probability("p", p)
    return _dropout("dropout_backward", dout, p, seed)


def _dropout(name, x, p, seed):
    device, a = prepared({"x": x})
    x = a["x"]
    out = empty_like_on(device, shape_of(x), x.dtype)
    getattr(kernels_for(device, "dropout"), name)(flat(out), flat(x), float(p), _check_seed(seed))
    return out


def embedding(ids, weight):
    """A learned vector per category: ``out = weight[ids]``.

    Parameters
    ----------
    ids : int array (...)
        Category ids in [0, V), on the CPU (NumPy) or the GPU (numba.cuda device array).
    weight : array (V, E)
        The table.

    Returns
    -------
    array (..., E)
        One row of the table per id.
    """
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
    """Gradient of :func:`embedding`'s table.

    Parameters
    ----------
    dout : array (..., E)
        dLoss/dout.
    ids : int array (...)
        The forward call's ids.
    weight_grad : array (V, E)
        dLoss/dweight is added into it.
    padding_idx : int, optional
        Rows with this id get no gradient.

    Returns
    -------
    array (V, E)
        ``weight_grad``.
    """
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
    """(B, N, H * D) -> (B, H, N, D): the heads of a projection, each its own block.

    Parameters
    ----------
    x : array (B, N, parts * H * D)
        Projected tokens, on the CPU (NumPy) or the GPU (numba.cuda device array).
    num_heads : int
        H.
    parts : int, default 1
        Blocks side by side in ``x`` (3 for q, k and v from one packed projection).

    Returns
    -------
    array (B, H, N, D), or a tuple of ``parts`` of them
        The heads of each block.
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
        kernels_for(device, "heads").split_heads_forward(out, x)
    return out[0] if parts == 1 else tuple(out[p] for p in range(parts))


def merge_heads(*heads):
    """(B, H, N, D) -> (B, N, H * D); the inverse of :func:`split_heads`.

    Parameters
    ----------
    *heads : arrays (B, H, N, D) of one shape
        One array, or P arrays merged side by side (the inverse of
        ``split_heads(..., parts=P)``).

    Returns
    -------
    array (B, N, P * H * D)
        The merged tokens.
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
    out = empty_like_on(device, (B, N, len(heads) * H * D), first.dtype)
    if first.size:
        kernels_for(device, "heads").split_heads_backward(out, tuple(a[name] for name in names))
    return out


def rope(x, cos, sin):
    """Rotary position embedding: rotates feature pairs of each position by its angles.

    Parameters
    ----------
    x : array (B, H, N, D)
        Queries or keys, on the CPU (NumPy) or the GPU (numba.cuda device array).
    cos, sin : arrays (N, D / 2)
        The angle tables of the positions.

    Returns
    -------
    array (B, H, N, D)
        The rotated heads.
    """
    return _rope("rope_forward", x, cos, sin)


def rope_backward(dout, cos, sin):
    """dx of :func:`rope`: ``dout`` rotated back by the same angles.

    Parameters
    ----------
    dout : array (B, H, N, D)
        dLoss/dout.
    cos, sin : arrays (N, D / 2)
        As in the forward call.

    Returns
    -------
    array (B, H, N, D)
        dx.
    """
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
    """Bahdanau scores, ``scores[b, n, m] = v^T tanh(qp[b, n] + kp[b, m])``.

    Parameters
    ----------
    qp : array (B, N, A)
        Projected queries, on the CPU (NumPy) or the GPU (numba.cuda device array).
    kp : array (B, M, A)
        Projected keys.
    v : array (A,)
        The scoring vector.

    Returns
    -------
    array (B, N, M)
        The scores.
    """
    device, a = prepared({"qp": qp, "kp": kp, "v": v})
    qp, kp = a["qp"], a["kp"]
    _check_additive(qp, kp, a["v"])
    B, N, A = shape_of(qp)
    scores = empty_like_on(device, (B, N, int(kp.shape[1])), qp.dtype)
    if scores.size:
        kernels_for(device, "additive_scores").additive_scores_forward(scores, qp, kp, a["v"])
    return scores


def additive_scores_backward(dscores, qp, kp, v, *, v_grad):
    """Gradients of :func:`additive_scores`.

    Parameters
    ----------
    dscores : array (B, N, M)
        dLoss/dscores.
    qp, kp, v : arrays
        The forward call's inputs.
    v_grad : array (A,)
        dLoss/dv is added into it.

    Returns
    -------
    dqp, dkp : arrays (B, N, A) and (B, M, A)
        The gradients of the projected queries and keys.
    """
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
