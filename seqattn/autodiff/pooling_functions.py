"""Differentiable pooling: masked mean over tokens, a token put in front, the first token."""
from .. import ops
from .function import Function


class MaskedMean(Function):
    @staticmethod
    def forward(ctx, x, key_padding_mask):
        ctx.save(x=x, key_padding_mask=key_padding_mask)
        return ops.masked_mean(x, key_padding_mask)

    @staticmethod
    def backward(ctx, dout):
        s = ctx.saved
        return ops.masked_mean_backward(dout, s["x"], s["key_padding_mask"]), None


def masked_mean(x, key_padding_mask=None):
    """(B, E) mean of tokens x (B, N, E) over the unpadded ones (True = padded).

    Parameters
    ----------
    x : Tensor or array (B, N, E)
        The tokens.
    key_padding_mask : bool array (B, N), optional
        True for a padded token, left out of the mean; default None (every token counts).

    Returns
    -------
    Tensor (B, E)
        Each sequence's mean token.
    """
    return MaskedMean.apply(x, key_padding_mask)


class PrependToken(Function):
    @staticmethod
    def forward(ctx, x, token, length):
        ctx.save(x=x)
        return ops.prepend_token(x, token, length)

    @staticmethod
    def backward(ctx, dout):
        token_grad = ctx.accumulator(1)
        dx = ops.prepend_token_backward(dout, ctx.saved["x"], token_grad=token_grad)
        return dx, token_grad, None


def prepend_token(x, token, length=None):
    """(B, L, E): token (E,) at position 0, then x (B, N, E); L = N + 1 by default.

    Parameters
    ----------
    x : Tensor or array (B, N, E)
        The sequences.
    token : Tensor or array (E,)
        The token put first (a learned class token); its gradient sums over the batch.
    length : int, optional
        L, the output length: default None, N + 1 (a class token); N shifts `x` right by one
        and drops its last token.

    Returns
    -------
    Tensor (B, L, E)
        The sequences with the token first.
    """
    return PrependToken.apply(x, token, length)


class FirstToken(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save(x=x)
        return ops.first_token(x)

    @staticmethod
    def backward(ctx, dout):
        return ops.first_token_backward(dout, ctx.saved["x"])


def first_token(x):
    """(B, E) = x[:, 0].

    Parameters
    ----------
    x : Tensor or array (B, N, E)
        The tokens.

    Returns
    -------
    Tensor (B, E)
        The first token of each sequence (a class token's output).
    """
    return FirstToken.apply(x)
