"""The linear path of a task model: outputs += a linear function of the inputs.

With ``linear=True`` in a TokenModelConfig or SequenceModelConfig the model adds, to what its
head says, a linear map of its own inputs: per token for a TokenModel (float tokens through a
Linear, ids through an Embedding of ``out_features``, i.e. linear in the one-hot ids), of the
inputs' mean over the unpadded tokens for a SequenceModel (for ids: their frequencies). The
model's function class then contains ridge or logistic regression on those inputs
(:class:`seqattn.baselines.TokenFeatures`, ``PooledFeatures(statistics=("mean",))``). The path
starts at zero, so an untrained model is the model without it; ``start_from_linear`` instead
starts it from a fitted linear baseline with the head zeroed, so training learns the residual
(:func:`seqattn.baselines.warm_start`); an optimizer given :func:`residual_parameters` keeps
it there and trains the residual only. For forecasts, ``linear_leads`` makes the TokenModel's
path one linear map per lead: with ``linear_tokens`` of the whole sample
(:class:`LeadLinearPath`), without it of each token's own inputs, shared by the tokens
(:class:`LeadTokenLinearPath`); these are the function classes of
:class:`seqattn.baselines.LeadRidge` flattened and per token, which can start them. Off by
default: see CHANGELOG.md for what was measured.
"""
import numpy as np

from .. import autodiff
from ..nn import Embedding, Linear, Module


class LinearPath(Module):
    """inputs (B, N, F) floats or (B, N) ids -> (B, N, out) per token, or with ``pooled`` the
    mean over unpadded tokens (B, out)."""

    def __init__(self, in_features, vocab_size, out_features, dtype):
        super().__init__()
        if vocab_size is not None:
            self.map = Embedding(vocab_size, out_features, dtype=dtype, seed=0)
        else:
            self.map = Linear(in_features, out_features, dtype=dtype, seed=0)
        for _, parameter in self.named_parameters():
            parameter.data[...] = 0

    def forward(self, inputs, key_padding_mask=None, pooled=False, coords=None):
        mapped = self.map(inputs)
        return autodiff.masked_mean(mapped, key_padding_mask) if pooled else mapped

    def set(self, weight, bias):
        """Take a fitted linear map: `weight` (out, D) and `bias` (out,) acting on the float
        inputs (D = F), or on the one-hot ids (D <= vocab_size: ids past D get the bias)."""
        weight, bias = np.asarray(weight), np.asarray(bias)
        if isinstance(self.map, Linear):
            expected = self.map.weight.data.shape
            if weight.shape != expected or bias.shape != expected[:1]:
                raise ValueError(f"weight has shape {weight.shape} and bias {bias.shape}; the "
                                 f"linear path expects {expected} and {expected[:1]}")
            self.map.weight.data[...] = weight
            self.map.bias.data[...] = bias
            return
        vocab, out = self.map.weight.data.shape
        if weight.ndim != 2 or weight.shape[0] != out or weight.shape[1] > vocab \
                or bias.shape != (out,):
            raise ValueError(f"weight has shape {weight.shape} and bias {bias.shape}; the linear "
                             f"path over ids expects ({out}, at most {vocab}) and ({out},)")
        table = np.broadcast_to(bias, (vocab, out)).copy()
        table[:weight.shape[1]] += weight.T
        self.map.weight.data[...] = table


DAY = 86400.0


def lead_index(leads, coords):
    """Each sample's position (B,) in `leads`, read from its first token's ``coords["lead"]``."""
    if coords is None or "lead" not in coords or "time" not in coords:
        raise ValueError("the lead linear path reads coords['lead'] and coords['time'] "
                         "(forecast batches); this call has "
                         f"{None if coords is None else sorted(coords)}")
    lead = np.asarray(coords["lead"], np.float64)[:, 0]
    index = np.array([leads.index(x) if x in leads else -1 for x in lead])
    if (index < 0).any():
        raise ValueError(f"lead {lead[index < 0][0]:g} is not one of the path's leads "
                         f"{list(leads)} (linear_leads in the model's config)")
    return index


def _check_lead(leads, lead):
    if float(lead) not in leads:
        raise ValueError(f"lead {lead:g} is not one of the path's leads {list(leads)}")
    return leads.index(float(lead))


class LeadLinearPath(Module):
    """Forecasts: inputs (B, N, F) -> (B, N, out), one linear map per lead of every input of the
    sample (the N * F values flattened, the sine and cosine of the initial time's hour from
    ``coords["time"]`` in seconds, and a constant), the lead read from ``coords["lead"]`` (one
    of `leads`, in the coordinate's units). Its function class is that of
    :class:`seqattn.baselines.LeadRidge`, which can start it. The hour and the choice of lead
    are built on the host from the coordinates."""

    def __init__(self, n_tokens, in_features, out_features, leads, dtype):
        super().__init__()
        self.n_tokens, self.out_features = int(n_tokens), int(out_features)
        self.leads = tuple(float(lead) for lead in leads)
        self.width = self.n_tokens * in_features + 3  # inputs, sin and cos of the hour, 1
        self.map = Linear(self.width, len(self.leads) * self.n_tokens * self.out_features,
                          bias=False, dtype=dtype, seed=0)
        self.map.weight.data[...] = 0

    def forward(self, inputs, key_padding_mask=None, coords=None):
        B, N = int(inputs.shape[0]), int(inputs.shape[1])
        if N != self.n_tokens:
            raise ValueError(f"inputs have {N} tokens; the lead linear path was built for "
                             f"linear_tokens = {self.n_tokens}")
        index = lead_index(self.leads, coords)
        phase = np.nan_to_num(2 * np.pi * (np.asarray(coords["time"], np.float64)[:, 0] % DAY)
                              / DAY)
        hour = np.stack([np.sin(phase), np.cos(phase), np.ones(B)], axis=1).astype(inputs.dtype)
        own = autodiff.concat([autodiff.reshape(inputs, (B, -1)), hour], axis=1)
        # every lead's map on the sample, then the sample's own lead kept (a one-hot weight)
        every = autodiff.reshape(self.map(own), (B, len(self.leads), -1))
        chosen = np.zeros((B, len(self.leads), self.n_tokens * self.out_features),
                          inputs.dtype)
        chosen[np.arange(B), index] = 1
        kept = autodiff.reduce_sum(autodiff.multiply(every, chosen), axis=1)
        return autodiff.reshape(kept, (B, self.n_tokens, self.out_features))

    def set_lead(self, lead, weight, bias):
        """Take the fitted map of `lead`: `weight` (N * out, N * F + 2) on the flattened inputs
        with the hour's sine and cosine, `bias` (N * out,)."""
        position = _check_lead(self.leads, lead)
        expected = (self.n_tokens * self.out_features, self.width - 1)
        if np.shape(weight) != expected or np.shape(bias) != expected[:1]:
            raise ValueError(f"weight has shape {np.shape(weight)} and bias {np.shape(bias)}; "
                             f"lead {lead:g}'s block expects {expected} and {expected[:1]}")
        rows = position * expected[0]
        self.map.weight.data[rows:rows + expected[0], :-1] = weight
        self.map.weight.data[rows:rows + expected[0], -1] = bias


class LeadTokenLinearPath(Module):
    """Forecasts: inputs (B, N, F) -> (B, N, out), per token one linear map per lead of the
    token's own inputs and the sine and cosine of its initial time's hour (``coords["time"]``
    in seconds), the same maps for every token; the lead read from ``coords["lead"]`` (one of
    `leads`). Its function class is that of :class:`seqattn.baselines.LeadRidge` when that
    regresses per token ("lead token ridge"), which can start it."""

    def __init__(self, in_features, out_features, leads, dtype):
        super().__init__()
        self.out_features = int(out_features)
        self.leads = tuple(float(lead) for lead in leads)
        self.width = int(in_features) + 2  # inputs, sin and cos of the hour
        self.map = Linear(self.width, len(self.leads) * self.out_features, dtype=dtype, seed=0)
        for _, parameter in self.map.named_parameters():
            parameter.data[...] = 0

    def forward(self, inputs, key_padding_mask=None, coords=None):
        B, N = int(inputs.shape[0]), int(inputs.shape[1])
        index = lead_index(self.leads, coords)
        phase = np.nan_to_num(2 * np.pi * (np.asarray(coords["time"], np.float64) % DAY) / DAY)
        hour = np.stack([np.sin(phase), np.cos(phase)], axis=2).astype(inputs.dtype)
        own = autodiff.concat([inputs, hour], axis=2)
        # every lead's map on each token, then the sample's own lead kept (a one-hot weight)
        every = autodiff.reshape(self.map(own), (B, N, len(self.leads), self.out_features))
        chosen = np.zeros((B, N, len(self.leads), self.out_features), inputs.dtype)
        chosen[np.arange(B), :, index] = 1
        return autodiff.reduce_sum(autodiff.multiply(every, chosen), axis=2)

    def set_lead(self, lead, weight, bias):
        """Take the fitted map of `lead`: `weight` (out, F + 2) on a token's inputs with the
        hour's sine and cosine, `bias` (out,)."""
        position = _check_lead(self.leads, lead)
        expected = (self.out_features, self.width)
        if np.shape(weight) != expected or np.shape(bias) != expected[:1]:
            raise ValueError(f"weight has shape {np.shape(weight)} and bias {np.shape(bias)}; "
                             f"lead {lead:g}'s map on each token expects {expected} and "
                             f"{expected[:1]}")
        rows = slice(position * expected[0], (position + 1) * expected[0])
        self.map.weight.data[rows] = weight
        self.map.bias.data[rows] = bias


def linear_path(config):
    """The config's LinearPath (with ``linear_leads``: LeadLinearPath given ``linear_tokens``,
    else LeadTokenLinearPath), or None when ``config.linear`` is off."""
    if not config.linear:
        return None
    dtype = np.dtype(config.dtype).type
    if getattr(config, "linear_leads", None):
        if config.in_features is None:
            raise ValueError("linear_leads needs float tokens (in_features); got in_features="
                             f"{config.in_features!r} (vocab_size={config.vocab_size!r})")
        if not config.linear_tokens:
            return LeadTokenLinearPath(config.in_features, config.out_features,
                                       config.linear_leads, dtype)
        return LeadLinearPath(config.linear_tokens, config.in_features, config.out_features,
                              config.linear_leads, dtype)
    return LinearPath(config.in_features, config.vocab_size, config.out_features, dtype)


def zero_head(model):
    """Set the task head's weights and bias to zero: the model's outputs are its path's."""
    for _, parameter in model.head.named_parameters():
        parameter.data[...] = 0


def start_from_leads(model, maps):
    """Start `model` (with a LeadLinearPath or LeadTokenLinearPath) at the per-lead linear maps
    ``{lead: (weight, bias)}`` (see their ``set_lead``), the head zeroed."""
    if not isinstance(getattr(model, "linear", None), (LeadLinearPath, LeadTokenLinearPath)):
        raise ValueError(f"{type(model).__name__} has no lead linear path; build it with "
                         "linear=True and linear_leads=... in its config")
    missing = set(model.linear.leads) - {float(lead) for lead in maps}
    if missing:
        raise ValueError(f"maps has no map for leads {sorted(missing)}; the path has "
                         f"{list(model.linear.leads)}")
    for lead, (weight, bias) in maps.items():
        model.linear.set_lead(lead, weight, bias)
    zero_head(model)


def start_from_linear(model, weight, bias):
    """Start `model` (with a linear path) at the linear map (weight, bias): the path takes it,
    the head is zeroed, so the model's outputs are the linear map's until training moves it."""
    if getattr(model, "linear", None) is None:
        raise ValueError(f"{type(model).__name__} has no linear path; build it with "
                         "linear=True in its config")
    model.linear.set(weight, bias)
    zero_head(model)


def residual_parameters(model):
    """`model`'s (name, parameter) pairs outside its linear path: an optimizer given these keeps
    a path started from a baseline fixed there and trains the residual only
    (``AdamW(residual_parameters(model), lr=...)``)."""
    return [(name, p) for name, p in model.named_parameters() if not name.startswith("linear.")]

