"""Sequence-to-vector pooling pieces on the CPU: the mean over unpadded tokens, a token put in
front of a sequence (a class token, or the start token of a shifted decoder input), and taking
the first token back out.

Shapes: x (B, N, E) tokens, padding (B, N) bool with True = padded (as ``key_padding_mask``),
out (B, E) pooled vectors. A sequence with no unpadded token pools to zeros, not NaN.
``prepend_token`` writes out (B, L, E) with out[:, 0] = token and out[:, 1 + n] = x[:, n] for
1 + n < L: L = N + 1 prepends, L = N shifts right and drops the last token. Any dtype works
(floats for tokens, integers for ids, bool for masks).
"""
from numba import prange

from .threads import sized_kernel

# Elements a thread must have before a launch takes it: as for the add and the head split,
# copies measured in benchmarks/small_launches.py.
GRAIN = 1 << 16


def _input_size(out, x, *rest):
    return x.size


@sized_kernel(GRAIN, work=_input_size)
def masked_mean_forward(out, x, padding):
    B, N, E = x.shape
    for b in prange(B):
        count = 0
        for e in range(E):
            out[b, e] = 0.0
        for n in range(N):
            if not padding[b, n]:
                count += 1
                for e in range(E):
                    out[b, e] += x[b, n, e]
        if count:
            for e in range(E):
                out[b, e] /= count


@sized_kernel(GRAIN)
def masked_mean_backward(dx, dout, padding):
    B, N, E = dx.shape
    for b in prange(B):
        count = 0
        for n in range(N):
            count += 0 if padding[b, n] else 1
        for n in range(N):
            share = 0.0 if padding[b, n] else 1.0 / count
            for e in range(E):
                dx[b, n, e] = dout[b, e] * share


@sized_kernel(GRAIN)
def prepend_token_forward(out, x, token):
    B, L, E = out.shape
    for b in prange(B):
        for e in range(E):
            out[b, 0, e] = token[e]
        for n in range(L - 1):
            for e in range(E):
                out[b, n + 1, e] = x[b, n, e]


@sized_kernel(GRAIN)
def prepend_token_backward(dx, dtoken, dout):
    """dx (B, N, E) is written; dtoken (E,) is accumulated (+=) over the batch."""
    B, N, E = dx.shape
    L = dout.shape[1]
    for b in prange(B):
        for n in range(N):
            for e in range(E):
                dx[b, n, e] = dout[b, n + 1, e] if n + 1 < L else 0.0
    for b in range(B):
        for e in range(E):
            dtoken[e] += dout[b, 0, e]


@sized_kernel(GRAIN, work=_input_size)
def first_token_forward(out, x):
    B, N, E = x.shape
    for b in prange(B):
        for e in range(E):
            out[b, e] = x[b, 0, e]


@sized_kernel(GRAIN)
def first_token_backward(dx, dout):
    B, N, E = dx.shape
    for b in prange(B):
        for n in range(N):
            for e in range(E):
                dx[b, n, e] = dout[b, e] if n == 0 else 0.0
