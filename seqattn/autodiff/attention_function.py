"""The fused attention operator as a differentiable op (q, k, v and an optional dense bias)."""
from .. import ops
from .function import Function
from .tensor import unwrap


class Attention(Function):
    @staticmethod
    def forward(ctx, q, k, v, bias, options):
        out, lse = ops.attention(q, k, v, bias=bias, return_lse=True, **options)
        ctx.save(q=q, k=k, v=v, bias=bias, out=out, lse=lse, options=options)
        return out

    @staticmethod
    def backward(ctx, dout):
        s = ctx.saved
        dq, dk, dv, dbias = ops.attention_backward(
            dout, s["q"], s["k"], s["v"], s["out"], s["lse"], bias=s["bias"],
            bias_requires_grad=ctx.needs_grad[3], **s["options"])
        return dq, dk, dv, dbias, None


def attention(q, k, v, bias=None, **options):
    """softmax(q k^T * scale + bias) v for q (B, H, N, D), k, v (B, Hkv, M, D); ``options`` are
    those of :func:`seqattn.ops.attention` (causal, masks, ALiBi, window, scale). A bias that is
    a Tensor requiring gradients gets one (summed over its broadcast dims)."""
    return Attention.apply(q, k, v, bias, {name: unwrap(x) for name, x in options.items()})
