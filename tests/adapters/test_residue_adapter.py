"""ResidueAdapter: protein variants of one wild type on the adapter protocol, the ambiguity and
stop policies in batches, no reverse strand, and its state through save and load."""
import numpy as np
import pytest
import xarray as xr

import seqattn
from seqattn.adapters.residue_maps import single_mutant_map
from seqattn.adapters.residues import ResidueAdapter
from seqattn.models import build
from seqattn.readers.residues import from_mutations, from_residues
from seqattn.train import AdamW, MSELoss, fit
from seqattn.train.weighted_mse import WeightedMSELoss
from train_tasks import one_numba_thread  # noqa: F401  (tiny shapes run faster on one thread)

WILD_TYPE = "MTYKLILNGK"


def scan():
    """Every single mutant to A, L or *, scored by a known additive rule (A -0.5, L +1 at
    positions 2-5, a stop -3)."""
    mutations = ["WT"] + [f"{w}{i + 1}{m}" for i, w in enumerate(WILD_TYPE) for m in "AL*"
                          if m != w]
    ds = from_mutations(WILD_TYPE, mutations)
    effect = {"A": -0.5, "L": 1.0, "*": -3.0}
    score = [0.0] + [effect[m[-1]] * (1 if m[-1] == "*" or 2 <= int(m[1:-1]) <= 5 else 0.2)
                     for m in mutations[1:]]
    ds["score"] = ("record", np.array(score), {"units": "log enrichment"})
    return ds


def test_protein_variants_fit_predict_save_load(tmp_path):
    ds = scan()
    train = np.arange(ds.sizes["record"]) % 4 != 0
    adapter = ResidueAdapter().fit(ds, targets="score", where=train)
    model = build(adapter.model_config(task="regression", d_model=16, nhead=2, num_layers=1,
                                       dim_feedforward=32))
    assert model.config.in_features == 21  # 20 residues and the stop token
    history = fit(model, MSELoss(skip_nan=True), AdamW(model, lr=1e-2),
                  adapter.batches(ds, where=train, batch_size=8, shuffle=True), epochs=6,
                  progress=False)
    assert history["loss"][-1] < 0.5 * history["loss"][0], history["loss"]
    out = seqattn.predict(model, ds, adapter)
    assert out["score"].dims == ("record",) and out["score"].attrs["units"] == "log enrichment"
    assert out["mutations"].values[:3].tolist() == ["", "M1A", "M1L"]
    heat = single_mutant_map(out["score"], WILD_TYPE)  # predictions as the scan's heat map
    assert heat.sel(position=1, residue="L") == out["score"].sel(record="M1L")
    seqattn.save(adapter, tmp_path / "adapter")
    seqattn.save(model, tmp_path / "model")
    loaded = seqattn.load(tmp_path / "adapter")
    assert isinstance(loaded, ResidueAdapter) and loaded.to_dict() == adapter.to_dict()
    xr.testing.assert_identical(seqattn.predict(seqattn.load(tmp_path / "model"), ds, loaded),
                                out)


def test_ambiguity_and_stop_policies_in_batches():
    ds = from_residues({"a": "MX*K", "b": "MK"})
    ids = ResidueAdapter(tokens="ids").fit(ds).encode(ds)
    np.testing.assert_array_equal(ids.tokens[0], [10, 20, 21, 8])
    np.testing.assert_array_equal(ids.key_padding_mask, [[False, True, False, False],
                                                         [False, False, True, True]])
    hot = ResidueAdapter(ambiguous="token", stop="mask").fit(ds).encode(ds)
    assert hot.tokens.shape == (2, 4, 21)  # the unknown residue's column, no stop column
    np.testing.assert_array_equal(hot.tokens[0].argmax(axis=-1)[:2], [10, 20])
    assert not hot.tokens[0, 2].any() and hot.key_padding_mask[0, 2]
    assert not hot.tokens[1, 2:].any()  # padding past the end of record b
    with pytest.raises(ValueError, match=r"record 'a', position 2: a stop with stop='error'"):
        ResidueAdapter(stop="error").fit(ds).encode(ds)


def test_residues_have_no_reverse_strand_and_the_alphabet_must_agree():
    ds = from_residues(["MKV"])
    adapter = ResidueAdapter().fit(ds)
    with pytest.raises(ValueError, match="protein residues have no reverse strand"):
        adapter.batches(ds, reverse_complement=True)
    with pytest.raises(ValueError, match="in the protein alphabet .* pass alphabet='protein'"):
        ResidueAdapter(alphabet="RNA").fit(ds)
    rna = from_residues(["ACGUN"], alphabet="RNA")
    batch = ResidueAdapter(alphabet="RNA", tokens="ids").fit(rna).encode(rna)
    np.testing.assert_array_equal(batch.tokens[0], [0, 1, 2, 3, 4])
    np.testing.assert_array_equal(batch.key_padding_mask[0], [False] * 4 + [True])
    with pytest.raises(ValueError, match="stop='end'; expected one of"):
        ResidueAdapter(stop="end")


def test_weights_per_variant_reach_the_batches_and_bad_ones_are_named():
    ds = from_mutations(WILD_TYPE, ["WT", "T2A", "Y3L"])
    ds["score"] = ("record", [0.0, -1.0, 1.0])
    ds["dy"] = ("record", [0.5, 1.0, 2.0])
    ds["w"] = 1 / ds.dy ** 2
    adapter = ResidueAdapter().fit(ds, targets="score")
    batch = next(iter(adapter.batches(ds, weights="w", batch_size=3)))
    np.testing.assert_array_equal(batch.coords["weight"][:, 0], [4.0, 1.0, 0.25])
    assert (batch.coords["weight"] == batch.coords["weight"][:, :1]).all()
    model = build(adapter.model_config(task="regression", d_model=8, nhead=2, num_layers=1,
                                       dim_feedforward=8))
    history = fit(model, WeightedMSELoss(), AdamW(model), adapter.batches(ds, weights="w"),
                  epochs=1, progress=False)  # the fit loop hands the batches' coords over
    assert np.isfinite(history["loss"]).all()
    with pytest.raises(ValueError, match=r"weights 'dy' are nan at record 'Y3L'; expected "
                                         r"finite weights >= 0"):
        adapter.batches(ds.assign(dy=ds.dy.where(ds.record != "Y3L")), weights="dy")
    with pytest.raises(ValueError, match="weights='nope'; expected the name of a variable"):
        adapter.batches(ds, weights="nope")


def test_mutation_tokens_are_the_wild_type_then_each_mutation_in_position_order():
    ds = from_mutations("MKVL", ["WT", "K2A", "L4*:K2A", "M1X"])
    ids = ResidueAdapter(tokens="ids", wild_type="MKVL").fit(ds).encode(ds)
    assert ResidueAdapter(wild_type="MKVL").vocab_size == 1 + 4 * 22
    # 1 + position * 22 + code: K2A = 1 + 22 + 0, L4* = 1 + 66 + 21 (the stop's code)
    np.testing.assert_array_equal(ids.tokens, [[0, 0, 0], [0, 23, 0], [0, 23, 88], [0, 21, 0]])
    np.testing.assert_array_equal(ids.key_padding_mask, [[False, True, True],
                                                         [False, False, True],
                                                         [False, False, False],
                                                         [False, True, True]])  # X masked
    np.testing.assert_array_equal(ids.coords["position"][2], [0, 1, 3])
    hot = ResidueAdapter(ambiguous="token", wild_type="MKVL").fit(ds).encode(ds)
    assert hot.tokens.shape == (4, 3, 89)
    np.testing.assert_array_equal(hot.tokens.argmax(axis=-1)[2:], [[0, 23, 88], [0, 21, 0]])
    assert not hot.tokens[1, 2].any() and not hot.key_padding_mask[3, 1]
    with pytest.raises(ValueError, match=r"record 'L4\*:K2A', position 3: a stop with "
                                         r"stop='error'"):
        ResidueAdapter(stop="error", wild_type="MKVL").fit(ds).encode(ds)
    singles = from_mutations("MKVL", ["K2A", "V3L:L4A", "WT"])
    fitted = ResidueAdapter(tokens="ids", wild_type="MKVL").fit(ds)
    assert fitted.max_mutations == 2  # every batch: the wild type's token and 2 slots
    for batch in fitted.batches(singles, batch_size=1):
        assert batch.tokens.shape == (1, 3)
    with pytest.raises(ValueError, match=r"record 'M1A:K2A:V3C', position 2: the variant has 3 "
                                         r"mutations, the adapter was fitted on variants with "
                                         r"at most 2"):
        fitted.encode(from_mutations("MKVL", ["M1A:K2A:V3C"]))


def test_mutation_tokens_learn_an_epistatic_scan_and_survive_save_load(tmp_path):
    ds = scan()
    doubles = ["T2A:Y3L", "T2L:K4A", "Y3A:I6L", "M1A:T2*"]
    measured = np.array([2.0, -2.0, 0.5, -3.0])
    additive = np.array([-0.5 + 1.0, 1.0 - 0.5, -0.5 + 0.2, -0.1 - 3.0])  # scan()'s rule
    pairs = from_mutations(WILD_TYPE, doubles)
    pairs["score"] = ("record", measured, {"units": "log enrichment"})
    ds = xr.concat([ds, pairs], dim="record")
    adapter = ResidueAdapter(wild_type=WILD_TYPE).fit(ds, targets="score")
    model = build(adapter.model_config(task="regression", d_model=16, nhead=2, num_layers=1,
                                       dim_feedforward=32, positions="none"))
    history = fit(model, MSELoss(), AdamW(model, lr=1e-2),
                  adapter.batches(ds, batch_size=8, shuffle=True), epochs=40, progress=False)
    assert history["loss"][-1] < 0.05 * history["loss"][0], history["loss"]
    out = seqattn.predict(model, ds, adapter)
    error = np.abs(out["score"].sel(record=doubles).values - measured)
    assert (error[:2] < 0.5 * np.abs(additive - measured)[:2]).all(), error  # epistasis learned
    assert (error < 0.75).all(), error
    seqattn.save(adapter, tmp_path / "adapter")
    seqattn.save(model, tmp_path / "model")
    loaded = seqattn.load(tmp_path / "adapter")
    assert loaded.wild_type == WILD_TYPE and loaded.to_dict() == adapter.to_dict()
    xr.testing.assert_identical(seqattn.predict(seqattn.load(tmp_path / "model"), ds, loaded),
                                out)


def test_mutation_tokens_refuse_what_is_not_a_variant_of_the_wild_type():
    ds = from_mutations("MKVL", ["WT", "K2A"])
    ds["score"] = ("record", [0.0, 1.0])
    with pytest.raises(ValueError, match="sequences have 4 positions, but wild_type has 5"):
        ResidueAdapter(wild_type="MKVLA").fit(ds)
    with pytest.raises(ValueError, match="wild_type=''; expected the wild type's protein"):
        ResidueAdapter(wild_type="")
    with pytest.raises(ValueError, match=r"record 'wild_type', position 1 \(0-based\): '1'"):
        ResidueAdapter(wild_type="M1")
    short = from_residues({"a": "MKVL", "b": "MK"})
    with pytest.raises(ValueError, match="record 'b', position 2: the variant ends there"):
        ResidueAdapter(wild_type="MKVL").fit(short).encode(short)
    per_residue = ds.assign(charge=(("record", "position"), np.zeros((2, 4))))
    with pytest.raises(ValueError, match="mutation tokens .* predict one value per variant"):
        ResidueAdapter(wild_type="MKVL").fit(per_residue, targets="charge")
