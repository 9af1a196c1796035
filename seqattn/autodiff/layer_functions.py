"""The differentiable layer ops: each a forward and a backward over ``seqattn.ops``' kernels.

Weight gradients are added in place into ``ctx.accumulator(i)`` (a Parameter's ``.grad``), as
the kernels do; every other gradient is a new array.
"""
from .. import ops
from .function import Function, zeros_like


class Linear(Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save(x=x, weight=weight)
        return ops.linear(x, weight, bias)

    @staticmethod
    def backward(ctx, dout):
        s = ctx.saved
        weight_grad = ctx.accumulator(1) if ctx.needs_grad[1] else None
        bias_grad = ctx.accumulator(2) if ctx.needs_grad[2] else None
        dx = ops.linear_backward(dout, s["x"], s["weight"], weight_grad=weight_grad,
                                 bias_grad=bias_grad, need_input_grad=ctx.needs_grad[0])
        return dx, weight_grad, bias_grad


def linear(x, weight, bias=None):
    """x (..., K) @ weight (O, K)^T + bias (O,) -> (..., O).

    Parameters
    ----------
    x : Tensor or array (..., K)
        The inputs.
    weight : Tensor or array (O, K)
        The weight matrix (a :class:`seqattn.autodiff.Parameter` in a layer).
    bias : Tensor or array (O,), optional
        Added to every output; default None (no bias).

    Returns
    -------
    Tensor (..., O)
        The outputs.
    """
    return Linear.apply(x, weight, bias)


class LayerNorm(Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        out, mean, rstd = ops.layer_norm(x, weight, bias, eps)
        ctx.save(x=x, mean=mean, rstd=rstd, weight=weight)
        return out

    @staticmethod
    def backward(ctx, dout):
        s = ctx.saved
        weight_grad, bias_grad = ctx.accumulator(1), ctx.accumulator(2)
        dx = ops.layer_norm_backward(dout, s["x"], s["mean"], s["rstd"], s["weight"],
                                     weight_grad=weight_grad, bias_grad=bias_grad)
        return dx, weight_grad, bias_grad, None


def layer_norm(x, weight, bias, eps=1e-5):
    """Normalise x (..., E) over its last axis, then scale by weight (E,) and shift by bias.

    Parameters
    ----------
    x : Tensor or array (..., E)
        The inputs.
    weight, bias : Tensor or array (E,)
        The scale and the shift applied after normalising.
    eps : float, default 1e-5
        Added to the variance before its square root.

    Returns
    -------
    Tensor (..., E)
        The normalised, scaled and shifted values.
    """
    return LayerNorm.apply(x, weight, bias, eps)


class RMSNorm(Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        out, rstd = ops.rms_norm(x, weight, eps)
        ctx.save(x=x, rstd=rstd, weight=weight)
        return out

    @staticmethod
    def backward(ctx, dout):
        s = ctx.saved
        weight_grad = ctx.accumulator(1)
        dx = ops.rms_norm_backward(dout, s["x"], s["rstd"], s["weight"], weight_grad=weight_grad)
        return dx, weight_grad, None


def rms_norm(x, weight, eps=1e-6):
    """x (..., E) divided by its root mean square over the last axis, times weight (E,).

    Parameters
    ----------
    x : Tensor or array (..., E)
        The inputs.
    weight : Tensor or array (E,)
        The scale applied after normalising.
    eps : float, default 1e-6
        Added to the mean square before its square root.

    Returns
    -------
    Tensor (..., E)
        The normalised and scaled values.
    """
    return RMSNorm.apply(x, weight, eps)


class GELU(Function):
    @staticmethod
    def forward(ctx, x, approximate):
        ctx.save(x=x, approximate=approximate)
        return ops.gelu(x, approximate)

    @staticmethod
    def backward(ctx, dout):
        return ops.gelu_backward(dout, ctx.saved["x"], ctx.saved["approximate"]), None


def gelu(x, approximate="none"):
    return GELU.apply(x, approximate)


class ReLU(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save(x=x)
        return ops.relu(x)

    @staticmethod
    def backward(ctx, dout):
        return ops.relu_backward(dout, ctx.saved["x"])


def relu(x):
    return ReLU.apply(x)


class SiLU(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save(x=x)
        return ops.silu(x)

    @staticmethod
    def backward(ctx, dout):
        return ops.silu_backward(dout, ctx.saved["x"])


def silu(x):
    return SiLU.apply(x)


class SwiGLU(Function):
    @staticmethod
    def forward(ctx, gate, up):
        ctx.save(gate=gate, up=up)
        return ops.swiglu(gate, up)

    @staticmethod
    def backward(ctx, dout):
        return ops.swiglu_backward(dout, ctx.saved["gate"], ctx.saved["up"])


def swiglu(gate, up):
    """silu(gate) * up.

    Parameters
    ----------
    gate : Tensor or array (..., H)
        The gate projection, passed through SiLU.
    up : Tensor or array (..., H)
        The value projection, the shape of `gate`.

    Returns
    -------
    Tensor (..., H)
        ``silu(gate) * up``.
    """
    return SwiGLU.apply(gate, up)


class Dropout(Function):
    @staticmethod
    def forward(ctx, x, p, seed):
        # the mask is a function of (seed, index): backward recomputes it instead of storing it
        ctx.save(p=p, seed=seed)
        return ops.dropout(x, p, seed)

    @staticmethod
    def backward(ctx, dout):
        return ops.dropout_backward(dout, ctx.saved["p"], ctx.saved["seed"]), None, None


def dropout(x, p, seed):
    return Dropout.apply(x, p, seed)


class Embedding(Function):
    @staticmethod
    def forward(ctx, ids, weight, padding_idx):
        ctx.save(ids=ids, padding_idx=padding_idx)
        return ops.embedding(ids, weight)

    @staticmethod
    def backward(ctx, dout):
        weight_grad = ctx.accumulator(1)
        ops.embedding_backward(dout, ctx.saved["ids"], weight_grad=weight_grad,
                               padding_idx=ctx.saved["padding_idx"])
        return None, weight_grad, None


def embedding(ids, weight, padding_idx=None):
    """weight (V, E)[ids (...)] -> (..., E); rows of ``padding_idx`` get no gradient.

    Parameters
    ----------
    ids : int array (...)
        Row indices in [0, V); no gradient flows to them.
    weight : Tensor or array (V, E)
        The embedding table.
    padding_idx : int, optional
        A row whose gradient stays zero (the padding token's); default None.

    Returns
    -------
    Tensor (..., E)
        One table row per id.
    """
    return Embedding.apply(ids, weight, padding_idx)


class SplitHeads(Function):
    @staticmethod
    def forward(ctx, x, num_heads, parts):
        return ops.split_heads(x, num_heads, parts)

    @staticmethod
    def backward(ctx, *douts):
        filled = [d if d is not None else zeros_like(next(g for g in douts if g is not None))
                  for d in douts]
        return ops.merge_heads(*filled), None, None


def split_heads(x, num_heads, parts=1):
    """(B, N, parts * H * D) -> (B, H, N, D), or a tuple of ``parts`` of them.

    Parameters
    ----------
    x : Tensor or array (B, N, parts * H * D)
        Projected tokens.
    num_heads : int
        H, the number of heads.
    parts : int, default 1
        Blocks side by side in `x` (3 for queries, keys and values of one packed projection).

    Returns
    -------
    Tensor (B, H, N, D) or tuple of them
        The heads; a tuple of `parts` Tensors when `parts` > 1.
    """
    return SplitHeads.apply(x, num_heads, parts)


class MergeHeads(Function):
    @staticmethod
    def forward(ctx, *heads):
        ctx.save(num_heads=int(heads[0].shape[1]))
        return ops.merge_heads(*heads)

    @staticmethod
    def backward(ctx, dout):
        parts = len(ctx.needs_grad)
        grads = ops.split_heads(dout, ctx.saved["num_heads"], parts)
        return grads if parts > 1 else (grads,)


def merge_heads(*heads):
    """(B, H, N, D) -> (B, N, H * D); several inputs side by side.

    Parameters
    ----------
    *heads : Tensor or array (B, H, N, D)
        One input, or several of one shape merged side by side (the inverse of
        ``split_heads(..., parts=len(heads))``).

    Returns
    -------
    Tensor (B, N, len(heads) * H * D)
        The merged tokens.
    """
    return MergeHeads.apply(*heads)


class Rope(Function):
    @staticmethod
    def forward(ctx, x, cos, sin):
        ctx.save(cos=cos, sin=sin)
        return ops.rope(x, cos, sin)

    @staticmethod
    def backward(ctx, dout):
        return ops.rope_backward(dout, ctx.saved["cos"], ctx.saved["sin"]), None, None


def rope(x, cos, sin):
    """x (B, H, N, D) rotated by angle tables cos, sin (N, D / 2) (constants).

    Parameters
    ----------
    x : Tensor or array (B, H, N, D)
        Queries or keys.
    cos, sin : array (N, D / 2)
        Cosines and sines of each position's rotation angles; constants, no gradient.

    Returns
    -------
    Tensor (B, H, N, D)
        The rotated heads.
    """
    return Rope.apply(x, cos, sin)


class AdditiveScores(Function):
    @staticmethod
    def forward(ctx, qp, kp, v):
        ctx.save(qp=qp, kp=kp, v=v)
        return ops.additive_scores(qp, kp, v)

    @staticmethod
    def backward(ctx, dscores):
        s = ctx.saved
        v_grad = ctx.accumulator(2)
        dqp, dkp = ops.additive_scores_backward(dscores, s["qp"], s["kp"], s["v"], v_grad=v_grad)
        return dqp, dkp, v_grad


def additive_scores(qp, kp, v):
    """(B, N, M) scores v . tanh(qp[b, n] + kp[b, m]).

    Parameters
    ----------
    qp : Tensor or array (B, N, A)
        Projected queries.
    kp : Tensor or array (B, M, A)
        Projected keys.
    v : Tensor or array (A,)
        The scoring vector.

    Returns
    -------
    Tensor (B, N, M)
        The scores of every query-key pair.
    """
    return AdditiveScores.apply(qp, kp, v)
