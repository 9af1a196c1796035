"""The GPU check: one prepared run on the GPU machine (an H200; under 8 minutes) that checks the
CUDA path is right and measures how close it comes to the hardware.

1. correctness against seqattn's CPU kernels: attention forward and every gradient (dq, dk, dv,
   dbias) with causal masking, grouped-query heads, a bias and key padding, from the
   deterministic backward (the default) and the one with atomics; whether each gives the same
   bits when run again (the deterministic one must); one training step of an encoder model; and
   that a repeated training step allocates no device memory (the pool).
2. attention forward and backward TFLOP/s at B1 H8 N4096, D64 and D128, causal off and on, against
   torch's scaled_dot_product_attention in float32 with TF32 off, math and memory-efficient
   backends (neither uses tensor cores in float32 without TF32; seqattn has none to use); the
   deterministic backward against the one with atomics (``seqattn_atomic``).
3. GEMM TFLOP/s (seqattn's gemm: cuBLAS when installed; the numba kernel) against torch.matmul.
4. the encoder training step (benchmarks/encoder.py's model) against torch on the GPU.
5. registers and local memory per thread of every kernel this run compiled.

    python benchmarks/gpu_check.py                 # on the GPU machine; --out results.json
    python benchmarks/gpu_check.py --dry-run       # tiny shapes on the CUDA simulator, no GPU

Timings are medians of rounds that alternate between contenders, after a warm-up round
(compilation is not counted). FLOPs count as FlashAttention does (4 B H N M D forward, 2.5x that
backward, halved when causal) and 2 M N K for a GEMM.
"""
import argparse
import json
import os
import platform
import sys
import time

import numpy as np

H200_FP32_PEAK_TFLOPS = 66.9  # CUDA cores, float32 FMA; the figure


# numba.cuda is the simulator or the real driver from its first import on: decide before it.
if "--dry-run" in sys.argv[1:]:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"

import torch  # noqa: E402  (imported before Numba starts its threads, as benchmarks/ do)
from numba import cuda  # noqa: E402

import seqattn  # noqa: E402
from seqattn.backend import use_memory_pool  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attention import attention_flops, interleaved_medians, timed  # noqa: E402
import encoder as encoder_benchmark  # noqa: E402


# --- shapes -------------------------------------------------------------------------------

class Shapes:
    """The run's sizes: the issue's on a GPU, tiny ones for the simulator."""

    def __init__(self, dry_run, repeats):
        if dry_run:
            self.check_attention = dict(B=1, H=2, Hkv=1, N=5, M=6, D=4)
            # One head: one block per kernel launch, the simulator's unit of cost.
            self.bench_attention = [dict(B=1, H=1, N=8, D=D) for D in (4, 8)]
            self.gemms = [(8, 8, 8)]
            self.encoder = dict(layers=1, d_model=8, heads=2, ffn=16, batch=2, n=4)
            self.repeats = 1
            # The simulator compiles nothing: a warm-up round would only run everything twice.
            self.warmup = False
        else:
            self.check_attention = dict(B=2, H=8, Hkv=2, N=333, M=400, D=64)
            self.bench_attention = [dict(B=1, H=8, N=4096, D=D) for D in (64, 128)]
            self.gemms = [(4096, 4096, 4096), (8192, 1024, 256), (8192, 256, 1024)]
            self.encoder = dict(layers=4, d_model=256, heads=8, ffn=1024, batch=8, n=1024)
            self.repeats = repeats
            self.warmup = True


def sync_all():
    cuda.synchronize()
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def torch_device():
    return "cuda" if torch.cuda.is_available() else "cpu"


# --- 1. correctness -------------------------------------------------------------------------

def relative_error(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.abs(got - want).max(initial=0.0) / max(np.abs(want).max(initial=0.0), 1e-30))


def attention_inputs(rng, B, H, Hkv, N, M, D):
    q = rng.standard_normal((B, H, N, D)).astype(np.float32)
    k, v = (rng.standard_normal((B, Hkv, M, D)).astype(np.float32) for _ in range(2))
    padding = rng.random((B, M)) < 0.2
    padding[:, -1] = False
    options = dict(causal=True, key_padding_mask=padding,
                   bias=rng.standard_normal((1, H, N, M)).astype(np.float32))
    return (q, k, v), options


def check_attention(shape):
    """GPU against CPU: out and every gradient, float32, all options at once, from both
    backwards; and whether each repeats bit for bit (deterministic=True must)."""
    rng = np.random.default_rng(0)
    (q, k, v), options = attention_inputs(rng, **shape)
    dout = rng.standard_normal(q.shape).astype(np.float32)

    def run(move, deterministic=True):
        qkv = [move(x) for x in (q, k, v)]
        opts = {n: move(x) if isinstance(x, np.ndarray) else x for n, x in options.items()}
        out, lse = seqattn.attention(*qkv, return_lse=True, **opts)
        grads = seqattn.attention_backward(move(dout), *qkv, out, lse, bias_requires_grad=True,
                                           deterministic=deterministic, **opts)
        host = lambda x: x.copy_to_host() if hasattr(x, "copy_to_host") else x  # noqa: E731
        return dict(zip(("out", "dq", "dk", "dv", "dbias"), map(host, (out, *grads))))

    cpu = run(lambda x: x)
    errors, repeats = {}, {}
    for mode, deterministic in (("deterministic", True), ("atomic", False)):
        first, second = (run(cuda.to_device, deterministic) for _ in range(2))
        errors[mode] = {name: relative_error(first[name], cpu[name]) for name in cpu}
        repeats[mode] = {name: bool(np.array_equal(first[name], second[name]))
                         for name in first}
    ok = (all(e < 1e-4 for mode in errors.values() for e in mode.values())
          and all(repeats["deterministic"].values()))
    return {"shape": shape, "options": "causal, GQA, bias (1, H, N, M), key padding",
            "max_relative_error": errors["deterministic"],
            "max_relative_error_atomic": errors["atomic"],
            "same_bits_when_repeated": repeats, "ok": ok}


def encoder_task(shape, device, seed=0):
    from seqattn.models import TokenModel, TokenModelConfig
    from seqattn.train import SGD, MSELoss

    rng = np.random.default_rng(seed)
    config = TokenModelConfig(in_features=4, out_features=2, d_model=shape["d_model"],
                              nhead=shape["heads"], num_layers=shape["layers"],
                              dim_feedforward=shape["ffn"], max_len=shape["n"], dtype="float32")
    data = (rng.normal(size=(shape["batch"], shape["n"], 4)).astype(np.float32),
            rng.normal(size=(shape["batch"], shape["n"], 2)).astype(np.float32))
    model = TokenModel(config).to(device)
    # SGD, not Adam: Adam divides by the gradient's size, which turns the rounding noise of a
    # gradient that is zero in exact arithmetic (the key bias: softmax ignores a common shift)
    # into full-size steps of random sign.
    return model, MSELoss(), SGD(model, lr=1e-2), data


def check_training_step(shape):
    """One fit step (forward, loss, backward, clipping, SGD) on the GPU against the CPU, compared
    by the parameter updates, relative to the largest update of any parameter; then two more GPU
    steps, of which the second must make no driver allocation once the pool is warm."""
    from seqattn.train import fit

    results, updates = {}, {}
    for device in ("cpu", "cuda"):
        model, loss, optimizer, data = encoder_task(shape, device)
        before = model.state_dict()
        fit(model, loss, optimizer, data, epochs=1, batch_size=shape["batch"], shuffle=False,
            clip_grad_norm=1.0, progress=False)
        results[device] = (model, loss, optimizer, data)
        updates[device] = {name: np.asarray(value, np.float64) - before[name]
                           for name, value in model.state_dict().items()}
    scale = max(np.abs(u).max(initial=0.0) for u in updates["cpu"].values())
    errors = {name: float(np.abs(updates["cuda"][name] - u).max(initial=0.0) / scale)
              for name, u in updates["cpu"].items()}
    report = {"worst_parameter": max(errors, key=errors.get),
              "max_update_error_relative_to_largest_update": max(errors.values()),
              "ok": max(errors.values()) < 1e-3}
    pool = getattr(getattr(cuda.current_context(), "memory_manager", None), "pool", None)
    if pool is not None:
        model, loss, optimizer, data = results["cuda"]
        fit(model, loss, optimizer, data, epochs=1, batch_size=shape["batch"], shuffle=False,
            clip_grad_norm=1.0, progress=False)
        sync_all()
        before = pool.driver_allocations
        fit(model, loss, optimizer, data, epochs=1, batch_size=shape["batch"], shuffle=False,
            clip_grad_norm=1.0, progress=False)
        sync_all()
        report["driver_allocations_in_a_warm_step"] = pool.driver_allocations - before
        report["pool_cached_bytes"] = pool.cached_bytes
    else:
        report["driver_allocations_in_a_warm_step"] = "no pool (simulator)"
    return report


# --- 2. attention throughput ----------------------------------------------------------------

def torch_sdpa_contenders(q, k, v, dout, causal):
    """{name: (forward, forward + backward)} for torch's float32 SDPA backends."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention

    tq, tk, tv = (torch.from_numpy(x).to(torch_device()).requires_grad_() for x in (q, k, v))
    tdout = torch.from_numpy(dout).to(torch_device())
    backends = {"torch_math": SDPBackend.MATH}
    if torch.cuda.is_available():
        backends["torch_efficient"] = SDPBackend.EFFICIENT_ATTENTION
    contenders = {}
    for name, backend in backends.items():
        def forward(backend=backend):
            with sdpa_kernel(backend):
                return scaled_dot_product_attention(tq, tk, tv, is_causal=causal)

        def forward_backward(forward=forward):
            forward().backward(tdout)

        contenders[name] = (forward, forward_backward)
    return contenders


def bench_attention(shape, causal, repeats, warmup):
    """Forward and forward + backward TFLOP/s of each contender; backward alone is derived as
    the backward FLOPs over the difference of the two medians."""
    B, H, N, D = shape["B"], shape["H"], shape["N"], shape["D"]
    rng = np.random.default_rng(1)
    q, k, v, dout = (rng.standard_normal((B, H, N, D)).astype(np.float32) for _ in range(4))
    dq_, dk_, dv_, ddout = (cuda.to_device(x) for x in (q, k, v, dout))

    def ours_forward():
        return seqattn.attention(dq_, dk_, dv_, causal=causal, return_lse=True)

    def ours_forward_backward(deterministic=True):
        out, lse = ours_forward()
        seqattn.attention_backward(ddout, dq_, dk_, dv_, out, lse, causal=causal,
                                   deterministic=deterministic)

    contenders = {"seqattn": (ours_forward, ours_forward_backward),
                  "seqattn_atomic": (ours_forward,
                                     lambda: ours_forward_backward(deterministic=False)),
                  **torch_sdpa_contenders(q, k, v, dout, causal)}
    seconds = {}
    for phase, index in (("forward", 0), ("forward_backward", 1)):
        timers = {name: (lambda fn=fns[index]: timed(fn, sync_all))
                  for name, fns in contenders.items()}
        seconds[phase] = interleaved_medians(timers, repeats, warmup)
    forward_flops = attention_flops(B, H, N, N, D, causal)
    backward_flops = attention_flops(B, H, N, N, D, causal, backward=True)
    results = {}
    for name in contenders:
        forward, both = seconds["forward"][name], seconds["forward_backward"][name]
        results[f"{name}_forward_tflops"] = forward_flops / forward / 1e12
        results[f"{name}_forward_backward_tflops"] = (forward_flops + backward_flops) / both / 1e12
        results[f"{name}_backward_tflops"] = backward_flops / max(both - forward, 1e-12) / 1e12
    results["seqattn_forward_percent_of_fp32_peak"] = (
        100 * results["seqattn_forward_tflops"] / H200_FP32_PEAK_TFLOPS)
    # > 1: the deterministic backward (default) is that much slower than the one with atomics.
    results["seqattn_backward_time_deterministic_over_atomic"] = (
        results["seqattn_atomic_backward_tflops"] / results["seqattn_backward_tflops"])
    return {"shape": dict(shape, causal=causal), **results}


# --- 3. GEMM throughput ---------------------------------------------------------------------

def bench_gemm(M, N, K, repeats, warmup):
    from seqattn.kernels.cuda.gemm import gemm, gemm_backend
    from seqattn.kernels.cuda.sgemm import sgemm

    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N))
    b = b.astype(np.float32)
    da, db, dc = cuda.to_device(a), cuda.to_device(b), cuda.device_array((M, N), np.float32)
    ta, tb = (torch.from_numpy(x).to(torch_device()) for x in (a, b))
    timers = {
        "seqattn_gemm": lambda: timed(lambda: gemm(dc, da, db, False, False, False), sync_all),
        "numba_sgemm": lambda: timed(lambda: sgemm(dc, da, db, False, False, False), sync_all),
        "torch_matmul": lambda: timed(lambda: torch.matmul(ta, tb), sync_all),
    }
    seconds = interleaved_medians(timers, repeats, warmup)
    gemm(dc, da, db, False, False, False)
    error = relative_error(dc.copy_to_host(), a.astype(np.float64) @ b)
    return {"shape": (M, N, K), "seqattn_gemm_uses": gemm_backend(dc, da, db),
            "max_relative_error": error,
            **{f"{name}_tflops": 2 * M * N * K / s / 1e12 for name, s in seconds.items()}}


# --- 4. encoder -----------------------------------------------------------------------------

def bench_encoder(shape, repeats, warmup):
    args = argparse.Namespace(**shape)
    ours = encoder_benchmark.build(args).train()
    theirs = encoder_benchmark.torch_twin(ours, args, torch_device())
    rng = np.random.default_rng(3)
    x = rng.normal(size=(shape["batch"], shape["n"], shape["d_model"])).astype(np.float32)
    dout = rng.normal(size=x.shape).astype(np.float32)
    ours.to("cuda")
    x_ours, dout_ours = cuda.to_device(x), cuda.to_device(dout)
    x_torch = torch.from_numpy(x).to(torch_device()).requires_grad_()
    dout_torch = torch.from_numpy(dout).to(torch_device())

    def step_ours():
        ours(x_ours, is_causal=False)
        ours.backward(dout_ours)

    def step_torch():
        theirs(x_torch).backward(dout_torch)

    ours_time, torch_time = encoder_benchmark.step_seconds(
        [(step_ours, sync_all), (step_torch, sync_all)], repeats, warmup)
    tokens = shape["batch"] * shape["n"]
    return {"shape": shape, "seqattn_tokens_per_s": tokens / ours_time[0],
            "torch_tokens_per_s": tokens / torch_time[0],
            "ratio_seqattn_over_torch": torch_time[0] / ours_time[0]}


# --- 5. registers ---------------------------------------------------------------------------

def kernel_registers():
    """Registers and local memory (spills, local arrays) per thread of every kernel compiled in
    this process, as the driver reports them."""
    import gc

    from numba.cuda.dispatcher import CUDADispatcher

    rows = []
    for dispatcher in (o for o in gc.get_objects() if isinstance(o, CUDADispatcher)):
        if dispatcher.targetoptions.get("device"):
            continue
        for argtypes, kernel in dispatcher.overloads.items():
            function = dispatcher.py_func
            rows.append({"kernel": f"{function.__module__}.{function.__name__}",
                         "signature": ", ".join(map(str, argtypes)),
                         "registers": kernel.regs_per_thread,
                         "local_bytes": kernel.local_mem_per_thread})
    return sorted(rows, key=lambda r: -r["registers"])


# --- the run ------------------------------------------------------------------------------

def section(title, fn, results, key):
    start = time.perf_counter()
    print(f"\n== {title}", flush=True)
    results[key] = fn()
    print(json.dumps(results[key], indent=1, default=str), flush=True)
    print(f"({time.perf_counter() - start:.1f} s)", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true",
                        help="tiny shapes under the CUDA simulator: checks that the script runs")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args(argv)
    shapes = Shapes(args.dry_run, args.repeats)
    if not args.dry_run:
        if not cuda.is_available():
            sys.exit("no CUDA GPU here; use --dry-run to check the script on the simulator")
        use_memory_pool()  # before numba's first CUDA call: the context takes its manager then
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "CUDA simulator"
    results = {"device": device, "dry_run": args.dry_run, "torch": torch.__version__,
               "host": platform.processor() or platform.machine(),
               "load_average": os.getloadavg()[0]}
    print(f"gpu_check on {device}; torch {torch.__version__}; TF32 off; float32")
    section("attention correctness (GPU vs CPU kernels)",
            lambda: check_attention(shapes.check_attention), results, "attention_check")
    section("one encoder training step (GPU vs CPU), and the memory pool",
            lambda: check_training_step(shapes.encoder), results, "training_step_check")
    timing = (shapes.repeats, shapes.warmup)
    section("attention TFLOP/s", lambda: [bench_attention(s, causal, *timing)
                                          for s in shapes.bench_attention
                                          for causal in (False, True)],
            results, "attention_bench")
    section("GEMM TFLOP/s", lambda: [bench_gemm(*mnk, *timing) for mnk in shapes.gemms],
            results, "gemm_bench")
    section("encoder forward+backward", lambda: bench_encoder(shapes.encoder, *timing),
            results, "encoder_bench")
    if args.dry_run:
        results["registers"] = "not available under the simulator"
    else:
        section("registers per kernel", kernel_registers, results, "registers")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1, default=str)
    checks = (results["attention_check"]["ok"], results["training_step_check"]["ok"])
    print("\ncorrectness:", "ok" if all(checks) else "FAILED")
    return 0 if all(checks) else 1


if __name__ == "__main__":
    sys.exit(main())
