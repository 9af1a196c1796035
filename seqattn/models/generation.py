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
    """Token ids generated one step at a time by a :class:`~seqattn.models.Seq2SeqModel` with
    discrete targets, with a key/value cache (each step costs one token's work).

    Parameters
    ----------
    model : Seq2SeqModel
        A model with ``target_vocab_size``; it is left in evaluation mode.
    src : array (B, M, F) or int array (B, M)
        The source sequences.
    steps : int
        N', the number of tokens to generate.
    key_padding_mask : bool array (B, M), optional
        True where a source token is padding.
    coords : dict of str to array (B, M), optional
        The source's per-token coordinates, for a model that encodes them.
    temperature : float, default 0.0
        0 picks the most likely token; above 0 samples from softmax(logits / temperature).
    seed : int, optional
        Seed of the sampling generator.
    return_logits : bool, default False
        Also return the logits (B, steps, V) of every step.

    Returns
    -------
    ids : int array (B, steps)
        The generated tokens (host array), and the logits with ``return_logits``.
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
    """A forecast of continuous vectors, each step's prediction fed back as the next input,
    with a key/value cache (each step costs one token's work).

    Parameters
    ----------
    model : Seq2SeqModel
        A model with ``target_features``; it is left in evaluation mode.
    src : array (B, M, F)
        The source sequences (the history).
    steps : int
        N', the number of steps to forecast.
    key_padding_mask : bool array (B, M), optional
        True where a source token is padding.
    coords : dict of str to array (B, M), optional
        The source's per-token coordinates, for a model that encodes them.

    Returns
    -------
    forecast : array (B, steps, F')
        The predicted vectors (host array).
    """
    if model.discrete:
        raise ValueError("rollout is for continuous targets (target_features); use generate")
    cache = _start(model, src, steps, key_padding_mask, coords)
    x = model.start_tokens(int(src.shape[0]))
    outputs = []
    for t in range(steps):
        x = model.head(cache.step(model.embed_targets(x, t)))  # (B, 1, F'), stays on device
        outputs.append(moved(x, "cpu"))
    return np.concatenate(outputs, axis=1)
