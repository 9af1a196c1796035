"""Long-range dependence: attention against a local convolution and a recurrent network.

The seeds' argument for attention: any two tokens meet in one step, however far apart, while a
convolution sees only its receptive field and a recurrent network must carry what it saw through
every step in between (and its gradient back through all of them). The task makes the label
depend on exactly two tokens a distance d apart:

    every token is (marker, sign, noise): the noise Gaussian everywhere; at two positions p
    and p + d only (p at random, sequences of max(2 d, 16) tokens) the marker is 1 and the
    sign +-1 at random, elsewhere both are 0. The label: do the two signs agree?

A coin flip scores 0.5. Three models with about the same number of parameters are trained on the
same sequences of 16 tokens (d from 1 to 15; Adam at a constant rate, the same steps), the
learning rate chosen per model on validation sequences drawn alike, then tested at distances d
up to 2,048 (sequences of 4,096 tokens): can what was learnt reach across d tokens? (Training at
every d was tried first: at a few hundred steps attention too sits on the loss plateau of this
XOR-like task for long sequences, and training on thousands of tokens for thousands of steps is
more than a few minutes on two cores.)

* seqattn: SequenceModel, one pre-norm encoder layer, no positions (the task needs none), mean
  pooling, a linear head.
* a local convolution (NumPy, written here): two layers of width-5 convolutions with ReLU
  (a receptive field of 9 tokens), mean pooling, a linear head.
* a recurrent network (NumPy, written here): a GRU read left to right, a linear head on its last
  state, trained by backpropagation through time over the whole sequence.

Run ``python examples/long_range.py [--quick] [--plot long_range.png]``.
"""
import argparse
import dataclasses
import time

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from seqattn.models import SequenceModel, SequenceModelConfig
from seqattn.train import AdamW, CrossEntropyLoss, fit

FEATURES = 3  # marker, sign, noise


@dataclasses.dataclass
class ExampleConfig:
    distances: tuple = (4, 16, 64, 256, 1024, 2048)   # tested
    train_length: int = 16        # trained on N = 16 tokens, d from 1 to 15
    n_train: int = 1024
    n_validation: int = 256
    n_test: int = 512
    epochs: int = 10
    batch_size: int = 32
    learning_rates: tuple = (3e-3, 1e-2)
    d_model: int = 16             # seqattn; the baselines are sized to its parameter count
    seed: int = 0


QUICK = dict(distances=(4, 256), n_validation=128, n_test=256, learning_rates=(3e-3,))


def sequences(n, distance, rng, length=None):
    """(tokens (n, N, 3) float32, labels (n,) int64) for the task in the module docstring;
    `distance` an int or one per sequence, `length` N (default max(2 d, 16))."""
    length = length or max(2 * int(np.max(distance)), 16)
    tokens = np.zeros((n, length, FEATURES), np.float32)
    tokens[..., 2] = rng.normal(size=(n, length))
    first = rng.integers(0, length - distance, size=n)
    rows = np.arange(n)
    for at in (first, first + distance):
        tokens[rows, at, 0] = 1.0
        tokens[rows, at, 1] = rng.choice([-1.0, 1.0], size=n)
    labels = (tokens[rows, first, 1] == tokens[rows, first + distance, 1]).astype(np.int64)
    return tokens, labels


# ---- NumPy baselines: forward, backward, Adam ------------------------------------------------

def softmax_cross_entropy(logits, labels):
    """Mean loss and dloss/dlogits of (B, 2) logits against (B,) labels."""
    shifted = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(shifted)
    p /= p.sum(axis=1, keepdims=True)
    loss = -np.mean(np.log(p[np.arange(len(labels)), labels] + 1e-12))
    p[np.arange(len(labels)), labels] -= 1.0
    return loss, p / len(labels)


def init(rng, shape, fan_in):
    return (rng.normal(size=shape) / np.sqrt(fan_in)).astype(np.float32)


class ConvNet:
    """(B, N, F) -> conv(width 5) -> ReLU -> conv(width 5) -> ReLU -> mean over N -> (B, 2)."""

    WIDTH = 5

    def __init__(self, channels, rng):
        w = self.WIDTH
        self.params = {"w1": init(rng, (FEATURES * w, channels), FEATURES * w),
                       "b1": np.zeros(channels, np.float32),
                       "w2": init(rng, (channels * w, channels), channels * w),
                       "b2": np.zeros(channels, np.float32),
                       "head": init(rng, (channels, 2), channels),
                       "head_b": np.zeros(2, np.float32)}

    def _columns(self, x):
        """(B, N, C) -> (B, N, C * WIDTH): each position's zero-padded neighbourhood."""
        pad = self.WIDTH // 2
        padded = np.pad(x, [(0, 0), (pad, pad), (0, 0)])
        return sliding_window_view(padded, self.WIDTH, axis=1).reshape(*x.shape[:2], -1)

    def _columns_backward(self, dcols, shape):
        pad = self.WIDTH // 2
        dcols = dcols.reshape(*shape, self.WIDTH)
        dpadded = np.zeros((shape[0], shape[1] + 2 * pad, shape[2]), dcols.dtype)
        for j in range(self.WIDTH):
            dpadded[:, j:j + shape[1]] += dcols[..., j]
        return dpadded[:, pad:pad + shape[1]]

    def forward(self, x):
        p = self.params
        c1 = self._columns(x)
        h1 = np.maximum(c1 @ p["w1"] + p["b1"], 0)
        c2 = self._columns(h1)
        h2 = np.maximum(c2 @ p["w2"] + p["b2"], 0)
        pooled = h2.mean(axis=1)
        self._saved = (c1, h1, c2, h2, pooled)
        return pooled @ p["head"] + p["head_b"]

    def backward(self, dlogits):
        p = self.params
        c1, h1, c2, h2, pooled = self._saved
        g = {"head": pooled.T @ dlogits, "head_b": dlogits.sum(0)}
        dh2 = np.repeat((dlogits @ p["head"].T)[:, None] / h2.shape[1], h2.shape[1], axis=1)
        da2 = dh2 * (h2 > 0)
        g["w2"] = np.einsum("bnk,bnc->kc", c2, da2)
        g["b2"] = da2.sum((0, 1))
        dh1 = self._columns_backward(da2 @ p["w2"].T, h1.shape)
        da1 = dh1 * (h1 > 0)
        g["w1"] = np.einsum("bnk,bnc->kc", c1, da1)
        g["b1"] = da1.sum((0, 1))
        return g


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


class GRUNet:
    """(B, N, F) -> GRU (hidden H) read left to right -> linear head on the last state -> (B, 2).

    z = s(x Wz + h Uz + bz), r = s(x Wr + h Ur + br), n = tanh(x Wn + bn + r (h Un + bu)),
    h <- (1 - z) n + z h, as torch.nn.GRU."""

    def __init__(self, hidden, rng):
        self.params = {"w": init(rng, (FEATURES, 3 * hidden), FEATURES),
                       "u": init(rng, (hidden, 3 * hidden), hidden),
                       "b": np.zeros(3 * hidden, np.float32),
                       "bu": np.zeros(hidden, np.float32),
                       "head": init(rng, (hidden, 2), hidden),
                       "head_b": np.zeros(2, np.float32)}
        self.hidden = hidden

    def forward(self, x):
        p, H = self.params, self.hidden
        B, N, _ = x.shape
        projected = x @ p["w"] + p["b"]  # (B, N, 3H), every step's input part at once
        h = np.zeros((B, H), x.dtype)
        states = np.empty((N + 1, B, H), x.dtype)
        gates = np.empty((N, B, 3 * H), x.dtype)  # z, r, n
        recurrent_n = np.empty((N, B, H), x.dtype)
        states[0] = h
        for t in range(N):
            hu = h @ p["u"]
            z = sigmoid(projected[:, t, :H] + hu[:, :H])
            r = sigmoid(projected[:, t, H:2 * H] + hu[:, H:2 * H])
            recurrent_n[t] = hu[:, 2 * H:] + p["bu"]
            n = np.tanh(projected[:, t, 2 * H:] + r * recurrent_n[t])
            h = (1 - z) * n + z * h
            gates[t, :, :H], gates[t, :, H:2 * H], gates[t, :, 2 * H:] = z, r, n
            states[t + 1] = h
        self._saved = (x, states, gates, recurrent_n)
        return h @ p["head"] + p["head_b"]

    def backward(self, dlogits):
        p, H = self.params, self.hidden
        x, states, gates, recurrent_n = self._saved
        N = x.shape[1]
        g = {"head": states[-1].T @ dlogits, "head_b": dlogits.sum(0),
             "u": np.zeros_like(p["u"]), "bu": np.zeros_like(p["bu"])}
        dprojected = np.empty((x.shape[0], N, 3 * H), x.dtype)
        dh = dlogits @ p["head"].T
        for t in reversed(range(N)):
            h = states[t]
            z, r, n = gates[t, :, :H], gates[t, :, H:2 * H], gates[t, :, 2 * H:]
            da_n = dh * (1 - z) * (1 - n * n)
            da_z = dh * (h - n) * z * (1 - z)
            da_r = da_n * recurrent_n[t] * r * (1 - r)
            dhu = np.concatenate([da_z, da_r, da_n * r], axis=1)
            g["u"] += h.T @ dhu
            g["bu"] += (da_n * r).sum(0)
            dprojected[:, t] = np.concatenate([da_z, da_r, da_n], axis=1)
            dh = dh * z + dhu @ p["u"].T
        g["w"] = np.einsum("bnf,bng->fg", x, dprojected)
        g["b"] = dprojected.sum((0, 1))
        return g


class Adam:
    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-8):
        self.params, self.lr, self.betas, self.eps = params, lr, betas, eps
        self.m = {k: np.zeros_like(v) for k, v in params.items()}
        self.v = {k: np.zeros_like(v) for k, v in params.items()}
        self.steps = 0

    def step(self, grads):
        lr = self.lr
        self.steps += 1
        b1, b2 = self.betas
        for k, grad in grads.items():
            self.m[k] = b1 * self.m[k] + (1 - b1) * grad
            self.v[k] = b2 * self.v[k] + (1 - b2) * grad * grad
            m_hat = self.m[k] / (1 - b1 ** self.steps)
            v_hat = self.v[k] / (1 - b2 ** self.steps)
            self.params[k] -= (lr * m_hat / (np.sqrt(v_hat) + self.eps)).astype(np.float32)


def train_numpy(net, data, lr, config):
    """The loop fit runs: shuffled mini-batches per epoch, Adam at a constant rate."""
    x, y = data
    optimizer = Adam(net.params, lr)
    for epoch in range(config.epochs):
        order = np.random.default_rng([config.seed, epoch]).permutation(len(x))
        for start in range(0, len(x), config.batch_size):
            rows = order[start:start + config.batch_size]
            _, dlogits = softmax_cross_entropy(net.forward(x[rows]), y[rows])
            optimizer.step(net.backward(dlogits))
    return net


def numpy_accuracy(net, data, batch_size=64):
    x, y = data
    predicted = np.concatenate([net.forward(x[i:i + batch_size]).argmax(1)
                                for i in range(0, len(x), batch_size)])
    return float(np.mean(predicted == y))


# ---- seqattn ---------------------------------------------------------------------------------

def attention_model(config):
    return SequenceModel(SequenceModelConfig(
        in_features=FEATURES, out_features=2, d_model=config.d_model, nhead=2, num_layers=1,
        dim_feedforward=2 * config.d_model, positions="none", pooling="mean", seed=config.seed))


def train_attention(model, data, lr, config):
    fit(model, CrossEntropyLoss(), AdamW(model, lr=lr, weight_decay=0.0), data,
        epochs=config.epochs, batch_size=config.batch_size, seed=config.seed, progress=False)
    return model


def attention_accuracy(model, data, batch_size=8):
    x, y = data
    model.eval()
    predicted = np.concatenate([np.asarray(model(x[i:i + batch_size])).argmax(1)
                                for i in range(0, len(x), batch_size)])
    return float(np.mean(predicted == y))


def parameter_count(params):
    return sum(int(np.prod(v.shape)) for v in params)


def matched_width(build, budget, rng):
    """The width (channels, hidden units) whose model has the parameter count nearest `budget`."""
    return min(range(2, 128), key=lambda w: abs(parameter_count(build(w, rng).params.values())
                                                - budget))


MODELS = {
    "seqattn attention": (attention_model, train_attention, attention_accuracy),
    "local convolution": (ConvNet, train_numpy, numpy_accuracy),
    "GRU": (GRUNet, train_numpy, numpy_accuracy),
}


def run(config):
    budget = parameter_count(p for _, p in attention_model(config).named_parameters())
    rng = np.random.default_rng(config.seed)
    widths = {"local convolution": matched_width(ConvNet, budget, rng),
              "GRU": matched_width(GRUNet, budget, rng)}
    build = {"seqattn attention": lambda: attention_model(config),
             "local convolution": lambda: ConvNet(widths["local convolution"],
                                                  np.random.default_rng(config.seed)),
             "GRU": lambda: GRUNet(widths["GRU"], np.random.default_rng(config.seed))}
    sizes = {"seqattn attention": budget,
             **{k: parameter_count(build[k]().params.values()) for k in widths}}
    data_rng = np.random.default_rng(config.seed)
    train_distances = lambda n: data_rng.integers(1, config.train_length, size=n)
    train = sequences(config.n_train, train_distances(config.n_train), data_rng,
                      config.train_length)
    validation = sequences(config.n_validation, train_distances(config.n_validation), data_rng,
                           config.train_length)
    results = {name: {} for name in MODELS}
    seconds = {}
    for name, (_, train_fn, accuracy_fn) in MODELS.items():
        start = time.perf_counter()
        trained = [train_fn(build[name](), train, lr, config) for lr in config.learning_rates]
        scores = [accuracy_fn(model, validation) for model in trained]
        model = trained[int(np.argmax(scores))]
        seconds[name] = time.perf_counter() - start
        print(f"{name}: validation accuracy {max(scores):.3f} (lr "
              f"{config.learning_rates[int(np.argmax(scores))]:g})", flush=True)
        for distance in config.distances:
            test = sequences(config.n_test, distance, np.random.default_rng([config.seed,
                                                                               distance]))
            results[name][distance] = accuracy_fn(model, test)
    for distance in config.distances:
        print(f"d = {distance:5d} (N = {max(2 * distance, 16):5d}): " + ", ".join(
            f"{name} {results[name][distance]:.3f}" for name in MODELS))
    return results, sizes, seconds


def plot(results, sizes, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for name, by_distance in results.items():
        ax.plot(list(by_distance), list(by_distance.values()), "o-",
                label=f"{name} ({sizes[name]} parameters)")
    ax.axhline(0.5, color="grey", lw=0.8, ls=":")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("distance d between the two tokens (sequence length max(2d, 16))")
    ax.set_ylabel("test accuracy")
    ax.set_ylim(0.4, 1.02)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="two short distances (CI)")
    parser.add_argument("--plot", help="write the figure of accuracy against d to this file")
    args = parser.parse_args(argv)
    config = ExampleConfig(**(QUICK if args.quick else {}))
    results, sizes, seconds = run(config)
    print("parameters: " + ", ".join(f"{k} {v}" for k, v in sizes.items()))
    print("training seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in seconds.items()))
    if args.plot:
        plot(results, sizes, args.plot)
    return results


if __name__ == "__main__":
    main()
