"""ComplexModel: a ligand in its pocket -> one value per complex (an affinity), with per-atom
contributions.

Each layer is pre-norm: the ligand's atoms attend to each other (self-attention, a learned
distance table per pair of ligand elements and head), then to the pocket's atoms
(cross-attention, a distance table per ligand-element x pocket-element pair and head, keys beyond
``cutoff`` hidden and faded out smoothly), then a feed-forward block. The pocket's atoms enter
as keys and values only (embedded once from their element and residue), so a layer costs
O(N^2 + N M) for N ligand and M pocket atoms and holds no N x M matrix: the fused attention
kernels compute the biases from positions tile by tile. A linear head gives per-atom values;
the complex's value is their mean (``pooling="mean"``) or sum over the ligand's atoms, and
:meth:`ComplexModel.contributions` returns the per-atom terms of that mean or sum.

With ``fingerprint_bits`` > 0 or ``groups`` > 1 a linear path is added to the attention's
output: per group (a protein target), an offset plus a linear function of the ligand's Morgan
fingerprint. The fingerprint arrives split over the atoms that set its bits (each bit's share
of every atom, summing over the atoms to the bit), so the path is a sum of per-atom terms too
and the contributions still add up to the prediction (a group's offset is shared evenly by the
ligand's atoms). The per-group ridge regression on fingerprints, the strongest simple method on
small affinity sets, is then one setting of this model (:meth:`ComplexModel.set_linear_path`);
the attention head starts at zero so that the model starts as that linear model and attention
learns what it leaves (the contacts with the pocket).
"""
from dataclasses import dataclass

import numpy as np

from .. import autodiff
from ..nn import DistanceBiasTable, FeedForward, LayerNorm, Linear, Module, ModuleList, \
    MultiheadAttention
from ..nn.init import generator
from ..nn.placement import moved
from ..nn.structured_bias import Structure

POOLINGS = ("mean", "sum")


@dataclass
class ComplexStructure(Structure):
    """A batch of complexes: the ligand atoms are the queries (``positions`` (B, N, 3),
    ``types`` (B, N) ligand element indices), the pocket atoms the keys (``key_positions``
    (B, M, 3), ``key_types`` (B, M) pocket element indices counted after the ligand's, as the
    cross-attention's table numbers them), with the pocket's token features ``pocket_tokens``
    (B, M, Fp) and ``pocket_mask`` (B, M) (True = no atom). For the linear path: ``group``
    (B, N, G), the one-hot of each complex's group on its atoms (0 at padded atoms), and
    ``fingerprint`` (B, N, F), each atom's shares of the fingerprint's bits. Every field
    defaults to None.

    Parameters
    ----------
    positions : array (B, N, 3), optional
        Positions of the ligand's atoms, in Angstrom.
    key_positions : array (B, M, 3), optional
        Positions of the pocket's atoms, in Angstrom.
    types : int array (B, N), optional
        Ligand element index of each ligand atom.
    key_types : int array (B, M), optional
        Pocket element index of each pocket atom, counted after the ligand's element types.
    cell : array (B, 3, 3) or (3, 3), optional
        Periodic lattice vectors as rows (None for complexes, which are not periodic).
    pair_codes : int array (B, N, M) or (N, M), optional
        A code per pair; None for complexes, whose biases come from distances.
    query_index : int array (B, N), optional
        Positions of the queries for relative codes (default: the token order).
    key_index : int array (B, M), optional
        Positions of the keys for relative codes (default: the token order).
    pocket_tokens : array (B, M, Fp), optional
        The pocket atoms' token features (element and residue).
    pocket_mask : bool array (B, M), optional
        True where a pocket slot holds no atom.
    group : array (B, N, G), optional
        One-hot of each complex's group on its atoms, 0 at padded atoms (the linear path).
    fingerprint : array (B, N, F), optional
        Each atom's shares of the fingerprint's F bits (the linear path).
    """

    pocket_tokens: object = None
    pocket_mask: object = None
    group: object = None
    fingerprint: object = None


@dataclass
class ComplexModelConfig:
    """Sizes come from :meth:`seqattn.adapters.ComplexAdapter.model_config`: the ligand's and
    pocket's token widths and numbers of element types; ``out_features`` values per complex.
    ``bins`` distance-table values on [0, ``r_max``] Angstrom; ``cutoff`` hides pocket atoms
    farther than it from a ligand atom. ``fingerprint_bits`` (0: none) and ``groups`` size the
    linear path (see the module docstring); it serves one output value.

    Parameters
    ----------
    ligand_features : int
        Width of a ligand atom's token, Fl.
    pocket_features : int
        Width of a pocket atom's token, Fp.
    ligand_types : int
        Number of ligand element types.
    pocket_types : int
        Number of pocket element types.
    out_features : int, default 1
        Values per complex (1 with a linear path).
    pooling : {"mean", "sum"}, default "mean"
        How the per-atom values make the complex's: their mean or their sum over the ligand's
        atoms.
    d_model : int, default 64
        Width of the atoms' hidden vectors.
    nhead : int, default 4
        Attention heads per attention block.
    num_layers : int, default 2
        Layers (self-attention, cross-attention, feed-forward).
    dim_feedforward : int, default 128
        Hidden width of the feed-forward blocks.
    activation : {"gelu", "relu", "silu"}, default "gelu"
        The feed-forward blocks' activation.
    bins : int, default 32
        Values of each distance table on [0, `r_max`].
    r_max : float, default 8.0
        Largest distance the tables resolve, in Angstrom.
    cutoff : float, default 8.0
        Pocket atoms farther than this (Angstrom) from a ligand atom are hidden from it,
        faded out smoothly.
    fingerprint_bits : int, default 0
        Bits of the fingerprint the linear path reads (0: no fingerprint term).
    groups : int, default 1
        Groups (protein targets) with an offset and fingerprint weights each.
    dtype : str, default "float32"
        The parameters' float type.
    seed : int, default 0
        Seed of the parameters' initialization.
    """

    ligand_features: int
    pocket_features: int
    ligand_types: int
    pocket_types: int
    out_features: int = 1
    pooling: str = "mean"
    d_model: int = 64
    nhead: int = 4
    num_layers: int = 2
    dim_feedforward: int = 128
    activation: str = "gelu"
    bins: int = 32
    r_max: float = 8.0
    cutoff: float = 8.0
    fingerprint_bits: int = 0
    groups: int = 1
    dtype: str = "float32"
    seed: int = 0

    @property
    def linear_path(self):
        return self.fingerprint_bits > 0 or self.groups > 1

    def check(self):
        for name in ("ligand_features", "pocket_features", "ligand_types", "pocket_types",
                     "out_features", "d_model", "nhead", "num_layers", "dim_feedforward",
                     "bins", "groups"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} = {value!r}; expected a positive integer")
        bits = self.fingerprint_bits
        if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or bits < 0:
            raise ValueError(f"fingerprint_bits = {bits!r}; expected 0 (no fingerprint path) or "
                             "a positive number of bits")
        if self.linear_path and self.out_features != 1:
            raise ValueError(f"out_features = {self.out_features} with a linear path "
                             f"(fingerprint_bits = {bits}, groups = {self.groups}); the linear "
                             "path serves one value per complex")
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling = {self.pooling!r}; expected one of {POOLINGS}")
        for name in ("r_max", "cutoff"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} = {getattr(self, name)!r}; expected a positive "
                                 "distance in Angstrom")


class ComplexLayer(Module):
    """Ligand self-attention, ligand-to-pocket cross-attention, feed-forward (pre-norm)."""

    def __init__(self, config, dtype, rng):
        super().__init__()
        c = config
        self.norm_self = LayerNorm(c.d_model, dtype=dtype)
        self.self_attn = MultiheadAttention(
            c.d_model, c.nhead, dtype=dtype, seed=rng,
            distance_bias=DistanceBiasTable(c.nhead, bins=c.bins, r_max=c.r_max,
                                            num_types=c.ligand_types, dtype=dtype, seed=rng))
        self.norm_cross = LayerNorm(c.d_model, dtype=dtype)
        self.cross_attn = MultiheadAttention(
            c.d_model, c.nhead, dtype=dtype, seed=rng,
            distance_bias=DistanceBiasTable(c.nhead, bins=c.bins, r_max=c.r_max,
                                            num_types=c.ligand_types + c.pocket_types,
                                            cutoff=c.cutoff, smooth_cutoff=True, dtype=dtype,
                                            seed=rng))
        self.norm_ff = LayerNorm(c.d_model, dtype=dtype)
        self.feed_forward = FeedForward(c.d_model, c.dim_feedforward, c.activation, dtype=dtype,
                                        seed=rng)

    def forward(self, x, key_padding_mask, pocket, pocket_mask, ligand, cross):
        h = self.norm_self(x)
        out, _ = self.self_attn(h, key_padding_mask=key_padding_mask, structure=ligand)
        x = x + out
        out, _ = self.cross_attn(self.norm_cross(x), pocket, pocket,
                                 key_padding_mask=pocket_mask, structure=cross)
        x = x + out
        return x + self.feed_forward(self.norm_ff(x))


class ComplexModel(Module):
    """ligand tokens (B, N, Fl), ``key_padding_mask`` (B, N) and a :class:`ComplexStructure`
    -> (B, out_features) per complex. See the module docstring.

    Parameters
    ----------
    config : ComplexModelConfig
        Sizes and options; checked here (a ValueError names a bad value).
    """

    def __init__(self, config):
        super().__init__()
        config.check()
        self.config = config
        dtype = np.dtype(config.dtype).type
        rng = generator(config.seed)
        self.embed_ligand = Linear(config.ligand_features, config.d_model, dtype=dtype, seed=rng)
        self.embed_pocket = Linear(config.pocket_features, config.d_model, dtype=dtype, seed=rng)
        self.norm_pocket = LayerNorm(config.d_model, dtype=dtype)
        self.layers = ModuleList([ComplexLayer(config, dtype, rng)
                                  for _ in range(config.num_layers)])
        self.norm_out = LayerNorm(config.d_model, dtype=dtype)
        self.head = Linear(config.d_model, config.out_features, dtype=dtype, seed=rng)
        if config.linear_path:
            # the model starts as its linear path; attention learns the residual
            self.head.weight.data[...] = 0
            self.head.bias.data[...] = 0
            self.offset = Linear(config.groups, 1, bias=False, dtype=dtype, seed=rng)
            self.offset.weight.data[...] = 0
        if config.fingerprint_bits:
            self.fingerprint = Linear(config.fingerprint_bits, config.groups, bias=False,
                                      dtype=dtype, seed=rng)
            self.fingerprint.weight.data[...] = 0

    def set_linear_path(self, weights, offsets):
        """Set the linear path to per-group linear models in the model's output units:
        ``weights`` (groups, fingerprint_bits) and ``offsets`` (groups,)."""
        c = self.config
        if not c.linear_path:
            raise ValueError("this model has no linear path; build it with fingerprint_bits > 0 "
                             "or groups > 1")
        offsets = np.asarray(offsets, dtype=np.float64)
        if offsets.shape != (c.groups,):
            raise ValueError(f"offsets has shape {offsets.shape}; expected ({c.groups},)")
        self.offset.weight.data = moved(offsets[None].astype(self.dtype), self.device)
        if c.fingerprint_bits:
            weights = np.asarray(weights, dtype=np.float64)
            if weights.shape != (c.groups, c.fingerprint_bits):
                raise ValueError(f"weights has shape {weights.shape}; expected (groups, "
                                 f"fingerprint_bits) = ({c.groups}, {c.fingerprint_bits})")
            self.fingerprint.weight.data = moved(np.ascontiguousarray(
                weights.astype(self.dtype)), self.device)

    @staticmethod
    def _structures(structure):
        """The self-attention's structure (ligand only) and the cross-attention's."""
        ligand = Structure(positions=structure.positions, types=structure.types)
        cross = Structure(positions=structure.positions, key_positions=structure.key_positions,
                          types=structure.types, key_types=structure.key_types)
        return ligand, cross

    def _linear_terms(self, structure, share):
        """The linear path's per-atom terms (B, N, 1): fingerprint shares times the complex's
        group weights, plus the group's offset times each atom's `share` (1 / atoms)."""
        for name in ("group",) + (("fingerprint",) if self.config.fingerprint_bits else ()):
            if getattr(structure, name) is None:
                raise ValueError(f"structure.{name} is None, but this model has a linear path; "
                                 "build the adapter with the same fingerprint_bits and group")
        terms = autodiff.multiply(self.offset(structure.group), share)
        if self.config.fingerprint_bits:
            chosen = autodiff.multiply(self.fingerprint(structure.fingerprint), structure.group)
            terms = autodiff.add(terms, autodiff.reduce_sum(chosen, axis=2, keepdims=True))
        return terms

    def contributions(self, inputs, key_padding_mask=None, structure=None):
        """Per-atom terms (B, N, out_features) whose sum over a complex's atoms is its output
        (0 at padded atoms)."""
        if not isinstance(structure, ComplexStructure):
            raise TypeError(f"structure must be a ComplexStructure (what ComplexAdapter's batches "
                            f"carry), got {type(structure).__name__}")
        B, N = inputs.shape[:2]
        if key_padding_mask is None:
            key_padding_mask = np.zeros((B, N), dtype=bool)
        ligand, cross = self._structures(structure)
        pocket = self.norm_pocket(self.embed_pocket(structure.pocket_tokens))
        x = self.embed_ligand(inputs)
        for layer in self.layers:
            x = layer(x, key_padding_mask, pocket, structure.pocket_mask, ligand, cross)
        per_atom = self.head(self.norm_out(x))
        present = ~moved(key_padding_mask, "cpu")
        weight = present.astype(np.dtype(self.config.dtype))
        share = weight / np.maximum(weight.sum(axis=1, keepdims=True), 1)
        pooled = share if self.config.pooling == "mean" else weight
        terms = autodiff.multiply(per_atom, moved(np.ascontiguousarray(pooled[..., None]),
                                                  self.device))
        if not self.config.linear_path:
            return terms
        return autodiff.add(terms, self._linear_terms(
            structure, moved(np.ascontiguousarray(share[..., None]), self.device)))

    def forward(self, inputs, key_padding_mask=None, structure=None):
        return autodiff.reduce_sum(self.contributions(inputs, key_padding_mask, structure),
                                   axis=1)

