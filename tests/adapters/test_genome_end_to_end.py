"""Genomes on the library's one path: sequences -> GenomeAdapter -> model -> fit -> predict
back on the positions -> seqattn.save/load -> the same predictions; strand symmetry; training
batches on the reverse strand; a 32,768-base training step within a memory bound."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import seqattn
from gradcheck import check_module_gradients
from genome_helpers import encoded, random_sequences
from seqattn.adapters import GenomeAdapter
from seqattn.adapters.genome_batches import reversal_order
from seqattn.models import (SequenceModel, SequenceModelConfig, StrandSymmetric, TokenModel,
                            TokenModelConfig, build)
from seqattn.readers import dna_codes, from_sequences
from seqattn.train import AdamW, CrossEntropyLoss, MSELoss, fit
from train_tasks import one_numba_thread  # noqa: F401  (tiny shapes run faster on one thread)

SMALL = dict(d_model=16, nhead=2, num_layers=1, dim_feedforward=32, max_len=64)


def inputs_of(adapter, **config):
    if adapter.tokens == "ids":
        return dict(vocab_size=adapter.vocab_size, **config)
    return dict(in_features=adapter.in_features, **config)


def test_sequences_fit_predict_save_load_predict_identical(tmp_path):
    sequences = random_sequences(48, 24, ragged=True)
    ds = from_sequences(sequences)
    ds["motif"] = ("record", [int("GA" * 2 in s or "TC" * 2 in s) for s in sequences.values()])
    adapter = GenomeAdapter(tokens="ids", k=3).fit(ds, targets="motif")
    model = StrandSymmetric(build(adapter.model_config(task="classification", **SMALL)),
                            adapter.complement)
    history = fit(model, CrossEntropyLoss(), AdamW(model, lr=1e-2),
                  adapter.batches(ds, batch_size=16, shuffle=True, reverse_complement=True),
                  epochs=4, progress=False)
    assert history["loss"][-1] < history["loss"][0], history["loss"]

    before = seqattn.predict(model, ds, adapter)
    assert before["motif"].dims == ("record",)
    assert before["motif_probability"].dims == ("record", "class")
    assert before["class"].values.tolist() == [0, 1]
    assert before["record"].values.tolist() == list(sequences)
    np.testing.assert_array_equal(before["start"], [1000 * i for i in range(48)])
    seqattn.save(model, tmp_path / "model")
    seqattn.save(adapter, tmp_path / "adapter")
    loaded_model = seqattn.load(tmp_path / "model")
    loaded_adapter = seqattn.load(tmp_path / "adapter")
    assert loaded_adapter.to_dict() == adapter.to_dict()
    after = seqattn.predict(loaded_model, ds, loaded_adapter)
    xr.testing.assert_identical(after, before)


def test_per_base_predictions_come_back_on_the_genomic_positions():
    sequences = random_sequences(3, 20, ragged=True)
    ds = from_sequences(sequences)
    adapter = GenomeAdapter(tokens="onehot").fit(ds)
    model = TokenModel(TokenModelConfig(**inputs_of(adapter, **SMALL), out_features=1))
    result = seqattn.predict(model, ds, adapter)["prediction"].isel(output=0)
    assert result.dims == ("record", "position")
    batch = adapter.encode(ds)
    model.eval()
    by_hand = model(batch.tokens, batch.key_padding_mask)[..., 0]
    for i, s in enumerate(sequences.values()):
        np.testing.assert_allclose(result.values[i, : len(s)], by_hand[i, : len(s)], rtol=1e-6)
        assert np.isnan(result.values[i, len(s):]).all()
    np.testing.assert_array_equal(result["genomic_position"].values[0, :3],
                                  ds["start"].values[0] + np.arange(3))


def aligned(forward_out, reverse_out, forward, reverse):
    """Outputs for a batch and for its reverse complement, per-token ones read in the forward
    strand's order (unpadded tokens only)."""
    if forward_out.ndim == 2:
        return forward_out, reverse_out
    order = reversal_order((~reverse.key_padding_mask).sum(axis=1),
                                  reverse_out.shape[1], np.ones(len(reverse_out), bool))
    reverse_out = reverse_out[np.arange(len(reverse_out))[:, None], order]
    return forward_out[~forward.key_padding_mask], reverse_out[~forward.key_padding_mask]


@pytest.mark.parametrize("tokens,k,model_class", [("ids", 3, SequenceModel),
                                                  ("onehot", 1, SequenceModel),
                                                  ("onehot", 1, TokenModel),
                                                  ("ids", 2, TokenModel)])
def test_strand_symmetric_predictions_equal_on_the_reverse_complement(tokens, k, model_class):
    adapter = GenomeAdapter(tokens=tokens, k=k)
    config_class = SequenceModelConfig if model_class is SequenceModel else TokenModelConfig
    base = model_class(config_class(**inputs_of(adapter, **SMALL), positions="sinusoidal")).eval()
    model = StrandSymmetric(base, adapter.complement).eval()
    sequences = list(random_sequences(4, 16, ragged=True).values())
    forward = encoded(adapter, sequences)
    reverse = encoded(adapter, [dna_codes.reverse_complement(s) for s in sequences])

    def outputs(m):
        return aligned(m(forward.tokens, forward.key_padding_mask),
                       m(reverse.tokens, reverse.key_padding_mask), forward, reverse)

    np.testing.assert_allclose(*outputs(model), rtol=1e-6, atol=1e-6)
    assert not np.allclose(*outputs(base), atol=1e-4)  # what the wrapper corrects


def test_strand_symmetric_gradients_match_finite_differences():
    adapter = GenomeAdapter(tokens="onehot")
    config = SequenceModelConfig(in_features=4, d_model=8, nhead=2, num_layers=1,
                                 dim_feedforward=8, max_len=8, dtype="float64", out_features=2)
    model = StrandSymmetric(SequenceModel(config), adapter.complement)
    batch = encoded(adapter, ["ACGTTG", "GGA"])
    tokens = batch.tokens.astype(np.float64)
    check_module_gradients(model, lambda tokens: model(tokens, batch.key_padding_mask),
                           lambda d: {"tokens": model.backward(d)}, {"tokens": tokens})


def test_reverse_strand_batches_keep_per_base_targets_with_their_bases():
    sequences = random_sequences(8, 12, seed=3, ragged=True)
    ds = from_sequences(sequences)
    # target of a base: its own code (A=0 ... T=3), NaN past the record's end
    ds["base"] = ds["sequence"].where(ds["sequence"] != dna_codes.PAD).astype(float)
    adapter = GenomeAdapter(tokens="ids").fit(ds, targets="base")
    batches = adapter.batches(ds, batch_size=8, shuffle=False, reverse_complement=True)
    batch = next(batches.epoch(0))
    assert batch.targets.shape == batch.target_valid.shape == (*batch.tokens.shape, 1)
    y = batch.targets[..., 0]
    real = ~batch.key_padding_mask
    np.testing.assert_array_equal(~batch.target_valid[..., 0], batch.key_padding_mask)
    as_read = [bool((y[i][real[i]] == batch.tokens[i][real[i]]).all()) for i in range(8)]
    as_paired = [bool((y[i][real[i]] == adapter.complement[batch.tokens[i][real[i]]]).all())
                 for i in range(8)]
    # a sample on the reverse strand reads the complements of its bases, in reverse order
    assert all(a != b for a, b in zip(as_read, as_paired)) and any(as_read) and any(as_paired)
    batch = next(adapter.batches(ds, batch_size=8, shuffle=False).epoch(0))
    real = ~batch.key_padding_mask
    np.testing.assert_array_equal(batch.targets[..., 0][real], batch.tokens[real])


def test_per_base_training_decreases_the_loss():
    sequences = random_sequences(16, 16, seed=4)
    ds = from_sequences(sequences)
    ds["is_g"] = (ds["sequence"] % 16 == 2).astype(float)
    adapter = GenomeAdapter(tokens="onehot").fit(ds, targets="is_g")
    model = build(adapter.model_config(task="regression", **SMALL))
    assert isinstance(model, TokenModel)
    history = fit(model, MSELoss(skip_nan=True), AdamW(model, lr=1e-2),
                  adapter.batches(ds, batch_size=8, shuffle=True, reverse_complement=True),
                  epochs=4, progress=False)
    assert history["loss"][-1] < 0.5 * history["loss"][0], history["loss"]


LONG_STEP = textwrap.dedent("""
    import resource, sys
    import numpy as np
    from seqattn.adapters import GenomeAdapter
    from seqattn.models import TokenModel, TokenModelConfig
    from seqattn.readers import from_sequences
    from seqattn.train import AdamW, MSELoss

    adapter = GenomeAdapter(tokens="onehot")
    model = TokenModel(TokenModelConfig(in_features=4, d_model=16, nhead=2, num_layers=1,
                                        dim_feedforward=32, positions="alibi",
                                        window=(64, 64)))
    loss, optimizer = MSELoss(), AdamW(model, lr=1e-3)

    def step(length):
        rng = np.random.default_rng(0)
        ds = from_sequences("".join(rng.choice(list("ACGT"), length)))
        batch = adapter.fit(ds).encode(ds)
        target = np.zeros((1, length, 1), np.float32)
        optimizer.zero_grad()
        loss(model(batch.tokens, batch.key_padding_mask), target)
        model.backward(loss.backward())
        optimizer.step()

    step(512)  # compiles every kernel
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    step(int(sys.argv[1]))
    print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)
""")
LONG_MEMORY_BOUND_MB = 200  # measured 51 MB; one N x N score matrix of 32,768 bases is 4,096 MB


def test_a_32768_base_sequence_trains_one_step_within_a_memory_bound():
    root = Path(__file__).resolve().parent.parent.parent
    out = subprocess.run([sys.executable, "-c", LONG_STEP, "32768"], capture_output=True,
                         text=True, cwd=root, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(root)})
    assert out.returncode == 0, out.stderr[-2000:]
    grown_mb = float(out.stdout.split()[-1])
    assert grown_mb < LONG_MEMORY_BOUND_MB, grown_mb
