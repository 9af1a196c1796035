"""Saved folders and checkpoints are verified when loaded: a changed byte, a cut-short file,
weights of the wrong dtype or not finite, a missing file are refused with an error naming the
file; a save interrupted between its renames leaves the previous folder, which resuming uses;
a save never replaces a folder holding someone else's files."""
import hashlib
import json
import os

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import seqattn
from seqattn import nn
from seqattn.storage import previous_folder, recover_folder
from seqattn.train import Adam, EarlyStopping, load_checkpoint, save_checkpoint


def _linear(tmp_path):
    folder = tmp_path / "linear"
    seqattn.save(nn.Linear(3, 2, seed=1), folder)
    return folder


def _rewrite(folder, name, data):
    """Replace ``folder/name`` and record its new checksum, as a consistent but wrong save."""
    (folder / name).write_bytes(data)
    description = json.loads((folder / "seqattn.json").read_text())
    description["files"][name] = hashlib.sha256(data).hexdigest()
    (folder / "seqattn.json").write_text(json.dumps(description))


def _rewrite_weights(folder, change):
    arrays = {k: change(v) for k, v in load_file(folder / "weights.safetensors").items()}
    save_file(arrays, folder / "changed")
    _rewrite(folder, "weights.safetensors", (folder / "changed").read_bytes())
    (folder / "changed").unlink()


def test_a_flipped_byte_or_a_cut_short_file_is_refused_by_name(tmp_path):
    folder = _linear(tmp_path)
    weights = folder / "weights.safetensors"
    data = bytearray(weights.read_bytes())
    data[-3] ^= 0x01  # a bit of the last weight
    weights.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"weights.safetensors is damaged: its sha256"):
        seqattn.load(folder)
    weights.write_bytes(bytes(data[:len(data) // 2]))
    with pytest.raises(ValueError, match=r"weights.safetensors is damaged"):
        seqattn.load(folder)
    weights.unlink()
    with pytest.raises(FileNotFoundError, match=r"weights.safetensors is missing"):
        seqattn.load(folder)
    description = folder / "seqattn.json"
    description.write_text(description.read_text()[:40])
    with pytest.raises(ValueError, match=r"seqattn.json is not valid JSON"):
        seqattn.load(folder)


def test_a_folder_from_before_checksums_loads_unverified_with_a_warning(tmp_path):
    folder = _linear(tmp_path)
    description = json.loads((folder / "seqattn.json").read_text())
    del description["files"]
    (folder / "seqattn.json").write_text(json.dumps(description))
    with pytest.warns(UserWarning, match="written by an earlier seqattn, without checksums, so "
                                         ".*weights.safetensors is loaded unverified"):
        loaded = seqattn.load(folder)
    np.testing.assert_array_equal(loaded.weight.data, nn.Linear(3, 2, seed=1).weight.data)
    weights = load_file(folder / "weights.safetensors")
    save_file({k: np.full_like(v, np.nan) for k, v in weights.items()},
              folder / "weights.safetensors")
    with pytest.warns(UserWarning), pytest.raises(ValueError, match="not finite"):
        seqattn.load(folder)


@pytest.mark.parametrize("change, match", [
    (lambda w: w.astype(np.int64), "holds (bias|weight) as int64, but .* are float32"),
    (lambda w: w.astype(np.float64), "holds (bias|weight) as float64, but .* are float32"),
    (lambda w: np.full_like(w, np.nan), "(bias|weight) with values that are not finite"),
    (lambda w: np.where(w > 0, np.inf, w), "(bias|weight) with values that are not finite"),
])
def test_weights_of_another_dtype_or_not_finite_are_refused(tmp_path, change, match):
    folder = _linear(tmp_path)
    _rewrite_weights(folder, change)
    with pytest.raises(ValueError, match=match):
        seqattn.load(folder)


def test_weights_that_are_not_finite_are_not_saved_and_the_earlier_folder_stays(tmp_path):
    folder = _linear(tmp_path)
    before = _files_of(folder)
    diverged = nn.Linear(3, 2)
    diverged.bias.data[1] = np.nan
    with pytest.raises(ValueError, match=r"cannot save Linear to .*linear: its bias holds inf or "
                                         r"NaN"):
        seqattn.save(diverged, folder)
    assert _files_of(folder) == before


def _files_of(folder):
    return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_load_state_dict_refuses_weights_that_are_not_finite_numbers():
    linear = nn.Linear(3, 2, seed=1)
    before = linear.state_dict()
    for bad in (np.full((2, 3), np.nan), np.array([["a"] * 3] * 2)):
        with pytest.raises(ValueError, match="weight in the state dict is not finite numbers"):
            linear.load_state_dict({**before, "weight": bad})
    np.testing.assert_array_equal(linear.weight.data, before["weight"])


def _checkpoint(tmp_path, stopper=None):
    model = nn.Linear(3, 2, seed=1)
    optimizer = Adam(model, lr=0.1)
    model(np.ones((4, 3), np.float32))
    model.backward(np.ones((4, 2), np.float32))
    optimizer.step()
    save_checkpoint(tmp_path / "run", model, optimizer, epoch=1, early_stopping=stopper)
    return tmp_path / "run", model


@pytest.mark.parametrize("name", ["training/state.json", "training/optimizer.safetensors",
                                  "training/last.safetensors", "weights.safetensors"])
def test_a_damaged_checkpoint_file_is_refused_by_name(tmp_path, name):
    stopper = EarlyStopping()
    stopper.best_weights = nn.Linear(3, 2, seed=2).state_dict()
    folder, _ = _checkpoint(tmp_path, stopper)
    file = folder / name
    file.write_bytes(file.read_bytes()[:-7])
    with pytest.raises(ValueError, match=f"{name} is damaged"):
        load_checkpoint(folder, nn.Linear(3, 2), Adam(nn.Linear(3, 2), lr=0.1), EarlyStopping())


def test_a_cut_short_state_json_with_a_matching_checksum_names_the_file(tmp_path):
    folder, _ = _checkpoint(tmp_path)
    _rewrite(folder, "training/state.json", (folder / "training/state.json").read_bytes()[:30])
    with pytest.raises(ValueError, match=r"training/state.json is not valid JSON"):
        load_checkpoint(folder, nn.Linear(3, 2))


def test_a_checkpoint_of_an_earlier_format_is_not_resumed(tmp_path):
    folder, _ = _checkpoint(tmp_path)
    state = json.loads((folder / "training/state.json").read_text())
    _rewrite(folder, "training/state.json", json.dumps({**state, "format": 2}).encode())
    with pytest.raises(ValueError, match=r"state.json has format 2; this seqattn resumes from "
                                         r"format 3 .* seqattn.load still gives its model"):
        load_checkpoint(folder, nn.Linear(3, 2))


def test_non_finite_optimizer_state_is_refused(tmp_path):
    folder, model = _checkpoint(tmp_path)
    name = "training/optimizer.safetensors"
    arrays = {k: np.full_like(v, np.nan) for k, v in load_file(folder / name).items()}
    save_file(arrays, tmp_path / "nan")
    _rewrite(folder, name, (tmp_path / "nan").read_bytes())
    with pytest.raises(ValueError, match=r"optimizer.safetensors holds .* not finite"):
        load_checkpoint(folder, nn.Linear(3, 2), Adam(nn.Linear(3, 2), lr=0.1))


def test_a_save_interrupted_between_its_renames_resumes_from_the_previous_folder(tmp_path):
    folder, model = _checkpoint(tmp_path)
    folder.rename(previous_folder(folder))  # as a crash after the first rename leaves it
    with pytest.raises(FileNotFoundError, match=r"a save there was interrupted.*\.run\.previous"):
        seqattn.load(folder)
    again = nn.Linear(3, 2)
    assert load_checkpoint(folder, again, Adam(again, lr=0.1))["epoch"] == 1
    np.testing.assert_array_equal(again.weight.data, model.weight.data)
    assert not previous_folder(folder).exists()
    np.testing.assert_array_equal(seqattn.load(folder).weight.data, model.weight.data)


def test_ranks_resuming_at_once_put_the_previous_folder_back_once(tmp_path, monkeypatch):
    folder, model = _checkpoint(tmp_path)
    folder.rename(previous_folder(folder))
    rename = os.rename

    def another_rank_first(source, target):
        rename(source, target)
        raise FileNotFoundError(source)  # what this rank meets: nothing left to rename

    monkeypatch.setattr(os, "rename", another_rank_first)
    recover_folder(folder)
    monkeypatch.undo()
    again = nn.Linear(3, 2)
    assert load_checkpoint(folder, again)["epoch"] == 1
    np.testing.assert_array_equal(again.weight.data, model.weight.data)


def test_a_folder_holding_other_files_is_not_replaced(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match=r"holds files seqattn did not write \(\['notes"):
        seqattn.save(nn.Linear(2, 2), tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_the_working_directory_is_not_replaced(tmp_path, monkeypatch):
    (tmp_path / "inner").mkdir()
    monkeypatch.chdir(tmp_path / "inner")
    for folder in (".", "..", str(tmp_path)):
        with pytest.raises(ValueError, match="is the working directory .* a folder of its own"):
            seqattn.save(nn.Linear(2, 2), folder)
    seqattn.save(nn.Linear(2, 2), "model/../linear")
    assert sorted(p.name for p in (tmp_path / "inner").iterdir()) == ["linear"]


def test_saving_again_replaces_the_folder_whole_and_leaves_nothing_beside_it(tmp_path):
    folder = _linear(tmp_path)
    seqattn.save(nn.LayerNorm(4), folder)
    assert type(seqattn.load(folder)) is nn.LayerNorm
    assert sorted(p.name for p in tmp_path.iterdir()) == ["linear"]
    assert sorted(p.name for p in folder.iterdir()) == ["seqattn.json", "weights.safetensors"]


@pytest.mark.parametrize("field, value", [("d_model", -8), ("nhead", 0), ("max_len", -1),
                                          ("in_features", -1), ("out_features", 2.0),
                                          ("num_layers", -1)])
def test_a_saved_config_with_a_bad_size_is_refused_naming_the_field(tmp_path, field, value):
    from seqattn.models import TokenModel, TokenModelConfig

    folder = tmp_path / "model"
    seqattn.save(TokenModel(TokenModelConfig(in_features=1, d_model=8, nhead=2, num_layers=1,
                                             dim_feedforward=8, max_len=6)), folder)
    description = json.loads((folder / "seqattn.json").read_text())
    description["arguments"]["config"]["fields"][field] = value
    (folder / "seqattn.json").write_text(json.dumps(description))
    with pytest.raises(ValueError, match=rf"TokenModelConfig.{field} must be a whole number >= "
                                         rf"[01]; got {value}"):
        seqattn.load(folder)
