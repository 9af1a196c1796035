"""Learnable structured attention biases that a layer owns: the tables behind
``seqattn.ops.DistanceBias`` and ``PairBias``, and the per-token structure they read.

An attention layer built with ``distance_bias=DistanceBiasTable(...)`` and/or
``pair_bias=PairBiasTable(...)`` adds them to its scores when called with a :class:`Structure`;
the tables are parameters of the layer and train with the rest of the model. The biases are
computed inside the attention kernels tile by tile, so nothing N x M is stored, and gradients
reach the tables and, when they are Tensors that require them, the positions (forces).
"""
from dataclasses import dataclass, fields, replace

import numpy as np

from ..autodiff import Tensor
from ..ops import DistanceBias, PairBias
from .init import generator, normal
from .module import Module
from .parameter import Parameter
from .placement import moved


@dataclass
class Structure:
    """What the structured attention biases read, per batch: positions, types, cells and pair
    codes. The adapters for molecules and graphs put one in every batch (``Batch.structure``).

    Parameters
    ----------
    positions : array (B, N, 3), optional
        Positions of the query tokens (atoms).
    key_positions : array (B, M, 3), optional
        Positions of the key tokens; None when the keys are the queries.
    types : int array (B, N), optional
        Small integer types of the query tokens (elements, node types).
    key_types : int array (B, M), optional
        Types of the key tokens; None when the keys are the queries.
    cell : array (B, 3, 3) or (3, 3), optional
        Periodic lattice vectors as rows, for minimum-image distances.
    pair_codes : int8, int16 or int32 array (B, N, M) or (N, M), optional
        A code per pair (graph hops, edge types); negative means not connected (hidden).
    query_index : int array (B, N), optional
        Positions of the queries for relative codes (default: the token order).
    key_index : int array (B, M), optional
        Positions of the keys for relative codes (default: the token order).
    """

    positions: object = None
    key_positions: object = None
    types: object = None
    key_types: object = None
    cell: object = None
    pair_codes: object = None
    query_index: object = None
    key_index: object = None

    # the number of dims of each field that holds one row per sample of the batch (the cell and
    # the pair codes may instead be one array shared by the whole batch)
    _PER_SAMPLE_NDIM = {"positions": 3, "key_positions": 3, "types": 2, "key_types": 2,
                        "cell": 3, "pair_codes": 3, "query_index": 2, "key_index": 2}

    def batch_taken(self, times):
        """This structure for its batch repeated ``times`` over (host arrays): every per-sample
        array concatenated ``times`` along the batch, the arrays shared by the batch kept."""
        return replace(self, **{
            name: np.concatenate([getattr(self, name)] * times)
            for name, ndim in self._PER_SAMPLE_NDIM.items()
            if getattr(self, name) is not None and np.ndim(getattr(self, name)) == ndim})

    def on(self, device, dtype):
        """This structure with its arrays on ``device`` and its float arrays (positions, cell)
        cast to ``dtype``, the model's, as the kernels require; Tensors (positions that record
        a gradient, for forces) are left as they are."""
        def placed(x):
            if x is None or not hasattr(x, "dtype") or not hasattr(x, "shape"):
                return x
            if isinstance(x, np.ndarray):
                if np.issubdtype(x.dtype, np.floating):
                    x = x.astype(dtype, copy=False)
                return moved(np.ascontiguousarray(x), device)
            return x if isinstance(x, Tensor) else moved(x, device)
        return replace(self, **{f.name: placed(getattr(self, f.name)) for f in fields(self)})


def structure_argument(model, structure, accepted):
    """The keyword arguments that hand a batch's ``structure`` to ``model`` (whose forward
    ``accepted`` one or not): none without a structure, else ``structure=`` on the model's device
    and in its dtype (when it has them). A model that takes none is an error: it would predict
    without the positions or pair codes the batch is about."""
    if structure is None:
        return {}
    if not accepted:
        raise TypeError(f"the batch carries a structure (positions, pair codes) but "
                        f"{type(model).__name__} takes no structure= argument; use a model "
                        "with structured attention biases (an EncoderConfig with distance_bias "
                        "or pair_bias, a molecule or graph model)")
    device, dtype = getattr(model, "device", None), getattr(model, "dtype", None)
    if device is not None and dtype is not None and isinstance(structure, Structure):
        structure = structure.on(device, dtype)
    return {"structure": structure}


class DistanceBiasTable(Module):
    """A learnable function of distance added to attention scores: f_h(d) per head h, for
    atoms and other tokens with positions.

    The table holds per-head values at ``bins`` equally spaced distances on [0, ``r_max``],
    linearly interpolated (constant beyond ``r_max``). The distances come from the
    :class:`Structure` passed to the attention layer.

    Parameters
    ----------
    num_heads : int
        Heads H of the attention it feeds.
    bins : int, default 32
        Distances the table holds values at.
    r_max : float, default 5.0
        The largest distance in the table (the positions' units, e.g. Angstrom).
    num_types : int, optional
        With it, one table per pair of token types (elements), read from
        ``Structure.types``.
    cutoff : float, optional
        Keys farther than this are hidden.
    smooth_cutoff : bool, default False
        Fade the attention weights to zero at ``cutoff``, so outputs stay continuous as tokens
        cross it.
    dtype : NumPy float type, default numpy.float32
        Type of the parameters and of the activations they produce (float32 or float64).
    seed : int, numpy.random.Generator or None, default None
        Seed of the initial weights. One Generator shared by a model's modules makes the whole
        model reproducible from one seed; None draws fresh entropy.
    """

    def __init__(self, num_heads, bins=32, r_max=5.0, num_types=None, cutoff=None,
                 smooth_cutoff=False, dtype=np.float32, seed=None):
        super().__init__()
        shape = (num_heads, bins) if num_types is None else (num_types, num_types, num_heads,
                                                             bins)
        self.r_max, self.cutoff, self.smooth_cutoff = float(r_max), cutoff, smooth_cutoff
        self.num_types = num_types
        self.table = Parameter(normal(generator(seed), shape, dtype, std=0.02))

    def bias(self, structure):
        if structure is None or structure.positions is None:
            raise ValueError("this attention layer has a distance bias: pass "
                             "structure=Structure(positions=(B, N, 3) array)")
        if self.num_types is not None and structure.types is None:
            raise ValueError(f"the distance bias has a table per type pair (num_types = "
                             f"{self.num_types}): pass Structure(types=(B, N) integers)")
        return DistanceBias(x=structure.positions, table=self.table, r_max=self.r_max,
                            y=structure.key_positions,
                            types=structure.types if self.num_types is not None else None,
                            key_types=structure.key_types if self.num_types is not None
                            else None, cell=structure.cell, cutoff=self.cutoff,
                            smooth_cutoff=self.smooth_cutoff)


class PairBiasTable(Module):
    """A learnable bias per head and pair code, ``table[h, code]``, added to attention scores.

    The codes come from ``Structure.pair_codes`` (graph hop distances, edge types) or, with
    ``max_offset`` R, are the clipped relative position j - i (2 R + 1 codes, nothing N x M
    stored).

    Parameters
    ----------
    num_heads : int
        Heads H of the attention it feeds.
    num_codes : int, optional
        Number of pair codes, when the structure gives them.
    max_offset : int, optional
        R, for relative-position codes instead.
    dtype : NumPy float type, default numpy.float32
        Type of the parameters and of the activations they produce (float32 or float64).
    seed : int, numpy.random.Generator or None, default None
        Seed of the initial weights. One Generator shared by a model's modules makes the whole
        model reproducible from one seed; None draws fresh entropy.
    """

    def __init__(self, num_heads, num_codes=None, max_offset=None, dtype=np.float32, seed=None):
        super().__init__()
        if (num_codes is None) == (max_offset is None):
            raise ValueError("give num_codes (codes from Structure.pair_codes) or max_offset (a "
                             f"relative-position bias), not both; got {num_codes!r}, "
                             f"{max_offset!r}")
        self.relative = max_offset is not None
        codes = 2 * max_offset + 1 if self.relative else num_codes
        self.table = Parameter(normal(generator(seed), (num_heads, codes), dtype, std=0.02))

    def bias(self, structure):
        if self.relative:
            index = (None, None) if structure is None else (structure.query_index,
                                                            structure.key_index)
            return PairBias.relative(self.table, *index)
        if structure is None or structure.pair_codes is None:
            raise ValueError("this attention layer has a pair-code bias: pass "
                             "structure=Structure(pair_codes=(B, N, M) integers)")
        return PairBias(self.table, codes=structure.pair_codes)
