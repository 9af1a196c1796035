"""Measure, per CPU kernel family, the size from which a launch is faster on all threads than
serial on the calling thread: the evidence for each family's GRAIN (kernels/cpu/threads.py).

For sizes doubling from 2**10 units of work, times one launch of each family's kernel run
serial and run parallel on every Numba thread, and prints both (microseconds, the fastest of
the timed repeats, so that a busy machine disturbs the figure least), their ratio and the
family's grain. A launch of ``work`` units runs parallel from 2 * grain: the grain should sit
where the ratio serial / parallel passes about 1.3 (the time a region of both threads costs
when another process holds a core is not in these figures; it only adds to the parallel side).

    python benchmarks/small_launches.py
    python benchmarks/small_launches.py --families linear gelu --repeats 50
"""
import argparse
import os
import platform
import time

import numba
import numpy as np

from seqattn.kernels.cpu import (activations, attention, attention_small, dropout, elementwise,
                                 heads, layer_norm, linear, optimizers, reductions)
from seqattn.kernels.cpu.gemm.blas_library import LIBRARY, single_threaded_blas
from seqattn.ops.attention_inputs import prepare_attention
from seqattn.ops.optimizers import AdamManyParameters


def _pointwise(kernel, inputs):
    def make(n, rng):
        arrays = [rng.standard_normal(n, dtype=np.float32) for _ in range(inputs + 1)]
        return kernel, lambda threads: kernel.run(threads, *arrays)
    return make


def _gelu(n, rng):
    x = rng.standard_normal(n, dtype=np.float32)
    out = np.empty_like(x)
    kernel = activations._gelu_forward_f32
    return kernel, lambda threads: kernel.run(threads, out, x)


def _dropout(n, rng):
    x = rng.standard_normal(n, dtype=np.float32)
    out = np.empty_like(x)
    kernel = dropout.dropout_forward
    return kernel, lambda threads: kernel.run(threads, out, x, 0.1, 7)


def _adam(n, rng):
    param, avg, avg_sq, grad = (rng.standard_normal(n, dtype=np.float32) for _ in range(4))
    avg_sq = np.abs(avg_sq)
    kernel = optimizers.adam_update
    return kernel, lambda threads: kernel.run(threads, param, avg, avg_sq, grad, 1e-3, 0.9,
                                              0.999, 1e-8, 0.01, True, 0.1, 0.001, 1.0)


def _layer_norm_forward(n, rng, E=256):
    x = rng.standard_normal((max(1, n // E), E), dtype=np.float32)
    out, w, b = np.empty_like(x), np.ones(E, np.float32), np.zeros(E, np.float32)
    mean, rstd = np.empty(x.shape[0], np.float32), np.empty(x.shape[0], np.float32)
    kernel = layer_norm.layer_norm_forward
    return kernel, lambda threads: kernel.run(threads, out, mean, rstd, x, w, b, 1e-5)


def _layer_norm_backward(n, rng, E=256):
    x = rng.standard_normal((max(1, n // E), E), dtype=np.float32)
    dout, dx = rng.standard_normal(x.shape, dtype=np.float32), np.empty_like(x)
    w, dw, db = np.ones(E, np.float32), np.zeros(E, np.float32), np.zeros(E, np.float32)
    mean, rstd = x.mean(1), 1 / x.std(1)
    kernel = layer_norm._layer_norm_backward
    return kernel, lambda threads: kernel.run(threads, dx, dw, db, dout, x, mean, rstd, w,
                                              threads)


def _split_heads(n, rng, H=4, D=16):
    x = rng.standard_normal((1, max(1, n // (H * D)), 3 * H * D), dtype=np.float32)
    out = np.empty((1, 1, H, x.shape[1], D), np.float32)  # one block (P = 1) of the packed x
    kernel = heads.split_heads_forward
    return kernel, lambda threads: kernel.run(threads, out, x[:, :, H * D:2 * H * D])


def _sum_over_rows(n, rng, S=256):
    x = rng.standard_normal((max(1, n // S), S), dtype=np.float32)
    out = np.empty(S, np.float32)
    kernel = reductions._sum_over_rows
    return kernel, lambda threads: kernel.run(threads, out, x, False, threads)


def _linear(backward):
    def make(n, rng, K=64, O=64):
        """n multiply-adds: R = n / (K O) token rows of a K -> O layer."""
        R = max(1, n // (K * O))
        x, w = rng.standard_normal((R, K), dtype=np.float32), rng.standard_normal(
            (O, K), dtype=np.float32)
        b, y = np.zeros(O, np.float32), np.empty((R, O), np.float32)
        if backward:
            kernel = linear._linear_backward
            dx, dw, db = np.empty_like(x), np.zeros_like(w), np.zeros_like(b)

            def launch(threads):
                with single_threaded_blas():
                    kernel.run(threads, dx, dw, db, y, x, w, True, True, True,
                               linear.NT_NN_IN_REGISTERS, linear.TN_IN_REGISTERS, threads)
        else:
            kernel = linear._linear_forward

            def launch(threads):
                with single_threaded_blas():
                    kernel.run(threads, y, x, w, b, True, linear.NT_NN_IN_REGISTERS, threads)
        return kernel, launch
    return make


def _attention(backward):
    def make(n, rng, B=2, H=4, D=16):
        """n multiply-adds of q k^T: B H N N D, as in a small training step's attention."""
        N = max(1, int((n / (B * H * D)) ** 0.5))
        q, k, v = (rng.standard_normal((B, H, N, D), dtype=np.float32) for _ in range(3))
        call = prepare_attention(q, k, v)
        out, lse = np.empty_like(q), np.empty((B, H, N), np.float32)
        attention.attention_forward(out, lse, call)
        grads = attention.StructuredGrads(None, None, None, None)
        dq, dk, dv = np.empty_like(q), np.empty_like(k), np.empty_like(v)
        kernel = attention._backward_tasks if backward else attention._forward_tasks

        def launch(threads):
            # The launchers pick their threads (and tile split) by size: a grain of 1 makes
            # them take all threads, an infinite one run serial.
            grain = kernel.grain
            kernel.grain = 1 if threads > 1 else float("inf")
            try:
                if backward:
                    attention.attention_backward(dq, dk, dv, grads, out, out, lse, call)
                else:
                    attention.attention_forward(out, lse, call)
            finally:
                kernel.grain = grain
        return kernel, launch
    return make


def _adam_many(n, rng, size=1024):
    """n elements in parameters of ``size`` elements, updated in one launch."""
    params = [rng.standard_normal(size, dtype=np.float32) for _ in range(max(1, n // size))]
    many = AdamManyParameters(params, [np.zeros_like(p) for p in params],
                              [np.ones_like(p) for p in params])
    grads = [rng.standard_normal(size, dtype=np.float32) for _ in params]
    many.step(grads, step=1, lr=1e-3)  # fills the gradients' column of the address table
    kernel = optimizers._adam_update_many
    return kernel, lambda threads: kernel.run(
        threads, many.pieces, many.addresses, many.sizes, many.like, many.elements, 1e-3, 0.9,
        0.999, 1e-8, 0.01, True, 0.1, 0.001, 1.0)


def _short_attention(backward):
    def make(n, rng, B=16, H=4, D=8):
        """n multiply-adds of q k^T: B H N N D, with the many short (batch, head) tasks of a
        small model."""
        N = max(1, int((n / (B * H * D)) ** 0.5))
        q, k, v = (rng.standard_normal((B, H, N, D), dtype=np.float32) for _ in range(3))
        call = prepare_attention(q, k, v)
        out, lse = np.empty_like(q), np.empty((B, H, N), np.float32)
        attention_small.attention_forward(out, lse, call)
        dq, dk, dv = np.empty_like(q), np.empty_like(k), np.empty_like(v)
        mods = attention_small._mods(call)
        scale = np.float32(call.scale)
        if backward:
            kernel = attention_small._backward_tasks
            return kernel, lambda threads: kernel.run(threads, dq, dk, dv, out, out, lse, q, k,
                                                      v, scale, *mods)
        kernel = attention_small._forward_tasks
        return kernel, lambda threads: kernel.run(threads, out, lse, q, k, v, scale, *mods)
    return make


FAMILIES = {
    "add": _pointwise(elementwise._add_same_size, 2),
    "add_into": _pointwise(elementwise.add_into, 1),
    "gelu": _gelu,
    "dropout": _dropout,
    "adam": _adam,
    "adam_many": _adam_many,
    "layer_norm": _layer_norm_forward,
    "layer_norm_backward": _layer_norm_backward,
    "sum_over_rows": _sum_over_rows,
    "split_heads": _split_heads,
    "linear": _linear(backward=False),
    "linear_backward": _linear(backward=True),
    "attention": _attention(backward=False),
    "attention_backward": _attention(backward=True),
    "attention_short": _short_attention(backward=False),
    "attention_short_backward": _short_attention(backward=True),
}


def fastest_us(launch, threads, repeats):
    launch(threads)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        launch(threads)
        best = min(best, time.perf_counter() - start)
    return best * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", choices=list(FAMILIES), default=list(FAMILIES))
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--largest", type=int, default=1 << 22, help="largest work size")
    args = parser.parse_args()
    threads = numba.get_num_threads()
    rng = np.random.default_rng(0)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"{threads} Numba threads, BLAS {LIBRARY}; 1-min load average "
          f"{os.getloadavg()[0]:.1f}; fastest of {args.repeats} launches, microseconds")
    for name in args.families:
        print(f"\n{name}: work size, serial us, parallel us, serial / parallel")
        n = 1 << 10
        while n <= args.largest:
            kernel, launch = FAMILIES[name](n, rng)
            # Alternate the two, so that load from other users falls on both alike.
            serial, parallel = float("inf"), float("inf")
            for _ in range(3):
                serial = min(serial, fastest_us(launch, 1, args.repeats))
                parallel = min(parallel, fastest_us(launch, threads, args.repeats))
            mark = "  <- 2 x grain" if n == 2 * kernel.grain else ""
            print(f"  {n:9d} {serial:10.1f} {parallel:10.1f} {serial / parallel:6.2f}{mark}",
                  flush=True)
            n *= 2


if __name__ == "__main__":
    main()
