"""N -> N': the encoder-decoder (teacher forcing, gradients), generation with a key/value cache
against full recomputation, sampling, and learning to reverse a sequence."""
import numpy as np
import pytest

from gradcheck import check_module_gradients
from seqattn.models import Seq2SeqConfig, Seq2SeqModel, generate, rollout
from seqattn.train import Adam, CrossEntropyLoss, WarmupCosine, fit
from train_tasks import (REVERSE_LENGTH, REVERSE_SYMBOLS, one_numba_thread,  # noqa: F401
                         reversal)

RNG = np.random.default_rng(0)
SRC_IDS = RNG.integers(1, 9, size=(3, 6))
SRC = RNG.normal(size=(2, 5, 2))
MEMORY_PADDING = np.zeros((3, 6), bool)
MEMORY_PADDING[1, 4:] = True


def _discrete(norm_first=True, **overrides):
    config = dict(vocab_size=9, target_vocab_size=9, d_model=16, nhead=2, num_layers=1,
                  num_decoder_layers=2, dim_feedforward=16, dtype="float64", max_len=8)
    config.update(overrides)
    model = Seq2SeqModel(Seq2SeqConfig(**config))
    for layer in model.decoder.layers:
        layer.norm_first = norm_first
    return model


def _continuous():
    return Seq2SeqModel(Seq2SeqConfig(in_features=2, target_features=3, d_model=8, nhead=2,
                                      num_layers=1, num_decoder_layers=1, dim_feedforward=8,
                                      dtype="float64", max_len=8))


@pytest.mark.parametrize("norm_first", [True, False], ids=["pre_norm", "post_norm"])
def test_cached_generation_equals_full_recomputation(norm_first):
    model = _discrete(norm_first)
    ids, logits = generate(model, SRC_IDS, 5, key_padding_mask=MEMORY_PADDING,
                           return_logits=True)
    for t in range(5):
        prefix = np.zeros((3, t + 1), np.int64)
        prefix[:, :t] = ids[:, :t]
        full = model(SRC_IDS, prefix, key_padding_mask=MEMORY_PADDING)[:, t]
        np.testing.assert_allclose(logits[:, t], full, rtol=1e-10, atol=1e-12,
                                   err_msg=f"step {t}")
        np.testing.assert_array_equal(ids[:, t], full.argmax(-1))


def test_rollout_equals_full_recomputation():
    """Teacher forcing on the rollout's own outputs reproduces them position by position."""
    model = _continuous()
    forecast = rollout(model, SRC, 4)
    np.testing.assert_allclose(model(SRC, forecast), forecast, rtol=1e-10, atol=1e-12)


def test_sampling_is_seeded_and_temperature_sharpens():
    model = _discrete()
    a = generate(model, SRC_IDS, 6, temperature=1.0, seed=3)
    np.testing.assert_array_equal(a, generate(model, SRC_IDS, 6, temperature=1.0, seed=3))
    cold = generate(model, SRC_IDS, 6, temperature=1e-6, seed=4)
    np.testing.assert_array_equal(cold, generate(model, SRC_IDS, 6))


def test_seq2seq_gradients():
    model = _continuous()
    targets = RNG.normal(size=(2, 4, 3))
    check_module_gradients(model, lambda src, targets: model(src, targets),
                           lambda d: dict(zip(("src", "targets"), model.backward(d))),
                           {"src": SRC.copy(), "targets": targets})


def test_bad_targets_and_lengths_are_reported():
    with pytest.raises(ValueError, match=r"targets must be integer ids \(B, N'\)"):
        _discrete()(SRC_IDS, RNG.normal(size=(3, 4)))
    with pytest.raises(ValueError, match="steps = 9 exceeds the model's max_len = 8"):
        generate(_discrete(), SRC_IDS, 9)
    with pytest.raises(ValueError, match="use rollout"):
        generate(_continuous(), SRC, 2)


def test_encoder_decoder_learns_to_reverse_a_sequence():
    """N -> N' bar: greedy cached generation reproduces at least 95% of the reversed tokens of
    unseen sequences (chance: 1/8)."""
    V = REVERSE_SYMBOLS + 1
    model = Seq2SeqModel(Seq2SeqConfig(vocab_size=V, target_vocab_size=V, d_model=32, nhead=4,
                                       num_layers=1, num_decoder_layers=1, dim_feedforward=64,
                                       max_len=REVERSE_LENGTH))
    epochs, lr = 5, 1e-2
    fit(model, CrossEntropyLoss(), Adam(model, lr=lr), reversal(1024, 0), epochs=epochs,
        batch_size=32, schedule=WarmupCosine(lr, 20, epochs * 32), progress=False)
    src, reversed_src = reversal(256, 1)
    accuracy = (generate(model, src, REVERSE_LENGTH) == reversed_src).mean()
    assert accuracy >= 0.95, accuracy
