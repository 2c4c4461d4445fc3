"""``MLPModel``: a small multi-layer perceptron in plain numpy, trained with Adam.

Where TVM's MLPModel is a pre-trained PyTorch network over segment-summed store
features, this one learns online like :class:`~metaschedule.cost_model.XGBModel` and
needs nothing beyond numpy. A candidate's feature matrix (one row per store) is pooled
into one vector: the sum, mean and maximum of each column and ``log2(1 + rows)``.
Inputs are standardised with the training data's statistics; the network
(ReLU hidden layers, one linear output) fits the normalised throughput
``min_cost / cost`` with the same weighted squared error as the XGBoost model
(``w = y + 0.1``). Each retraining starts from fresh weights drawn from the model's
own generator, so results depend only on ``seed`` and the data.

``save(path)`` writes one tar file: ``meta.json`` (settings, counters, generator
state), ``data.npz`` (training data) and ``model.npz`` (weights and input statistics).
"""

from __future__ import annotations

import io
import itertools
from typing import Any, Literal

import numpy as np

from ..feature_extractor import FeatureExtractor
from ..registry import register
from .learned import LearnedCostModel, resolve_extractor
from .metric import TrainingData

__all__ = ["MLPModel", "pool_features"]


def pool_features(features: list[np.ndarray], width: int) -> np.ndarray:
    """``[candidates, 3 * width + 1]``: column sums, means, maxima, and log2(1 + rows)."""
    out = np.zeros((len(features), 3 * width + 1), dtype=np.float64)
    for i, f in enumerate(features):
        if len(f):
            out[i, :width] = f.sum(axis=0)
            out[i, width : 2 * width] = f.mean(axis=0)
            out[i, 2 * width : 3 * width] = f.max(axis=0)
        out[i, -1] = np.log2(1.0 + len(f))
    return out


@register("cost_model", "mlp")
class MLPModel(LearnedCostModel):
    """A numpy MLP cost model on pooled per-store features.

    Args:
        extractor: the feature extractor, or the kind to create.
        hidden_sizes: widths of the hidden layers.
        learning_rate: Adam's step size.
        epochs: passes over the training data per retraining.
        batch_size: candidates per Adam step.
        weight_decay: L2 penalty on the weights.
        num_warmup_samples: below this many measured candidates, predictions are random.
        adaptive_training: retrain only once the data has grown by a fifth.
        seed: seed of the model's generator (initial weights, shuffling, warm-up scores).
    """

    def __init__(
        self,
        *,
        extractor: Literal["per-store-feature"] | FeatureExtractor = "per-store-feature",
        hidden_sizes: tuple[int, ...] = (64, 64),
        learning_rate: float = 2e-3,
        epochs: int = 100,
        batch_size: int = 32,
        weight_decay: float = 1e-2,
        num_warmup_samples: int = 100,
        adaptive_training: bool = True,
        seed: int = 0,
    ) -> None:
        extractor = resolve_extractor(extractor, "MLPModel")
        if not hidden_sizes or any(h < 1 for h in hidden_sizes) or epochs < 1 or batch_size < 1:
            raise ValueError(
                "MLPModel: hidden_sizes must be positive widths and epochs, batch_size >= 1; "
                f"got hidden_sizes={hidden_sizes}, epochs={epochs}, batch_size={batch_size}"
            )
        self.extractor = extractor
        self.hidden_sizes = tuple(int(h) for h in hidden_sizes)
        self.learning_rate = learning_rate
        self.epochs = epochs
        self.batch_size = batch_size
        self.weight_decay = weight_decay
        self.num_warmup_samples = num_warmup_samples
        self.adaptive_training = adaptive_training
        self.rng = np.random.default_rng(seed)
        self.data = TrainingData()
        self.last_train_size = 0
        self.params: list[np.ndarray] | None = None  # W0, b0, W1, b1, ...
        self.mean: np.ndarray | None = None
        self.std: np.ndarray | None = None

    # ------------------------------------------------------------------ persistence

    def save(self, path: str) -> None:
        """Write settings, training data and weights to the tar file ``path``."""
        model: dict[str, bytes] = {}
        if self.params is not None:
            buf = io.BytesIO()
            arrays: dict[str, Any] = {"mean": self.mean, "std": self.std}
            arrays.update((f"p{i}", p) for i, p in enumerate(self.params))
            np.savez(buf, **arrays)
            model["model.npz"] = buf.getvalue()
        self._write_archive(path, "MLPModel", {"hidden_sizes": list(self.hidden_sizes)}, model)

    def load(self, path: str) -> None:
        """Restore what :meth:`save` wrote to ``path``."""
        meta, members = self._read_archive(path, "MLPModel")
        self.hidden_sizes = tuple(meta["hidden_sizes"])
        self.params = self.mean = self.std = None
        if "model.npz" in members:
            with np.load(io.BytesIO(members["model.npz"]), allow_pickle=False) as z:
                self.mean, self.std = z["mean"], z["std"]
                self.params = [z[f"p{i}"] for i in range(2 * (len(self.hidden_sizes) + 1))]

    # ------------------------------------------------------------------ learning

    @property
    def is_trained(self) -> bool:
        return self.params is not None

    def predict_features(self, features: list[np.ndarray]) -> np.ndarray:
        """Network outputs for per-candidate feature matrices."""
        mean, std = self.mean, self.std
        if self.params is None or mean is None or std is None:
            raise RuntimeError(
                "MLPModel.predict_features: the model is not trained yet; "
                f"it trains once {self.num_warmup_samples} samples are added"
            )
        x = (pool_features(features, len(mean) // 3) - mean) / std
        return self._forward(x)[0]

    def _forward(self, x: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        params = self._trained_params()
        acts = [x]
        h = x
        n_layers = len(params) // 2
        for i in range(n_layers):
            h = h @ params[2 * i] + params[2 * i + 1]
            if i < n_layers - 1:
                h = np.maximum(h, 0.0)
                acts.append(h)
        return h[:, 0], acts

    def _trained_params(self) -> list[np.ndarray]:
        """The weights (W0, b0, W1, b1, ...), set by :meth:`_train` or :meth:`load`."""
        if self.params is None:
            raise RuntimeError("MLPModel: the network is used before it is trained or loaded")
        return self.params

    def _train(self) -> None:
        width = self.data.width()
        if width is None:
            raise RuntimeError("MLPModel: training needs at least one sample")
        x = pool_features(self.data.features, width)
        ys = self.data.targets()
        weights = ys + 0.1
        self.mean = x.mean(axis=0)
        self.std = x.std(axis=0) + 1e-6
        x = (x - self.mean) / self.std
        sizes = [x.shape[1], *self.hidden_sizes, 1]
        self.params = []
        for fan_in, fan_out in itertools.pairwise(sizes):
            self.params += [
                self.rng.normal(0.0, np.sqrt(2.0 / fan_in), (fan_in, fan_out)),
                np.zeros(fan_out),
            ]
        adam = _Adam(self.params, self.learning_rate)
        n = len(ys)
        for _ in range(self.epochs):
            order = self.rng.permutation(n)
            for start in range(0, n, self.batch_size):
                idx = order[start : start + self.batch_size]
                adam.step(self._gradients(x[idx], ys[idx], weights[idx]))
        self.last_train_size = self.data_size

    def _gradients(self, x: np.ndarray, y: np.ndarray, w: np.ndarray) -> list[np.ndarray]:
        """Gradients of ``mean(w * (f(x) - y)^2) / 2`` plus weight decay."""
        params = self._trained_params()
        out, acts = self._forward(x)
        delta = (w * (out - y) / len(y))[:, None]
        grads: list[np.ndarray] = [np.empty(0)] * len(params)
        for i in range(len(params) // 2 - 1, -1, -1):
            W = params[2 * i]
            grads[2 * i] = acts[i].T @ delta + self.weight_decay * W
            grads[2 * i + 1] = delta.sum(axis=0)
            if i:
                delta = (delta @ W.T) * (acts[i] > 0)
        return grads


class _Adam:
    """Adam updates applied in place to a list of arrays."""

    def __init__(
        self,
        params: list[np.ndarray],
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        self.params, self.lr, self.betas, self.eps = params, lr, betas, eps
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]
        self.t = 0

    def step(self, grads: list[np.ndarray]) -> None:
        self.t += 1
        b1, b2 = self.betas
        c1, c2 = 1 - b1**self.t, 1 - b2**self.t
        for p, g, m, v in zip(self.params, grads, self.m, self.v):
            m *= b1
            m += (1 - b1) * g
            v *= b2
            v += (1 - b2) * g * g
            p -= self.lr * (m / c1) / (np.sqrt(v / c2) + self.eps)
