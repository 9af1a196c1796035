"""GenomeAdapter on the adapter protocol: readers first, fit before use, targets as values or
classes (per record or per base), sizes from the adapter, decode and predict back on the
records' coordinates, records with nothing to read from predicting nothing."""
import numpy as np
import pytest

import seqattn
from seqattn.adapters import GenomeAdapter
from seqattn.adapters.genome_variants import variant_windows
from seqattn.data.protocol import NotFittedError
from seqattn.data.targets import MISSING_CLASS
from seqattn.models import SequenceModelConfig, TokenModelConfig
from seqattn.readers import from_sequences

RECORDS = {"a": "ACGT", "b": "GGNNC", "c": "TTA", "d": "CAGTA"}


def labelled(gap=False):
    """RECORDS with three targets; with `gap` a fifth record of only N (an "other", 1.0)."""
    ds = from_sequences({**RECORDS, "gap": "NNNN"} if gap else RECORDS)
    kind, count = ["enhancer", "promoter", "enhancer", "other"], [3, 1, 3, 2]
    signal = [0.5, -1.0, np.nan, 2.0]
    if gap:
        kind, count, signal = kind + ["other"], count + [2], signal + [1.0]
    ds["kind"] = ("record", np.array(kind, object))
    ds["count"] = ("record", np.array(count, np.int64))
    ds["signal"] = ("record", np.array(signal), {"units": "log2 fold"})
    return ds


def test_strings_are_refused_with_the_reader_to_use():
    ds = labelled()
    adapter = GenomeAdapter().fit(ds)
    calls = {"encode": lambda: adapter.encode(["ACGT"]), "batches": lambda: adapter.batches("AC"),
             "predict": lambda: adapter.predict(None, ["ACGT"]),
             "fit": lambda: adapter.fit(["ACGT"])}
    for name, call in calls.items():
        with pytest.raises(TypeError, match=rf"GenomeAdapter.{name} takes the genome "
                                            r"xarray.Dataset, got a (list|str); build it with a "
                                            r"reader: seqattn.readers.from_sequences\(strings\)"):
            call()


@pytest.mark.parametrize("call", ["encode", "batches", "model_config", "predict"])
def test_calls_before_fit_say_to_fit_first(call):
    ds = labelled()
    calls = {"encode": lambda a: a.encode(ds), "batches": lambda a: a.batches(ds),
             "model_config": lambda a: a.model_config(task="classification"),
             "predict": lambda a: a.predict(None, ds)}
    with pytest.raises(NotFittedError, match=f"GenomeAdapter.{call} needs .*adapter.fit"):
        calls[call](GenomeAdapter())


def test_integer_and_text_labels_are_classes_floats_are_values():
    ds = labelled()
    batch = GenomeAdapter().fit(ds, targets="count").encode(ds)
    np.testing.assert_array_equal(batch.targets, [2, 0, 2, 1])  # classes (1, 2, 3)
    batch = GenomeAdapter().fit(ds, targets="kind").encode(ds)
    np.testing.assert_array_equal(batch.targets, [0, 2, 0, 1])  # enhancer, other, promoter
    batch = GenomeAdapter().fit(ds, targets="signal").encode(ds)
    np.testing.assert_array_equal(batch.targets[:, 0], [0.5, -1.0, 0.0, 2.0])
    np.testing.assert_array_equal(batch.target_valid[:, 0], [True, True, False, True])


def test_per_base_classes_are_missing_past_each_record_end():
    ds = from_sequences(RECORDS)
    ds["is_g"] = ds["sequence"] % 16 == 2  # bool: classes False, True
    adapter = GenomeAdapter(tokens="ids").fit(ds, targets="is_g")
    assert adapter.target_specs[0].classes == (False, True)
    batch = adapter.encode(ds)
    np.testing.assert_array_equal(batch.targets[2], [0, 0, 0, MISSING_CLASS, MISSING_CLASS])
    np.testing.assert_array_equal(batch.targets[1], [1, 1, 0, 0, 0])
    assert isinstance(adapter.model_config(task="classification"), TokenModelConfig)


def test_model_config_takes_its_sizes_from_the_adapter_and_targets():
    ds = labelled()
    config = GenomeAdapter(tokens="ids", k=3).fit(ds, targets="kind").model_config(
        task="classification", d_model=8)
    assert isinstance(config, SequenceModelConfig)
    assert (config.vocab_size, config.in_features, config.out_features, config.d_model) == \
        (65, None, 3, 8)
    config = GenomeAdapter(ambiguous="token").fit(ds, targets="signal").model_config(
        task="regression")
    assert (config.in_features, config.vocab_size, config.out_features) == (5, None, 1)
    with pytest.raises(ValueError, match="task='classification', but target 'signal' holds "
                                         "values"):
        GenomeAdapter().fit(ds, targets="signal").model_config(task="classification")
    with pytest.raises(ValueError, match="out_features=2, but this adapter's batches need "
                                         "out_features=3"):
        GenomeAdapter().fit(ds, targets="kind").model_config(task="classification",
                                                             out_features=2)
    long = from_sequences({"long": "ACGT" * 200})
    long["y"] = ("record", [1.0])
    assert GenomeAdapter().fit(long, targets="y").model_config(task="regression").max_len >= 800


def logits_model(logits):
    """An N -> 1 'model' returning fixed logits per record, whatever the tokens."""
    def model(tokens, key_padding_mask):
        return np.repeat(np.asarray(logits, np.float32)[None], len(tokens), axis=0)
    return model


def test_class_predictions_are_labels_with_probabilities_and_none_for_an_all_n_record():
    ds = labelled(gap=True)
    adapter = GenomeAdapter().fit(ds, targets="kind", where=ds.record != "gap")
    out = seqattn.predict(logits_model([0.0, 2.0, 1.0]), ds, adapter)
    assert out["kind"].values[:4].tolist() == ["other"] * 4
    assert out["kind"].isnull().values.tolist() == [False] * 4 + [True]
    probability = out["kind_probability"]
    assert probability.dims == ("record", "class")
    assert probability["class"].values.tolist() == ["enhancer", "other", "promoter"]
    expected = np.exp([0.0, 2.0, 1.0]) / np.exp([0.0, 2.0, 1.0]).sum()
    np.testing.assert_allclose(probability.values[:4], np.tile(expected, (4, 1)), rtol=1e-6)
    assert np.isnan(probability.values[4]).all()


def test_value_predictions_keep_units_and_an_all_n_record_is_nan():
    ds = labelled(gap=True)
    adapter = GenomeAdapter().fit(ds, targets="signal")
    out = adapter.predict(logits_model([7.5]), ds, where=["a", "gap", "c"])
    assert out["record"].values.tolist() == ["a", "gap", "c"]  # in the order where gives
    np.testing.assert_array_equal(out["signal"].values, [7.5, np.nan, 7.5])
    assert out["signal"].attrs["units"] == "log2 fold"


def test_per_base_predictions_of_n_bases_and_padding_are_nan():
    ds = from_sequences(RECORDS)
    ds["base"] = ds["sequence"].where(ds["sequence"] != 255).astype(float)
    adapter = GenomeAdapter(tokens="ids").fit(ds, targets="base")

    def model(tokens, key_padding_mask):
        return tokens[..., None].astype(np.float64)  # each base's id

    out = adapter.predict(model, ds)["base"]
    assert out.dims == ("record", "position")
    np.testing.assert_array_equal(out.sel(record="b").values, [2, 2, np.nan, np.nan, 1])
    np.testing.assert_array_equal(out.sel(record="c").values, [3, 3, 0, np.nan, np.nan])
    np.testing.assert_array_equal(out["genomic_position"], ds["genomic_position"])


def test_several_sample_dims_come_back_on_their_grid():
    windows = variant_windows({"locus": "ACGTACGTAC"}, [("locus", 2, "G", "A"),
                                                        ("locus", 5, "C", "T")], window=6)
    windows["effect"] = (("variant", "allele"), np.array([[0.0, 1.0], [0.0, -1.0]]))
    adapter = GenomeAdapter().fit(windows, targets="effect")

    def g_count(tokens, key_padding_mask):
        return (tokens[..., 2] * ~key_padding_mask).sum(axis=1, keepdims=True)

    out = adapter.predict(g_count, windows, where={"allele": ["alt"]})["effect"]
    assert out.dims == ("variant", "allele")
    assert out["allele"].values.tolist() == ["alt"]
    np.testing.assert_array_equal(out.values[:, 0], [0, 2])  # .ACATA: the G lost; GTATGT
    batch = adapter.encode(windows, where={"variant": [1]})
    decoded = adapter.decode(batch, np.array([[4.0], [5.0]]))["effect"]
    assert decoded.sizes == {"variant": 1, "allele": 2}
    np.testing.assert_array_equal(decoded.values, [[4.0, 5.0]])


def test_reverse_strand_epochs_replay_and_move_on():
    ds = labelled()
    batches = GenomeAdapter(tokens="ids").fit(ds, targets="count").batches(
        ds, batch_size=4, reverse_complement=True, seed=3)
    strands = [[b.tokens.tolist() for b in batches.epoch(e)] for e in (0, 0, 1, 2, 3)]
    assert strands[0] == strands[1]
    assert any(s != strands[0] for s in strands[2:])


def test_fitted_state_survives_save_and_load(tmp_path):
    ds = from_sequences(RECORDS)
    ds["is_g"] = ds["sequence"] % 16 == 2
    adapter = GenomeAdapter(tokens="ids", ambiguous="token").fit(ds, targets="is_g")
    seqattn.save(adapter, tmp_path / "adapter")
    loaded = seqattn.load(tmp_path / "adapter")
    assert loaded.to_dict() == adapter.to_dict()
    assert (loaded.per_base, loaded.max_tokens, loaded.ambiguous) == (True, 5, "token")
    np.testing.assert_array_equal(loaded.encode(ds).targets, adapter.encode(ds).targets)


def test_hyperparameters_are_keyword_only():
    with pytest.raises(TypeError):
        GenomeAdapter("ids")


def test_a_dask_backed_dataset_gives_the_same_batches_and_predictions():
    pytest.importorskip("dask")
    ds = labelled()
    lazy = ds.chunk({"record": 2})
    adapter = GenomeAdapter(tokens="ids").fit(lazy, targets="signal")
    assert adapter.to_dict() == GenomeAdapter(tokens="ids").fit(ds, targets="signal").to_dict()
    for eager, read in zip(adapter.batches(ds, batch_size=3, shuffle=True).epoch(2),
                           adapter.batches(lazy, batch_size=3, shuffle=True).epoch(2)):
        np.testing.assert_array_equal(eager.tokens, read.tokens)
        np.testing.assert_array_equal(eager.targets, read.targets)

    def t_count(tokens, key_padding_mask):
        return ((tokens == 3) & ~key_padding_mask).sum(axis=1, keepdims=True).astype(float)

    np.testing.assert_array_equal(adapter.predict(t_count, lazy)["signal"].values, [1, 0, 2, 1])
