"""Benchmark training steps of the molecule and graph models against the same models written in
torch in this file, on the same threads, at the sizes of the examples (issue 44).

torch has no twin of ``seqattn.models.MoleculeModel`` or ``GraphModel``, so each is written here
in torch, parameter for parameter (the seqattn model's weights copied in):

* molecule: atoms as tokens, pre-norm layers whose keys are the atoms and a learned anchor per
  atom (at the atom's position, of type T + its element), scores biased by a learned table per
  (element pair, head) over distance, linearly interpolated, with the smooth cutoff
  log((1 + cos(pi d / cutoff)) / 2) and minimum-image distances in periodic cells; the float
  bias (B, H, N, 2 N), -inf where a key is hidden, goes to
  torch.nn.functional.scaled_dot_product_attention as ``attn_mask``; the per-structure output is
  summed over the real atoms. Energy-only steps: PropertyLoss's MSE of the energy per atom
  (``PropertyLoss.training_step``, what ``fit`` runs for the hydration example). Steps on
  energies and forces (the alloy example): EnergyForceLoss with the example's first-stage
  weights (1, 1), forces = -dE/dx; its parameter gradient is a second derivative, which seqattn
  takes by force matching (``EnergyForceLoss.training_step``: first-order passes, a central
  difference along the force residual) and torch by a double backward
  (``create_graph=True``; scaled_dot_product_attention on its math backend, as the CPU flash
  kernel has no double backward). The two gradients differ by the central difference's error,
  so the second step's losses agree to about 2e-5 there, not to the last digit.
* graph: nodes as tokens (GraphModel: node features and the Laplacian and random-walk encodings,
  the Laplacian's signs flipped at random per step, drawn from the same generator on both sides),
  pre-norm layers with a learned bias per (head, pair code) of the hop-distance (and edge-weight
  bin) codes, a negative code hiding the pair; node-level cross-entropy over the training nodes.

Both sides: the same loss, global-norm clipping to 1.0 and AdamW (lr 1e-3, weight decay 0.01).
Batches are assembled (collated) once, outside the timed step, on both sides; the step takes the
batch's host arrays (seqattn: as ``fit`` hands them on; torch: tensors sharing them) and does
everything else inside: the anchors and distances, bias tables, encodings, forward, loss,
backward, clipping and the optimizer. Rows:

* hydration: examples/hydration_free_energy.py's model (d_model 64, 2 layers, 4 heads, FFN 128,
  32 bins on [0, 6] A, cutoff 5 A: the one the quick run and the full run choose), one batch of
  16 FreeSolv molecules (heavy atoms, ETKDG conformers) of the example's training order;
* alloy: examples/alloy_forces.py's model (quick: d_model 32, FFN 64; full: 48, 96; 2 layers, 4
  heads, 36 bins on [0, 3.5] A, cutoff 3.4 A), one batch of 4 Cu-Au structures (clusters and
  periodic 2 x 2 x 2 supercells of 32 atoms, EMT energies and forces), the energy-only step and
  the step on energies and forces (above);
* connectome: examples/connectome_cell_types.py's model (d_model 32, 2 layers, 4 heads, FFN 64,
  8 Laplacian and 8 random-walk encodings, dropout 0.1) on the 209-neuron graph, with attention
  over the synaptic partners and hop codes ("edges", the quick run's) and over all neurons with
  hop and synapse-count bin codes ("global", 81 codes).

The losses of both sides' first two steps (the second after clipping and AdamW) are printed and
must agree to 1e-4 relative (the script stops otherwise: the twin has drifted); with dropout
they are taken on copies of both models without it, as random masks cannot agree. Then steps
of the two alternate (``train.py``'s ``median_seconds``) and the medians and ratio = torch ms /
seqattn ms are printed, with the load and the CPU's model name. ``--threads 1`` (the default)
times the CPU seconds of the calling thread, as ``train.py --threads 1`` does.

    python benchmarks/train_structured.py                 # every row, 1 thread, 20 repeats
    python benchmarks/train_structured.py --only graph --repeats 5
    python benchmarks/train_structured.py --profile   # where seqattn's steps go, no timing
    python benchmarks/train_structured.py --attention --only molecule

``--profile`` times the seqattn steps alone with ``profile_train_step.py``'s exclusive timers
(kernels, checks, allocation, ops, autodiff, modules, loss and optimizer; CPU ms of the thread
per step, medians of ``--repeats`` steps, each after a plain one) and names the functions that
take most of it. ``--attention`` times the attention op alone (forward + backward, 1 thread, CPU
ms, medians) at each molecule row's sizes, with its batch's positions and types and its first
layer's table: the distance bias as the model passes it, without the cutoff's envelope, without
types, a dense float bias (B, H, N, M) with its gradient instead, and no bias.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "examples")]

from train import median_seconds  # noqa: E402  (benchmarks/train.py)

from seqattn.graphs import random_sign_flips  # noqa: E402
from seqattn.models import build  # noqa: E402
from seqattn.train import AdamW, CrossEntropyLoss, EnergyForceLoss, PropertyLoss  # noqa: E402
from seqattn.train import clip_factor, global_grad_norm  # noqa: E402
from seqattn.train.batches import as_training_batch  # noqa: E402

LR, WEIGHT_DECAY, CLIP = 1e-3, 0.01, 1.0
AGREE = 1e-4  # relative difference allowed between the two sides' losses


# ---- data and seqattn models, as the examples build them ----------------------------------------


def hydration_case():
    """(model, training batch, label) of the hydration example's model and first batch."""
    import hydration_free_energy as example
    import pandas as pd
    from seqattn.adapters import MoleculeAdapter
    from seqattn.readers import from_smiles

    config = example.ExampleConfig(**example.QUICK)
    table = pd.read_csv(example.freesolv_path())
    ds = from_smiles(table["smiles"], properties={example.TARGET: table["expt"]},
                     atom_features=example.ATOM_FEATURES, seed=config.seed)
    train, _, _ = example.splits(ds, config)
    adapter = MoleculeAdapter(atom_features=list(example.ATOM_FEATURES)).fit(
        train, targets={example.TARGET: "extensive"})
    model = build(adapter.model_config(
        d_model=config.d_model, nhead=config.nhead, num_layers=config.num_layers,
        dim_feedforward=config.dim_feedforward, bins=config.bins, r_max=config.r_max,
        cutoff=config.cutoffs[0], seed=config.seed))
    batch = next(iter(adapter.batches(train, batch_size=config.batch_size, shuffle=True,
                                      seed=config.seed)))
    return model, as_training_batch(batch), f"d{config.d_model} L{config.num_layers} " \
        f"H{config.nhead} FF{config.dim_feedforward}"


def alloy_case(quick, forces=False):
    """(model, training batch, label) of the alloy example's model (quick or full sizes) on 4
    of its structures; the batch's targets are the energies, and the forces with ``forces``."""
    import alloy_forces as example
    from seqattn.adapters import MoleculeAdapter
    from seqattn.readers import from_ase

    config = example.QUICK if quick else example.ExampleConfig()
    rng = np.random.default_rng(config.seed)
    # a few structures of each kind, made as the example makes them
    structures = example.make_structures(replace(config, n_clusters=8, n_supercells=8), rng)
    ds = from_ase(structures)
    adapter = MoleculeAdapter().fit(ds, targets={"energy": "energy", "forces": "forces"})
    model = build(adapter.model_config(
        d_model=config.d_model, nhead=config.nhead, num_layers=config.num_layers,
        dim_feedforward=config.dim_feedforward, bins=config.bins, r_max=config.r_max,
        cutoff=config.cutoff, seed=config.seed))
    batch = as_training_batch(next(iter(adapter.batches(
        ds, batch_size=config.batch_size, shuffle=True, seed=config.seed))))
    if not forces:
        batch.targets = {"structure": batch.targets["structure"]}
    return model, batch, f"d{config.d_model} L{config.num_layers} H{config.nhead} " \
        f"FF{config.dim_feedforward}"


def connectome_case(attention, weight_bins, dropout=None):
    """(model, training batch, label) of the connectome example's model on seed 0's split."""
    import connectome_cell_types as example
    from seqattn.adapters import GraphAdapter

    config = example.ExampleConfig()
    adjacency, labels = example.connectome()
    split = example.stratified_split(labels, 0, config)
    ds = example.as_dataset(adjacency, labels, example.degree_features(adjacency), split)
    adapter = GraphAdapter(["degrees"], attention=attention, max_distance=config.max_distance,
                           directed=config.directed, edge_weight="weight",
                           edge_weight_bins=weight_bins, laplacian=config.laplacian,
                           random_walk=config.random_walk)
    adapter.fit(ds, targets="cell_type", where=ds.train)
    model = build(adapter.model_config(
        d_model=config.d_model, nhead=config.nhead, num_layers=config.num_layers,
        dim_feedforward=config.dim_feedforward,
        dropout=config.dropout if dropout is None else dropout, seed=0))
    batch = as_training_batch(next(iter(adapter.batches(ds, where=ds.train, shuffle=True,
                                                        seed=0))))
    codes = model.config.pair_bias["num_codes"]
    return model, batch, f"{codes} codes d{config.d_model} L{config.num_layers} " \
        f"H{config.nhead} FF{config.dim_feedforward} p{model.config.dropout}"


# ---- the torch twins ---------------------------------------------------------------------------


def torch_modules():
    """The twins' classes (torch is imported only when the benchmark runs)."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    def attention(layer, heads, query, keys, bias, dropout):
        """Multi-head attention with the packed in-projection of torch.nn.MultiheadAttention
        and a float bias (B, H, N, M)."""
        B, N, E = query.shape
        w, b = layer.in_proj_weight, layer.in_proj_bias
        if keys is query:
            q, k, v = F.linear(query, w, b).chunk(3, dim=-1)
        else:
            q = F.linear(query, w[:E], b[:E])
            k, v = F.linear(keys, w[E:], b[E:]).chunk(2, dim=-1)

        def split(x):  # (B, len, E) -> (B, H, len, D)
            return x.unflatten(-1, (heads, E // heads)).transpose(1, 2)

        out = F.scaled_dot_product_attention(split(q), split(k), split(v), attn_mask=bias)
        out = layer.out_proj(out.transpose(1, 2).flatten(2))
        return F.dropout(out, dropout, layer.training)

    class Attention(nn.Module):
        def __init__(self, d_model, table_shape):
            super().__init__()
            self.in_proj_weight = nn.Parameter(torch.empty(3 * d_model, d_model))
            self.in_proj_bias = nn.Parameter(torch.empty(3 * d_model))
            self.out_proj = nn.Linear(d_model, d_model)
            self.table = nn.Parameter(torch.empty(table_shape))

    class FeedForward(nn.Module):
        def __init__(self, d_model, hidden):
            super().__init__()
            self.linear1, self.linear2 = nn.Linear(d_model, hidden), nn.Linear(hidden, d_model)

        def forward(self, x, dropout=0.0):
            hidden = F.dropout(F.gelu(self.linear1(x)), dropout, self.training)
            return F.dropout(self.linear2(hidden), dropout, self.training)

    class MoleculeTwin(nn.Module):
        """MoleculeModel (seqattn/models/molecule.py) in torch, energy (sum-pooled) output."""

        def __init__(self, config):
            super().__init__()
            T, E, H = config.num_types, config.d_model, config.nhead
            self.config = config
            self.embed = nn.Linear(config.in_features or T, E)
            self.layers = nn.ModuleList()
            for _ in range(config.num_layers):
                layer = nn.Module()
                layer.norm1, layer.norm2 = nn.LayerNorm(E), nn.LayerNorm(E)
                layer.anchors = nn.Embedding(T, E)
                layer.self_attn = Attention(E, (2 * T, 2 * T, H, config.bins))
                layer.feed_forward = FeedForward(E, config.dim_feedforward)
                self.layers.append(layer)
            self.norm = nn.LayerNorm(E)
            self.structure_head = nn.Linear(E, config.structure_outputs)

        def pair_lookup(self, positions, types, padded, cell):
            """Per (batch, atom, key) the flat table index of the lower bin (of head 0), the
            interpolation weight and the additive mask (the smooth cutoff's log, -inf where a
            key is hidden); keys are the atoms, then their anchors."""
            config = self.config
            T, H, C = config.num_types, config.nhead, config.bins
            keys = torch.cat([positions, positions], dim=1)
            key_types = torch.cat([types, types + T], dim=1)
            r = positions[:, :, None] - keys[:, None]  # (B, N, 2N, 3)
            if cell is not None:  # minimum image: the nearest lattice translate
                fractional = r @ torch.linalg.inv(cell)[:, None]
                r = (fractional - torch.round(fractional)) @ cell[:, None]
            squared = (r * r).sum(-1)
            # at d = 0 (an atom and its anchor) the direction is undefined: no gradient, as
            # in seqattn (sqrt's would be infinite)
            zero = squared == 0
            d = torch.where(zero, 0.0, torch.sqrt(torch.where(zero, 1.0, squared)))
            u = torch.clamp(d * ((C - 1) / config.r_max), max=C - 1)
            lower = torch.clamp(torch.floor(u), max=C - 2)
            weight = u - lower
            pair = types[:, :, None] * (2 * T) + key_types[:, None]
            index = pair * (H * C) + lower.long()
            hidden = torch.cat([padded, padded], dim=1)[:, None] | (d >= config.cutoff)
            inside = torch.where(hidden, 0.0, d)  # log(0)'s infinite slope stays out of reach
            fade = torch.log(0.5 * (1 + torch.cos(inside * (torch.pi / config.cutoff))))
            return index, weight, fade.masked_fill(hidden, float("-inf"))

        def forward(self, tokens, padded, positions, types, cell):
            config = self.config
            H, C = config.nhead, config.bins
            index, weight, mask = self.pair_lookup(positions, types, padded, cell)
            index = index[:, None] + (torch.arange(H) * C)[None, :, None, None]  # (B, H, N, M)
            weight, mask = weight[:, None], mask[:, None]
            x = self.embed(tokens)
            for layer in self.layers:
                table = layer.self_attn.table.reshape(-1)
                low, high = table[index], table[index + 1]
                bias = low + weight * (high - low) + mask
                h = layer.norm1(x)
                keys = torch.cat([h, layer.anchors(types)], dim=1)
                x = x + attention(layer.self_attn, H, h, keys, bias, 0.0)
                x = x + layer.feed_forward(layer.norm2(x))
            real = (~padded)[..., None].to(x.dtype)
            return (self.structure_head(self.norm(x)) * real).sum(dim=1)

    class GraphTwin(nn.Module):
        """GraphModel (seqattn/models/graph.py, task "node") in torch."""

        def __init__(self, config):
            super().__init__()
            E, H = config.d_model, config.nhead
            self.config = config
            self.signs = np.random.default_rng([config.seed, 7])  # as GraphModel's
            width = config.in_features + config.laplacian + config.random_walk
            self.embed = nn.Linear(width, E)
            self.layers = nn.ModuleList()
            for _ in range(config.num_layers):
                layer = nn.Module()
                layer.norm1, layer.norm2 = nn.LayerNorm(E), nn.LayerNorm(E)
                layer.self_attn = Attention(E, (H, config.pair_bias["num_codes"]))
                layer.feed_forward = FeedForward(E, config.dim_feedforward)
                self.layers.append(layer)
            self.norm = nn.LayerNorm(E)
            self.head = nn.Linear(E, config.out_features)

        def encodings(self, coords, batch_size):
            """The Laplacian positions (signs flipped at random in training) and random-walk
            return probabilities, as GraphModel appends them."""
            config = self.config
            laplacian = np.stack([coords[f"laplacian_{i}"]
                                  for i in range(1, config.laplacian + 1)], axis=-1)
            if self.training:
                laplacian = laplacian * random_sign_flips(self.signs,
                                                          (batch_size, 1, config.laplacian))
            walks = np.stack([coords[f"random_walk_{s}"]
                              for s in range(1, config.random_walk + 1)], axis=-1)
            columns = np.nan_to_num(np.concatenate([laplacian, walks], axis=-1), nan=0.0)
            return torch.from_numpy(columns.astype(np.float32))

        def forward(self, inputs, padded, coords, codes):
            config = self.config
            x = self.embed(torch.cat([inputs, self.encodings(coords, inputs.shape[0])], dim=-1))
            codes = codes.long()
            mask = torch.zeros(codes.shape).masked_fill(codes < 0, float("-inf"))
            mask = mask.masked_fill(padded[:, None, :], float("-inf"))[:, None]
            codes = codes.clamp(min=0)
            for layer in self.layers:
                bias = layer.self_attn.table[:, codes].transpose(0, 1) + mask  # (B, H, N, M)
                h = layer.norm1(x)
                x = x + attention(layer.self_attn, config.nhead, h, h, bias, config.dropout)
                x = x + layer.feed_forward(layer.norm2(x), config.dropout)
            return self.head(self.norm(x))

    return MoleculeTwin, GraphTwin


def twin_names(name):
    """The twin's name of a seqattn parameter."""
    for ours, theirs in (("model.encoder.encoder.", ""), ("model.encoder.", ""),
                         ("model.head.", "head."), ("distance_bias.", ""), ("pair_bias.", "")):
        name = name.replace(ours, theirs)
    # the graph layers keep linear1 / linear2 on the layer, as torch's encoder layer does
    return re.sub(r"^layers\.(\d+)\.linear", r"layers.\1.feed_forward.linear", name)


def torch_twin(ours, twin_class):
    """The twin of ``ours`` with its weights, every parameter matched by name."""
    import torch

    twin = twin_class(ours.config)
    state = {twin_names(k): torch.from_numpy(v.copy()) for k, v in ours.state_dict().items()}
    missing = set(twin.state_dict()) ^ set(state)
    if missing:
        raise RuntimeError(f"the twin's parameters differ from seqattn's: {sorted(missing)}")
    twin.load_state_dict(state)
    return twin.train()


# ---- the steps ---------------------------------------------------------------------------------


def optimizers(ours, theirs):
    import torch

    return AdamW(ours, lr=LR, weight_decay=WEIGHT_DECAY), \
        torch.optim.AdamW(theirs.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)


def molecule_steps(ours, batch, forces=False):
    """(seqattn step, torch step, {side: the losses of its steps}) for a molecule batch: the
    energy-only step, or with ``forces`` the step on energies and forces (EnergyForceLoss with
    the alloy example's first-stage weights, 1 and 1)."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    MoleculeTwin, _ = torch_modules()
    theirs = torch_twin(ours, MoleculeTwin)
    loss = EnergyForceLoss(1.0, 1.0) if forces else PropertyLoss()
    optimizer, torch_optimizer = optimizers(ours, theirs)
    parameters = list(ours.parameters())
    s = batch.structure
    arrays = (batch.inputs, batch.key_padding_mask, s.positions.astype(np.float32),
              np.asarray(s.types, np.int64),
              None if s.cell is None else np.asarray(s.cell, np.float32))
    tokens, padded, positions, types, cell = (None if a is None else torch.from_numpy(a)
                                              for a in arrays)
    target = torch.from_numpy(np.asarray(batch.targets["structure"], np.float32))
    if forces:
        target_forces = torch.from_numpy(np.asarray(batch.targets["forces"], np.float32))
        known = torch.isfinite(target_forces)  # NaN on padding
    losses = {"seqattn": [], "torch": []}

    def step_ours():
        optimizer.zero_grad()
        value = loss.training_step(ours, batch)  # what fit runs for a molecule batch
        optimizer.step(clip_factor(global_grad_norm(parameters), CLIP))
        losses["seqattn"].append(value)

    def energy_loss(energy):
        atoms = (~padded).sum(dim=1, keepdim=True)
        return (((energy - target) / atoms) ** 2).mean()  # MSE of the energy per atom

    def step_torch():
        value = energy_loss(theirs(tokens, padded, positions, types, cell))
        torch_optimizer.zero_grad()
        value.backward()
        torch.nn.utils.clip_grad_norm_(theirs.parameters(), CLIP)
        torch_optimizer.step()
        losses["torch"].append(value.item())

    def step_torch_forces():
        # torch's CPU flash attention has no double backward; its math backend does
        with sdpa_kernel(SDPBackend.MATH):
            at = positions.detach().requires_grad_()
            energy = theirs(tokens, padded, at, types, cell)
            (gradient,) = torch.autograd.grad(energy[:, 0].sum(), at, create_graph=True)
            value = energy_loss(energy) + ((-gradient - target_forces)[known] ** 2).mean()
            torch_optimizer.zero_grad()
            value.backward()
        torch.nn.utils.clip_grad_norm_(theirs.parameters(), CLIP)
        torch_optimizer.step()
        losses["torch"].append(value.item())

    return step_ours, step_torch_forces if forces else step_torch, losses


def graph_steps(ours, batch):
    """(seqattn step, torch step, {side: the losses of its steps}) for a graph batch."""
    import torch

    _, GraphTwin = torch_modules()
    if ours.model.linear is not None or ours.config.max_degree is not None:
        raise RuntimeError("the twin has no linear path and no degree embeddings")
    theirs = torch_twin(ours, GraphTwin)
    loss = CrossEntropyLoss()
    optimizer, torch_optimizer = optimizers(ours, theirs)
    parameters = list(ours.parameters())
    inputs = np.ascontiguousarray(batch.inputs, np.float32)
    targets = np.asarray(batch.targets)  # class ids, -100 on the nodes without a label
    structure = batch.structure.on(ours.device, ours.dtype)
    inputs_torch, padded = torch.from_numpy(inputs), torch.from_numpy(batch.key_padding_mask)
    codes = torch.from_numpy(structure.pair_codes)
    labels = torch.from_numpy(targets.astype(np.int64))
    losses = {"seqattn": [], "torch": []}

    def step_ours():  # fit's step on a graph batch
        optimizer.zero_grad()
        value = loss(ours(inputs, key_padding_mask=batch.key_padding_mask, coords=batch.coords,
                          structure=structure), targets)
        ours.backward(loss.backward())
        optimizer.step(clip_factor(global_grad_norm(parameters), CLIP))
        losses["seqattn"].append(value)

    def step_torch():
        logits = theirs(inputs_torch, padded, batch.coords, codes)
        value = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(),
                                                  ignore_index=-100)
        torch_optimizer.zero_grad()
        value.backward()
        torch.nn.utils.clip_grad_norm_(theirs.parameters(), CLIP)
        torch_optimizer.step()
        losses["torch"].append(value.item())

    return step_ours, step_torch, losses


def checked_losses(steps):
    """Run two steps of each side (the second after an optimizer step: gradients, clipping and
    AdamW enter it); stop when their losses disagree. Returns both sides' losses."""
    step_ours, step_torch, losses = steps
    for _ in range(2):
        step_ours()
        step_torch()
    for ours, theirs in zip(losses["seqattn"], losses["torch"]):
        if not abs(ours - theirs) <= AGREE * abs(theirs):
            raise SystemExit(f"the losses disagree: seqattn {losses['seqattn']}, torch "
                             f"{losses['torch']}; the torch twin no longer computes the seqattn "
                             "model")
    return losses["seqattn"][:2], losses["torch"][:2]


ROWS = {
    "molecule hydration": lambda: (hydration_case, molecule_steps, {}),
    "molecule alloy quick": lambda: (alloy_case, molecule_steps, {"quick": True}),
    "molecule alloy full": lambda: (alloy_case, molecule_steps, {"quick": False}),
    "molecule alloy forces quick": lambda: (alloy_case, partial(molecule_steps, forces=True),
                                            {"quick": True, "forces": True}),
    "molecule alloy forces full": lambda: (alloy_case, partial(molecule_steps, forces=True),
                                           {"quick": False, "forces": True}),
    "graph connectome edges": lambda: (connectome_case, graph_steps,
                                       {"attention": "edges", "weight_bins": None}),
    "graph connectome global": lambda: (connectome_case, graph_steps,
                                        {"attention": "global", "weight_bins": 4}),
}


def sizes(batch):
    """B, N and the real tokens of a batch."""
    B, N = batch.key_padding_mask.shape
    return f"B{B} N{N} ({int((~batch.key_padding_mask).sum())} real)"


def machine():
    """The CPU's model name (lscpu) and the load (uptime)."""
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    name = next((line.split(":", 1)[1].strip() for line in lscpu.splitlines()
                 if line.startswith("Model name")), "unknown CPU")
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    return f"{name}, {os.cpu_count()} CPUs; uptime: {uptime}"


def profile(rows, repeats, top=6):
    """Print where the seqattn step of each row goes (module docstring)."""
    import profile_train_step as profiler

    profiler.instrument()
    ledger = profiler.LEDGER
    for name, row in rows.items():
        case, make_steps, options = row()
        ours, batch, label = case(**options)
        step_ours, _, _ = make_steps(ours, batch)
        for _ in range(2):
            step_ours()
        plain, profiled = [], []
        seconds, by_function = defaultdict(list), defaultdict(float)
        for _ in range(repeats):
            start = time.thread_time()
            step_ours()
            plain.append(time.thread_time() - start)
            ledger.clear()
            ledger.active = True
            start = time.thread_time()
            ledger.run("step glue", step_ours, (), {})
            profiled.append(time.thread_time() - start)
            ledger.active = False
            for category in profiler.CATEGORIES:
                seconds[category].append(ledger.seconds[category])
            for key, value in ledger.by_function.items():
                by_function[key] += value / repeats
        shares = ", ".join(f"{c} {1e3 * statistics.median(seconds[c]):.2f}"
                           for c in profiler.CATEGORIES)
        print(f"{name} {label} {sizes(batch)}: plain {1e3 * statistics.median(plain):.2f} ms, "
              f"profiled {1e3 * statistics.median(profiled):.2f} ms ({ledger.launches} "
              f"launches): {shares}")
        for (category, function), value in sorted(by_function.items(),
                                                  key=lambda item: -item[1])[:top]:
            print(f"    {category:10} {function:50} {1e3 * value:7.2f} ms")


def attention_variants(rows, repeats):
    """Print the attention op's times with the distance-bias variants (module docstring)."""
    from seqattn import ops
    from seqattn.ops import DistanceBias

    for name, row in rows.items():
        case, _, options = row()
        if case is connectome_case or options.get("forces"):
            continue  # no distance bias; the same attention as the energy-only row
        ours, batch, label = case(**options)
        s, config = batch.structure, ours.config
        B, N = batch.key_padding_mask.shape
        H, M = config.nhead, 2 * N
        D = config.d_model // H
        rng = np.random.default_rng(0)
        q, dout = (rng.normal(size=(B, H, N, D)).astype(np.float32) for _ in range(2))
        k, v = (rng.normal(size=(B, H, M, D)).astype(np.float32) for _ in range(2))
        mask = np.concatenate([batch.key_padding_mask] * 2, axis=1)
        x = s.positions.astype(np.float32)
        types = np.asarray(s.types, np.int32)
        table = ours.layers[0].self_attn.distance_bias.table.data
        cell = None if s.cell is None else s.cell.astype(np.float32)
        common = dict(x=x, y=np.concatenate([x, x], axis=1), r_max=config.r_max, cell=cell)
        typed = dict(common, table=table, types=types,
                     key_types=np.concatenate([types, types + config.num_types], axis=1))
        variants = {
            "as the model": dict(distance_bias=DistanceBias(
                **typed, cutoff=config.cutoff, smooth_cutoff=True)),
            "no envelope": dict(distance_bias=DistanceBias(**typed, cutoff=config.cutoff)),
            "no types, no envelope": dict(distance_bias=DistanceBias(
                **common, table=np.ascontiguousarray(table[0, 0]), cutoff=config.cutoff)),
            "dense bias": dict(bias=rng.normal(size=(B, H, N, M)).astype(np.float32)),
            "no bias": {},
        }
        print(f"{name} {label} {sizes(batch)}: attention B{B} H{H} N{N} M{M} D{D}"
              + (", periodic cells" if cell is not None else ""))
        for variant, bias in variants.items():
            dense = "bias" in bias

            def forward():
                return ops.attention(q, k, v, key_padding_mask=mask, return_lse=True, **bias)

            def backward(out, lse):
                ops.attention_backward(dout, q, k, v, out, lse, key_padding_mask=mask,
                                       bias_requires_grad=dense, **bias)

            backward(*forward())
            times = defaultdict(list)
            for _ in range(repeats):
                start = time.thread_time()
                out, lse = forward()
                times["forward"].append(time.thread_time() - start)
                start = time.thread_time()
                backward(out, lse)
                times["backward"].append(time.thread_time() - start)
            f, b = (statistics.median(times[p]) for p in ("forward", "backward"))
            print(f"    {variant:22} forward {1e3 * f:6.2f} ms, backward {1e3 * b:6.2f} ms, "
                  f"{1e9 * (f + b) / (B * H * N * M):6.1f} ns per score")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--only", help="run the rows whose name contains this")
    parser.add_argument("--profile", action="store_true",
                        help="where the seqattn steps go (1 thread), instead of the timing")
    parser.add_argument("--attention", action="store_true",
                        help="the attention op with distance-bias variants (1 thread), instead "
                             "of the timing")
    args = parser.parse_args()
    rows = {name: row for name, row in ROWS.items() if args.only is None or args.only in name}

    import numba
    import torch
    from threadpoolctl import threadpool_limits

    numba.set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    cpu_clock = args.threads == 1
    clock = time.thread_time if cpu_clock else time.perf_counter
    print(f"machine: {machine()}")
    if args.profile or args.attention:
        numba.set_num_threads(1)
        with threadpool_limits(1):
            (profile if args.profile else attention_variants)(rows, args.repeats)
        return
    print(f"{args.threads} thread(s) each side, torch {torch.__version__}; median ms "
          f"({'CPU time of the thread' if cpu_clock else 'wall'}) of {args.repeats} alternating "
          "steps after the first; ratio = torch ms / seqattn ms (above 1: seqattn faster); "
          "batches collated outside the step")
    with threadpool_limits(args.threads):
        for name, row in rows.items():
            case, make_steps, options = row()
            ours, batch, label = case(**options)
            if getattr(ours.config, "dropout", 0.0):
                # random masks cannot agree: the check runs on copies without dropout
                plain, plain_batch, _ = case(**options, dropout=0.0)
                losses = checked_losses(make_steps(plain, plain_batch))
                step_ours, step_torch, _ = make_steps(ours, batch)
            else:
                step_ours, step_torch, _ = steps = make_steps(ours, batch)
                losses = checked_losses(steps)
            seqattn_s, torch_s = median_seconds([step_ours, step_torch], args.repeats, clock)
            print(f"{name} {label} {sizes(batch)}: seqattn {1e3 * seqattn_s:.2f} ms, torch "
                  f"{1e3 * torch_s:.2f} ms, ratio {torch_s / seqattn_s:.2f}x; losses of steps "
                  "1, 2: "
                  f"seqattn {losses[0][0]:.6f}, {losses[0][1]:.6f}; torch {losses[1][0]:.6f}, "
                  f"{losses[1][1]:.6f}", flush=True)
    print(f"after: {machine()}")


if __name__ == "__main__":
    main()
