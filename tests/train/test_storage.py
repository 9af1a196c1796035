"""seqattn.save / seqattn.load: every kind of object comes back as the same class with the same
outputs (layers, containers, nested modules, task models, a float64 copy, a user's module,
adapters with their normalizer), and wrong files or unstorable arguments get clear errors.
(Training checkpoints are tested with the fit loop, in test_train_fit.py, except that of a
model that cannot be rebuilt.)"""
import json

import numpy as np
import pytest

import seqattn
from seqattn import autodiff, nn
from seqattn.models import (Seq2SeqConfig, Seq2SeqModel, SequenceModel, SequenceModelConfig,
                            TokenModel, TokenModelConfig)
from seqattn.storage import StorageError

RNG = np.random.default_rng(0)
TINY = dict(d_model=8, nhead=2, num_layers=1, dim_feedforward=8, max_len=6, seed=3)


def _floats(*shape):
    return RNG.normal(size=shape).astype(np.float32)


def _ids(*shape):
    return RNG.integers(1, 5, size=shape)


def _encoder():
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, seed=0)
    return nn.TransformerEncoder(layer, num_layers=2, norm=nn.LayerNorm(8))


# name -> (build the module, its forward's arguments)
MODULES = {
    "Linear": (lambda: nn.Linear(3, 2, seed=1), lambda: (_floats(2, 3),)),
    "LayerNorm": (lambda: nn.LayerNorm(4), lambda: (_floats(2, 4),)),
    "Embedding": (lambda: nn.Embedding(6, 4, padding_idx=0, seed=1), lambda: (_ids(2, 3),)),
    "Sequential of varargs": (lambda: nn.Sequential(nn.Linear(3, 4, seed=1), nn.GELU(),
                                                    nn.Linear(4, 2, seed=2)),
                              lambda: (_floats(2, 3),)),
    "TransformerEncoder holding a layer": (_encoder, lambda: (_floats(2, 5, 8),)),
    "TokenModel": (lambda: TokenModel(TokenModelConfig(in_features=2, out_features=3, **TINY)),
                   lambda: (_floats(2, 5, 2),)),
    "TokenModel with coordinates, RoPE, causal": (
        lambda: TokenModel(TokenModelConfig(in_features=2, coordinates=("latlon",),
                                            positions="rope", causal=True, **TINY)),
        lambda: (_floats(2, 5, 2), None, {"lat": RNG.uniform(-90, 90, (2, 5)),
                                          "lon": RNG.uniform(0, 360, (2, 5))})),
    "SequenceModel": (lambda: SequenceModel(SequenceModelConfig(
        vocab_size=6, out_features=2, pooling="attention", **TINY)), lambda: (_ids(2, 5),)),
    "Seq2SeqModel": (lambda: Seq2SeqModel(Seq2SeqConfig(
        in_features=2, target_features=3, num_decoder_layers=1, **TINY)),
        lambda: (_floats(2, 5, 2), _floats(2, 4, 3))),
    "TokenModel cast to float64": (
        lambda: TokenModel(TokenModelConfig(in_features=2, **TINY)).to(dtype=np.float64),
        lambda: (RNG.normal(size=(2, 5, 2)),)),
}


def _perturbed(module):
    """Weights unlike a fresh module's, so that loading them (not rebuilding) is what is tested."""
    module.load_state_dict({k: v + RNG.normal(size=v.shape).astype(v.dtype) * 0.1
                            for k, v in module.state_dict().items()})
    return module


def _assert_round_trip(module, args, path, **load_options):
    seqattn.save(module, path)
    loaded = seqattn.load(path, **load_options)
    assert type(loaded) is type(module) and loaded.dtype == module.dtype
    np.testing.assert_array_equal(loaded.eval()(*args), module.eval()(*args))
    return loaded


@pytest.mark.parametrize("name", MODULES)
def test_modules_come_back_with_the_same_outputs(name, tmp_path):
    build, args = MODULES[name]
    loaded = _assert_round_trip(_perturbed(build()), args(), tmp_path / "saved")
    if hasattr(loaded, "config"):
        assert loaded.config == build().config


def test_nested_modules_are_rebuilt_from_their_own_arguments(tmp_path):
    seqattn.save(_encoder(), tmp_path / "encoder")
    saved = json.loads((tmp_path / "encoder" / "seqattn.json").read_text())
    layer = saved["arguments"]["encoder_layer"]
    assert layer["$type"] == "module" and layer["class"] == "TransformerEncoderLayer"
    assert layer["arguments"]["dim_feedforward"] == 16
    assert len(seqattn.load(tmp_path / "encoder").layers) == 2


class TwoHeads(nn.Module):
    """A user's module: its arguments are an int, a tuple and a dtype."""

    def __init__(self, features, widths=(2, 3), dtype=np.float32):
        super().__init__()
        self.first = nn.Linear(features, widths[0], dtype=dtype, seed=1)
        self.second = nn.Linear(features, widths[1], dtype=dtype, seed=2)

    def forward(self, x):
        return autodiff.concat([self.first(x), self.second(x)], axis=-1)


def test_a_users_module_loads_when_its_class_is_given(tmp_path):
    module = _perturbed(TwoHeads(3, widths=(1, 4)))
    seqattn.save(module, tmp_path / "mine")
    with pytest.raises(ValueError, match=r"names class 'TwoHeads' .* pass it to load: "
                                         r"seqattn.load\(path, classes=\[TwoHeads\]\)"):
        seqattn.load(tmp_path / "mine")
    loaded = _assert_round_trip(module, (_floats(2, 3),), tmp_path / "mine", classes=[TwoHeads])
    assert loaded._config["widths"] == (1, 4)
    with pytest.raises(TypeError, match="classes must be a list of classes"):
        seqattn.load(tmp_path / "mine", classes=["TwoHeads"])


class WithAFunction(nn.Module):
    def __init__(self, features, activation=np.tanh):
        super().__init__()
        self.linear = nn.Linear(features, features)


def test_unstorable_arguments_and_objects_are_named(tmp_path):
    with pytest.raises(StorageError, match=r"cannot store WithAFunction.activation = .* got a "
                                           r"ufunc"):
        seqattn.save(WithAFunction(2), tmp_path / "bad")
    with pytest.raises(StorageError, match="seqattn.save stores modules .* got a dict"):
        seqattn.save({"a": 1}, tmp_path / "bad")


def test_a_checkpoint_of_an_unstorable_model_is_resumable_but_says_why_it_cannot_load(tmp_path):
    from seqattn.train import SGD, load_checkpoint, save_checkpoint

    model = _perturbed(WithAFunction(2))
    save_checkpoint(tmp_path / "run", model, SGD(model, lr=0.1), epoch=1)
    with pytest.raises(StorageError, match="constructor arguments could not be stored .*"
                                           "activation.*load_checkpoint"):
        seqattn.load(tmp_path / "run")
    again = WithAFunction(2)
    assert load_checkpoint(tmp_path / "run", again)["epoch"] == 1
    np.testing.assert_array_equal(again.linear.weight.data, model.linear.weight.data)


def test_wrong_or_unknown_files_get_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        seqattn.load(tmp_path / "nothing")
    (tmp_path / "file.json").write_text("{}")
    with pytest.raises(ValueError, match="is a file; seqattn.load reads the folder"):
        seqattn.load(tmp_path / "file.json")
    with pytest.raises(FileNotFoundError, match="holds no seqattn.json"):
        seqattn.load(tmp_path)
    folder = tmp_path / "linear"
    seqattn.save(nn.Linear(3, 2), folder)
    description = folder / "seqattn.json"
    good = description.read_text()
    for text, match in [("not json", "is not valid JSON"),
                        ('{"kind": "module"}', "is not a seqattn description"),
                        (good.replace('"format": 1', '"format": 99'), "has format 99"),
                        (good.replace('"Linear"', '"Nonexistent"'), "names class 'Nonexistent'"),
                        (good.replace('"out_features": 2', '"out_features": 5'),
                         "weights.safetensors does not fit the Linear rebuilt")]:
        description.write_text(text)
        with pytest.raises(ValueError, match=match):
            seqattn.load(folder)


def _adapters():
    from adapters_helpers import make_grid, make_signal
    from seqattn.adapters import GridAdapter, SignalAdapter

    grid, signal = make_grid(nan_fraction=0.1), make_signal(start="2020-01-01")
    return {
        "grid": (GridAdapter(["t", "u"], {"lat": 2, "lon": 2}, periodic=["lon"]).fit(grid), grid),
        "grid, not normalized": (GridAdapter(["t"], {"lat": 3, "lon": 4}, normalize=False)
                                 .fit(grid), grid),
        "signal": (SignalAdapter(["x"], np.timedelta64(3, "h"), hop="1h", calendar=True)
                   .fit(signal),
                   signal),
    }


@pytest.mark.parametrize("name", ["grid", "grid, not normalized", "signal"])
def test_adapters_come_back_with_their_normalizer(name, tmp_path):
    adapter, ds = _adapters()[name]
    seqattn.save(adapter, tmp_path / "adapter")
    loaded = seqattn.load(tmp_path / "adapter")
    assert type(loaded) is type(adapter) and loaded.config() == adapter.config()
    assert (loaded.normalizer is None) == (adapter.normalizer is None)
    batch, again = adapter.encode(ds), loaded.encode(ds)
    np.testing.assert_array_equal(again.tokens, batch.tokens)
    np.testing.assert_array_equal(again.key_padding_mask, batch.key_padding_mask)


def test_forecast_windows_come_back_with_their_statistics(tmp_path):
    from adapters_helpers import make_grid
    from seqattn.adapters import ForecastWindows, GridAdapter

    ds = make_grid(time=8, lat=4, lon=4)
    windows = ForecastWindows(GridAdapter(["t", "u"], {"lat": 2, "lon": 2}), leads=[1, 2],
                              history=1).fit(ds)
    seqattn.save(windows, tmp_path / "windows")
    loaded = seqattn.load(tmp_path / "windows")  # the set-up and its statistics, not the data
    batching = dict(batch_size=4, shuffle=True, seed=3)
    for batch, again in zip(windows.batches(ds, **batching).epoch(1),
                            loaded.batches(ds, **batching).epoch(1), strict=True):
        np.testing.assert_array_equal(again.tokens, batch.tokens)
        np.testing.assert_array_equal(again.targets, batch.targets)


def test_float32_normalization_statistics_keep_their_dtype(tmp_path):
    from adapters_helpers import make_grid
    from seqattn.adapters import GridAdapter

    ds = make_grid(dtype="float32")
    adapter = GridAdapter(["t", "u"], {"lat": 2, "lon": 2}).fit(ds)
    seqattn.save(adapter.normalizer, tmp_path / "normalizer")
    loaded = seqattn.load(tmp_path / "normalizer")
    assert loaded.stats["t"].dtype == adapter.normalizer.stats["t"].dtype


def test_saving_an_adapter_over_a_module_leaves_no_stale_weights(tmp_path):
    seqattn.save(nn.Linear(2, 2), tmp_path / "slot")
    adapter, _ = _adapters()["grid"]
    seqattn.save(adapter, tmp_path / "slot")
    assert not (tmp_path / "slot" / "weights.safetensors").exists()
    assert type(seqattn.load(tmp_path / "slot")) is type(adapter)
