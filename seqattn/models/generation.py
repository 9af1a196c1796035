"""Autoregressive generation from a trained :class:`Seq2SeqModel`, one position at a time with
a key/value cache: :func:`generate` for discrete tokens (greedy or sampled with a temperature),
:func:`rollout` for continuous vectors (each prediction is fed back as the next input)."""
import numpy as np

from ..nn.placement import moved
from .kv_cache import DecoderCache


def _start(model, src, steps, key_padding_mask, coords):
    if steps > model.config.max_len:
        raise ValueError(f"steps = {steps} exceeds the model's max_len = {model.config.max_len}")
    model.eval()
    memory = model.encoder(src, key_padding_mask, coords)
    return DecoderCache(model.decoder, memory, key_padding_mask, steps)


def _softmax(logits):
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def generate(model, src, steps, *, key_padding_mask=None, coords=None, temperature=0.0,
             seed=None, return_logits=False):
    """ids (B, steps) generated from src; ``temperature`` 0 picks the most likely token, above
    0 samples from softmax(logits / temperature) with a generator seeded by ``seed``.

    With ``return_logits`` also returns the logits (B, steps, V) of every step (host arrays).
    The model is left in evaluation mode.
    """
    if not model.discrete:
        raise ValueError("generate is for discrete targets (target_vocab_size); use rollout")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    rng = np.random.default_rng(seed)
    cache = _start(model, src, steps, key_padding_mask, coords)
    B = int(src.shape[0])
    tokens = model.start_tokens(B)
    ids, all_logits = [], []
    for t in range(steps):
        logits = moved(model.head(cache.step(model.embed_targets(tokens, t))), "cpu")[:, 0]
        if temperature == 0:
            chosen = logits.argmax(axis=-1)
        else:
            probs = _softmax(logits.astype(np.float64) / temperature)
            chosen = np.array([rng.choice(probs.shape[1], p=p) for p in probs])
        ids.append(chosen)
        all_logits.append(logits)
        tokens = moved(chosen.reshape(B, 1).astype(np.int64), model.device)
    ids = np.stack(ids, axis=1)
    return (ids, np.stack(all_logits, axis=1)) if return_logits else ids


def rollout(model, src, steps, *, key_padding_mask=None, coords=None):
    """(B, steps, F') forecast from src, each step's prediction fed back as the next input
    (host array); ``coords`` are the source's (see ``Seq2SeqModel``). The model is left in
    evaluation mode."""
    if model.discrete:
        raise ValueError("rollout is for continuous targets (target_features); use generate")
    cache = _start(model, src, steps, key_padding_mask, coords)
    x = model.start_tokens(int(src.shape[0]))
    outputs = []
    for t in range(steps):
        x = model.head(cache.step(model.embed_targets(x, t)))  # (B, 1, F'), stays on device
        outputs.append(moved(x, "cpu"))
    return np.concatenate(outputs, axis=1)
