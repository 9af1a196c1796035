"""A molecule model: atoms as tokens, attention whose scores carry a learnable bias per pair of
atom types as a function of their distance (with a cutoff, minimum image in periodic cells),
per-atom outputs (N -> N) and per-structure outputs (N -> 1) summed over atoms (extensive, like
an energy) or averaged (intensive, like a solubility or a class's logits). Forces are minus the
gradient of the energy (structure output 0) with respect to the positions, from a backward
pass through the attention kernels' position gradients.

Softmax attention averages: over neighbours that all look alike (a pure Cu cluster) it gives
the same result however many there are, so it cannot tell a surface atom from a bulk one. Each
atom therefore also attends to an *anchor* of its own, a learned vector per element placed at
the atom's position (a second key, hidden from the other atoms by the distance table at
first): the anchor's share of the attention falls as neighbours crowd in, a learnable
neighbour density like that of embedded-atom potentials (see :class:`AtomLayer`).

Only distances enter (no positional encodings, no coordinates in the tokens), so the outputs
are invariant under translations, rotations and permutations of the atoms, and in periodic
cells under the choice of image (tests/models/test_molecule_model.py checks all four).

Training on forces needs the parameter gradient of a loss on dE/dx, a second derivative; the
first-order passes of :meth:`MoleculeModel.differentiate` are what
:mod:`seqattn.train.force_matching` combines for it.
"""
import contextlib
from dataclasses import dataclass, replace
import functools

import numpy as np

from .. import autodiff
from ..autodiff import Tensor
from ..autodiff.recording import forward_scope, recording
from ..backend import CPU
from ..nn import (DistanceBiasTable, Embedding, FeedForward, LayerNorm, Linear, Module,
                  ModuleList, MultiheadAttention)
from ..nn.init import generator
from ..nn.structured_bias import Structure
from ..nn.placement import moved


@dataclass
class MoleculeModelConfig:
    """``num_types`` atom types (elements); tokens of ``in_features`` features (default: a
    one-hot row per type, as :class:`seqattn.adapters.MoleculeAdapter` makes them; its
    ``model_config(**options)`` fills the sizes). ``structure_outputs`` per-structure values,
    each pooled over the atoms as ``structure_pooling`` says (``"sum"``: extensive, the default
    for all; ``"mean"``: intensive), the first the energy when ``forces``;
    ``structure_classes`` the number of classes of each per-structure class target (their
    logits averaged over atoms); ``atom_outputs`` per-atom values and ``atom_classes`` the
    classes of each per-atom class target.

    Each of the ``num_layers`` pre-norm encoder layers owns a distance table per type pair and
    head: ``bins`` values on [0, ``r_max``] Angstrom, linearly interpolated; keys beyond
    ``cutoff`` are hidden and, with ``smooth_cutoff``, fade out continuously (so energies and
    forces are continuous as atoms cross it). In periodic cells the cutoff must be below half
    the smallest distance between lattice planes, so each neighbour counts once.
    ``force_step`` (Angstrom) is the largest displacement of the central difference that
    trains on forces (see :mod:`seqattn.train.force_matching`).

    Parameters
    ----------
    num_types : int
        Atom types (elements), at least 1.
    in_features : int, default None
        Features per atom token; None: ``num_types`` (a one-hot row per type).
    structure_outputs : int, default 1
        Per-structure values (output 0 is the energy when ``forces``).
    atom_outputs : int, default 0
        Per-atom values.
    structure_pooling : tuple of str, default None
        ``"sum"`` (extensive) or ``"mean"`` (intensive) for each per-structure value; None:
        all ``"sum"``.
    structure_classes : tuple of int, default ()
        Classes (at least 2) of each per-structure class target.
    atom_classes : tuple of int, default ()
        Classes (at least 2) of each per-atom class target.
    forces : bool, default True
        Predict forces as the negative gradient of output 0 with respect to the positions.
    d_model : int, default 64
        Width of every atom token inside the encoder.
    nhead : int, default 4
        Attention heads per layer.
    num_layers : int, default 2
        Pre-norm encoder layers.
    dim_feedforward : int, default 128
        Width of each layer's feed-forward block.
    activation : str, default 'gelu'
        The feed-forward activation: ``"gelu"``, ``"relu"`` or ``"silu"``.
    bins : int, default 64
        Values of each distance table on [0, ``r_max``].
    r_max : float, default 6.0
        The distance tables' range, in Angstrom.
    cutoff : float, default 5.0
        Keys farther than this (Angstrom) are hidden; None: no cutoff.
    smooth_cutoff : bool, default True
        Fade keys out continuously towards ``cutoff``.
    force_step : float, default 1e-3
        The largest displacement (Angstrom) of the central difference that trains on forces.
    dtype : str, default 'float32'
        ``"float32"`` or ``"float64"``, for parameters and activations.
    seed : int, default 0
        Seed of the initial weights.
    """

    num_types: int
    in_features: int = None
    structure_outputs: int = 1
    atom_outputs: int = 0
    structure_pooling: tuple = None
    structure_classes: tuple = ()
    atom_classes: tuple = ()
    forces: bool = True
    d_model: int = 64
    nhead: int = 4
    num_layers: int = 2
    dim_feedforward: int = 128
    activation: str = "gelu"
    bins: int = 64
    r_max: float = 6.0
    cutoff: float = 5.0
    smooth_cutoff: bool = True
    force_step: float = 1e-3
    dtype: str = "float32"
    seed: int = 0

    def pooling(self):
        """'sum' or 'mean' for every structure output (values, then the classes' logits)."""
        values = ("sum",) * self.structure_outputs if self.structure_pooling is None else \
            tuple(self.structure_pooling)
        return values + ("mean",) * sum(self.structure_classes)

    def check(self):
        for name in ("num_types", "d_model", "nhead", "num_layers", "dim_feedforward", "bins"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.structure_outputs < 0 or self.atom_outputs < 0 or \
                self.structure_outputs + self.atom_outputs + len(self.structure_classes) + \
                len(self.atom_classes) == 0:
            raise ValueError(f"structure_outputs = {self.structure_outputs}, atom_outputs = "
                             f"{self.atom_outputs} and no classes: the model needs at least one "
                             "output")
        for name in ("structure_classes", "atom_classes"):
            value = getattr(self, name)
            if not all(isinstance(c, (int, np.integer)) and c >= 2 for c in value):
                raise ValueError(f"{name} = {value!r}; expected a number of classes (>= 2) per "
                                 "class target")
        pooling = self.pooling()[:self.structure_outputs]
        if self.structure_pooling is not None and (
                len(self.structure_pooling) != self.structure_outputs
                or not set(pooling) <= {"sum", "mean"}):
            raise ValueError(f"structure_pooling = {self.structure_pooling!r}; expected 'sum' "
                             f"or 'mean' for each of the {self.structure_outputs} structure "
                             "outputs (or None: all 'sum')")
        if self.forces and self.structure_outputs and pooling[0] != "sum":
            raise ValueError("forces=True derives forces from structure output 0, the energy, "
                             "which is extensive: its structure_pooling must be 'sum'")
        if self.forces and self.structure_outputs < 1:
            raise ValueError("forces=True derives forces from an energy: give "
                             "structure_outputs >= 1 (output 0 is the energy)")
        if self.cutoff is not None and not self.cutoff > 0:
            raise ValueError(f"cutoff must be a positive distance or None, got {self.cutoff!r}")
        if not self.force_step > 0:
            raise ValueError(f"force_step must be a positive distance, got {self.force_step!r}")


ANCHOR_HIDDEN = -8.0  # initial bias of another atom's anchor: e^-8 of the attention


@contextlib.contextmanager
def _frozen(parameters):
    """The parameters take part in the block's forward as constants, so its backward computes
    no parameter gradient and ``.grad`` keeps what it held (for passes that want position
    gradients only)."""
    parameters = [p for p in parameters if p.requires_grad]
    for p in parameters:
        p.requires_grad = False
    try:
        yield
    finally:
        for p in parameters:
            p.requires_grad = True


class AtomLayer(Module):
    """A pre-norm encoder layer over atoms: x (B, N, E) -> (B, N, E). The attention's keys and
    values are the atoms and their anchors (B, 2 N, E): anchor j (a learned vector per element,
    ``anchors``) sits at atom j's position and has type T + type_j, so the distance table
    (2 T types) gives it a bias of its own; it starts at 0 for an atom's own anchor (distance
    0) and far below the atoms' biases elsewhere."""

    def __init__(self, d_model, nhead, dim_feedforward, activation, num_types, bins, r_max,
                 cutoff, smooth_cutoff, dtype=np.float32, seed=None):
        super().__init__()
        rng = generator(seed)
        self.num_types = num_types
        self.norm1 = LayerNorm(d_model, dtype=dtype)
        self.anchors = Embedding(num_types, d_model, dtype=dtype, seed=rng)
        self.self_attn = MultiheadAttention(
            d_model, nhead, dtype=dtype, seed=rng,
            distance_bias=DistanceBiasTable(nhead, bins=bins, r_max=r_max,
                                            num_types=2 * num_types, cutoff=cutoff,
                                            smooth_cutoff=smooth_cutoff, dtype=dtype,
                                            seed=rng))
        self.norm2 = LayerNorm(d_model, dtype=dtype)
        self.feed_forward = FeedForward(d_model, dim_feedforward, activation, dtype=dtype,
                                        seed=rng)

    def forward(self, x, key_padding_mask, structure, anchor_types):
        """``structure``: the atoms as queries and atoms + anchors as keys (key_positions
        (B, 2 N, 3), key_types (B, 2 N)); ``key_padding_mask`` (B, 2 N); ``anchor_types``
        (B, N) the atoms' element indices."""
        h = self.norm1(x)
        attention = self.self_attn
        heads = attention.num_heads
        # the atoms' queries, keys and values in one product, as self-attention's
        q, k, v = autodiff.split_heads(
            autodiff.linear(h, attention.in_proj_weight, attention.in_proj_bias), heads, parts=3)
        # an anchor's key and value depend on its element only: project the anchor table (T
        # rows) and look its rows up, rather than projecting B N anchor rows (the query
        # columns come along unused: one product with the packed weight, no slices of it)
        anchor_rows = autodiff.embedding(anchor_types, autodiff.linear(
            self.anchors.weight, attention.in_proj_weight, attention.in_proj_bias))
        _, anchor_k, anchor_v = autodiff.split_heads(anchor_rows, heads, parts=3)
        out, _ = attention.attend(q, autodiff.concat([k, anchor_k], axis=2),
                                  autodiff.concat([v, anchor_v], axis=2),
                                  key_padding_mask=key_padding_mask, structure=structure)
        x = x + out
        return x + self.feed_forward(self.norm2(x))


def plane_spacings(cell):
    """(B, 3) distances between the lattice planes of cells (B, 3, 3) (rows: vectors)."""
    volume = np.abs(np.linalg.det(cell))
    areas = np.stack([np.linalg.norm(np.cross(cell[:, (k + 1) % 3], cell[:, (k + 2) % 3]),
                                     axis=-1) for k in range(3)], axis=1)
    return volume[:, None] / areas


@functools.lru_cache(maxsize=64)
def _half_spacings(values, B):
    """(B,) half the smallest lattice-plane spacing of cells (B, 3, 3) given as the bytes of
    their float64 values: each forward checks its batch's cells, three a step on forces."""
    half = plane_spacings(np.frombuffer(values, np.float64).reshape(B, 3, 3)).min(axis=1) / 2
    half.setflags(write=False)
    return half


class MoleculeModel(Module):
    """tokens (B, N, F) and a :class:`Structure` (positions (B, N, 3), types (B, N), cell) ->
    (per-structure outputs (B, structure_outputs + sum(structure_classes)), per-atom outputs
    (B, N, atom_outputs + sum(atom_classes)) or None: values first, then the classes' logits).
    :meth:`predict` splits them and adds the forces (B, N, 3) = -d(output 0)/d positions.

    Parameters
    ----------
    config : MoleculeModelConfig
        The atom types, the outputs and the encoder's sizes and distance tables (checked
        here).
    """

    def __init__(self, config):
        super().__init__()
        config.check()
        self.config = config
        dtype = np.dtype(config.dtype).type
        rng = generator(config.seed)
        self.embed = Linear(config.in_features or config.num_types, config.d_model, dtype=dtype,
                            seed=rng)
        self.layers = ModuleList([
            AtomLayer(config.d_model, config.nhead, config.dim_feedforward, config.activation,
                      config.num_types, config.bins, config.r_max, config.cutoff,
                      config.smooth_cutoff, dtype=dtype, seed=rng)
            for _ in range(config.num_layers)])
        self._decay_with_distance()
        self.norm = LayerNorm(config.d_model, dtype=dtype)
        structure_width = config.structure_outputs + sum(config.structure_classes)
        atom_width = config.atom_outputs + sum(config.atom_classes)
        self.structure_head = (Linear(config.d_model, structure_width, dtype=dtype, seed=rng)
                               if structure_width else None)
        self.atom_head = (Linear(config.d_model, atom_width, dtype=dtype, seed=rng)
                          if atom_width else None)

    def _decay_with_distance(self):
        """Start the distance tables (on top of their small random start) with each head's
        attention to atoms at -slope_h * d, slopes -1 .. 1 per Angstrom (like ALiBi's), and
        with an atom's own anchor at 0 but every other anchor at ANCHOR_HIDDEN: from the first
        step the anchors' shares then measure neighbour densities at several ranges, which
        tables starting near zero would take many steps to find."""
        config = self.config
        T = config.num_types
        distances = np.linspace(0, config.r_max, config.bins)
        slopes = np.linspace(-1, 1, config.nhead)
        for layer in self.layers:
            table = layer.self_attn.distance_bias.table.data  # (2T, 2T, H, C)
            table[:, :T] += (-slopes[:, None] * distances).astype(table.dtype)
            table[:, T:, :, 1:] += ANCHOR_HIDDEN

    def _check_structure(self, structure, n_atoms):
        if structure is None or structure.positions is None or structure.types is None:
            raise ValueError("a MoleculeModel needs structure=Structure(positions=(B, N, 3), "
                             "types=(B, N)), as MoleculeAdapter batches carry it")
        if tuple(structure.positions.shape[:2]) != n_atoms:
            raise ValueError(f"structure.positions has shape {tuple(structure.positions.shape)}; "
                             f"expected (B, N, 3) with (B, N) = {n_atoms} like the tokens")
        if structure.cell is None:
            return
        cell = np.asarray(moved(structure.cell, CPU), np.float64)
        cell = np.broadcast_to(cell, (n_atoms[0], 3, 3))
        half = _half_spacings(np.ascontiguousarray(cell).tobytes(), n_atoms[0])
        if self.config.cutoff is None or (half < self.config.cutoff).any():
            b = 0 if self.config.cutoff is None else int(np.argmax(half < self.config.cutoff))
            raise ValueError(f"structure {b} of the batch is periodic with half its smallest "
                             f"lattice-plane spacing {half[b]:.3g} A, but the model's cutoff is "
                             f"{self.config.cutoff}: a neighbour would be seen through one image "
                             "only. Use a larger supercell or a cutoff below that")

    def forward(self, inputs, key_padding_mask=None, structure=None):
        """inputs (B, N, F), key_padding_mask (B, N) bool (True = padding) -> (structure
        outputs (B, S) pooled over the unpadded atoms, atom outputs (B, N, A) or None)."""
        B, N = (int(s) for s in inputs.shape[:2])
        self._check_structure(structure, (B, N))
        x = self.embed(inputs)
        anchored, mask, anchor_types = self._with_anchors(structure, key_padding_mask, (B, N))
        for layer in self.layers:
            x = layer(x, mask, anchored, anchor_types)
        x = self.norm(x)
        per_structure = None
        if self.structure_head is not None:
            real = np.ones((B, N), bool) if key_padding_mask is None else \
                ~np.asarray(moved(autodiff.unwrap(key_padding_mask), CPU))
            mean = np.array([p == "mean" for p in self.config.pooling()])
            # a mean is the sum with each real atom weighted 1 / (the structure's atoms)
            atoms = np.maximum(real.sum(axis=1), 1)[:, None, None]
            weight = np.where(mean, real[..., None] / atoms, real[..., None])
            weight = moved(np.ascontiguousarray(weight, self.dtype), self.device)
            per_structure = (self.structure_head(x) * weight).sum(axis=1)
        atoms = None if self.atom_head is None else self.atom_head(x)
        return per_structure, atoms

    def _with_anchors(self, structure, key_padding_mask, shape):
        """(structure with the anchors as extra keys, key_padding_mask (B, 2 N) on the model's
        device, the anchors' element indices (B, N) there)."""
        device = self.device
        types = np.asarray(moved(autodiff.unwrap(structure.types), CPU), np.int32)
        positions = structure.positions
        if isinstance(positions, np.ndarray):
            key_positions = np.concatenate([positions, positions], axis=1)
        else:  # recorded for the positions' gradient, or on the GPU
            key_positions = autodiff.concat([positions, positions], axis=1)
        padded = np.zeros(shape, bool) if key_padding_mask is None else \
            np.asarray(moved(autodiff.unwrap(key_padding_mask), CPU))
        # the types go where the positions are: the attention takes its arrays on one device
        key_types = np.concatenate([types, types + self.config.num_types], axis=1)
        anchored = Structure(positions=positions, key_positions=key_positions,
                             types=moved(types, device), key_types=moved(key_types, device),
                             cell=structure.cell)
        return (anchored, moved(np.concatenate([padded, padded], axis=1), device),
                moved(types, device))

    def differentiate(self, inputs, key_padding_mask, structure, douts, parameters=True,
                      positions=True):
        """One forward at ``structure.positions`` and one backward: returns the outputs (host
        arrays, as forward's) and d(sum(outputs * douts))/d positions (B, N, 3) on the host
        (None without ``positions``: the backward then skips it).

        ``douts(structure_outputs, atom_outputs)`` gives the (structure, atom) output
        gradients (arrays of those shapes, or None) once the outputs are known. With
        ``parameters`` the same backward adds the parameter gradients into ``.grad``;
        without, ``.grad`` is left as it was."""
        self._check_structure(structure, tuple(int(s) for s in inputs.shape[:2]))
        device = self.device
        at = moved(np.ascontiguousarray(structure.positions, self.dtype), device)
        if positions:
            at = Tensor(at, requires_grad=True)
        structure = replace(structure, positions=at)
        tokens = Tensor(moved(np.ascontiguousarray(inputs, self.dtype), device))
        mask = None if key_padding_mask is None else moved(np.asarray(key_padding_mask), device)
        frozen = contextlib.nullcontext() if parameters else _frozen(self.parameters())
        with frozen:
            with forward_scope(), recording(True):
                outputs = self.forward(tokens, mask, structure)
            host = tuple(None if t is None else moved(t.data, CPU) for t in outputs)
            gradients = douts(*host)
            pairs = [(t, moved(np.ascontiguousarray(g, self.dtype), device))
                     for t, g in zip(outputs, gradients) if t is not None and g is not None]
            grads = autodiff.backward([t for t, _ in pairs], [g for _, g in pairs],
                                      inputs=[at] if positions else [])
        return host, moved(grads[0], CPU) if positions else None

    def predict(self, inputs, key_padding_mask=None, structure=None):
        """{"structure": (B, S), "atoms": (B, N, A) (when the model has atom outputs),
        "forces": (B, N, 3) (with ``forces``)}, host arrays; no parameter gradients."""
        if not self.config.forces:
            with autodiff.no_grad():
                tokens = moved(np.ascontiguousarray(inputs, self.dtype), self.device)
                mask = None if key_padding_mask is None else \
                    moved(np.asarray(key_padding_mask), self.device)
                per_structure, atoms = self(tokens, mask, structure=structure)
            return self.named_outputs(*(None if t is None else moved(t, CPU)
                                        for t in (per_structure, atoms)))
        (per_structure, atoms), gradient = self.differentiate(
            inputs, key_padding_mask, structure, self.energy_gradient, parameters=False)
        return {**self.named_outputs(per_structure, atoms), "forces": -gradient}

    def named_outputs(self, per_structure, atoms):
        """forward's (structure, atom) outputs as predict's dict: ``"structure"`` (B, S) and
        ``"structure_logits"`` (B, sum of structure_classes), ``"atoms"`` (B, N, A) and
        ``"atom_logits"``, the keys of the outputs the config has."""
        config = self.config
        out = {}
        if per_structure is not None:
            S = config.structure_outputs
            out["structure"], out["structure_logits"] = per_structure[:, :S], per_structure[:, S:]
        if atoms is not None:
            A = config.atom_outputs
            out["atoms"], out["atom_logits"] = atoms[..., :A], atoms[..., A:]
        present = {"structure": config.structure_outputs, "atoms": config.atom_outputs,
                   "structure_logits": sum(config.structure_classes),
                   "atom_logits": sum(config.atom_classes)}
        return {k: v for k, v in out.items() if present[k]}

    def output_gradients(self, gradients, like):
        """The gradient of forward's (structure, atom) outputs from one per key of
        :meth:`named_outputs` (a dict; a missing key is zero), `like` forward's outputs."""
        joined = []
        for output, keys in zip(like, (("structure", "structure_logits"),
                                       ("atoms", "atom_logits"))):
            if output is None or not any(k in gradients for k in keys):
                joined.append(None)
                continue
            parts = self.named_outputs(*((output, None) if keys[0] == "structure"
                                         else (None, output)))
            joined.append(np.concatenate([np.asarray(gradients[k], np.float64) if k in gradients
                                          else np.zeros(parts[k].shape) for k in keys
                                          if k in parts], axis=-1))
        return tuple(joined)

    @staticmethod
    def energy_gradient(per_structure, atoms, scale=1.0):
        """Output gradients that select scale * (sum of every structure's energy)."""
        d = np.zeros_like(per_structure)
        d[:, 0] = scale
        return d, None
