"""Training on the GPU (the CUDA simulator in CI) at tiny shapes: one fit step of an N -> N
model, the whole step on the device (forward, loss, backward, clipping, AdamW), against the
same step on the CPU; and cached generation of an N -> N' model on the device. The loss,
pooling and optimizer kernels are compared one by one in their own tests; the simulator runs
every GPU thread in Python, so a decoder training step (90 s) is left to real-GPU runs."""
import numpy as np
import pytest

from seqattn.models import Seq2SeqConfig, Seq2SeqModel, TokenModel, TokenModelConfig, generate
from seqattn.train import AdamW, CrossEntropyLoss, MSELoss, fit

pytestmark = pytest.mark.slow  # minutes in all: the file runs first (tests/conftest.py)

RNG = np.random.default_rng(0)
TINY = dict(d_model=4, nhead=2, num_layers=1, dim_feedforward=4, max_len=4, dtype="float64")


def _token_task():
    model = TokenModel(TokenModelConfig(in_features=2, out_features=1, **TINY))
    return model, MSELoss(skip_nan=True), (RNG.normal(size=(2, 3, 2)), RNG.normal(size=(2, 3, 1)))


def _seq2seq_task():
    model = Seq2SeqModel(Seq2SeqConfig(vocab_size=5, target_vocab_size=5, num_decoder_layers=1,
                                       **TINY))
    return model, CrossEntropyLoss(label_smoothing=0.1), (RNG.integers(1, 5, size=(2, 3)),
                                                         RNG.integers(1, 5, size=(2, 2)))


def _one_step(task, device):
    model, loss, data = task()
    model.to(device)
    fit(model, loss, AdamW(model, lr=1e-2), data, epochs=1, batch_size=2, clip_grad_norm=0.1,
        progress=False)
    return model, data


def _same_weights(gpu, cpu):
    # atol: the key bias gets a gradient that is zero up to rounding (softmax ignores a shift
    # common to all keys), and Adam's first step turns that noise into updates of ~1e-12.
    for name, value in cpu.state_dict().items():
        np.testing.assert_allclose(gpu.state_dict()[name], value, rtol=1e-9, atol=1e-10,
                                   err_msg=name)


def test_token_model_step_on_cuda_matches_cpu():
    state = RNG.bit_generator.state
    cpu, _ = _one_step(_token_task, "cpu")
    RNG.bit_generator.state = state
    gpu, _ = _one_step(_token_task, "cuda")
    _same_weights(gpu, cpu)


def test_cached_generation_on_cuda_matches_cpu():
    from numba import cuda

    model, _, (src, _) = _seq2seq_task()
    ids, logits = generate(model, src, 2, return_logits=True)
    gpu_ids, gpu_logits = generate(model.to("cuda"), cuda.to_device(src), 2, return_logits=True)
    np.testing.assert_array_equal(gpu_ids, ids)
    np.testing.assert_allclose(gpu_logits, logits, rtol=1e-9, atol=1e-12)
