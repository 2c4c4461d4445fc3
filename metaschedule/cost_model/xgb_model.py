"""``XGBModel``: gradient-boosted trees over per-store features (needs ``xgboost``).

How it learns. A candidate has one feature row per store; the booster predicts a
score per row and a candidate's score is the sum of its rows' scores (sum pooling,
as in TVM). The pooling is done in a custom objective: each row gets the gradient of
its candidate's weighted squared error ``w * (sum_rows - y)^2 / 2`` with
``w = y + 0.1`` (good candidates matter most; failures still count). Targets ``y`` are
normalised throughputs, ``min_cost / cost`` per workload (failures are 0).

Training stops once the average peak score of the training set (see
:func:`~metaschedule.cost_model.metric.average_peak_score`, top ``average_peak_n``)
has not improved for ``early_stopping_rounds`` rounds; the model then kept is the
last one, which has gone on fitting the squared error in the meantime. Below
``num_warmup_samples`` measured candidates, :meth:`XGBModel.predict` returns random
scores from the model's own generator (seeded by ``config.seed``), as TVM does.

Pre-trained start. With ``pretrained`` (the default; see :mod:`.pretrained`) the model
starts from a booster trained on a corpus of other workloads' measurements, with
features of the schedule, the workload and the CPU: it ranks candidates before the task
has measured anything (``informed``: while warming up, its predictions are the
pre-trained booster's, not random), and once ``num_warmup_samples`` are measured,
fine-tuning continues boosting from it on the task's own samples.

``save(path)`` writes one tar file holding ``meta.json`` (counters and the generator
state), ``data.npz`` (all training features and costs) and, once trained,
``model.json`` (the booster in xgboost's JSON format).
"""

from __future__ import annotations

import logging
from typing import Any, Literal, NamedTuple

import numpy as np

from ..feature_extractor import FeatureExtractor, PerStoreFeature
from ..registry import register
from .learned import LearnedCostModel, resolve_extractor
from .metric import TrainingData, average_peak_score, pooled
from .pretrained import default_path, load_pretrained

__all__ = ["XGBConfig", "XGBModel"]

logger = logging.getLogger(__name__)

#: upper bound on boosting rounds; early stopping ends training long before
MAX_BOOST_ROUNDS = 10000


class XGBConfig(NamedTuple):
    """Booster parameters (TVM's fields and defaults)."""

    max_depth: int = 10
    gamma: float = 0.001
    min_child_weight: float = 0
    eta: float = 0.2
    seed: int = 43
    nthread: int | None = None
    tree_method: Literal["auto", "exact", "approx", "hist", "gpu_hist"] = "auto"

    def to_dict(self) -> dict[str, Any]:
        """Parameters for ``xgboost.train`` (``gpu_hist`` becomes ``hist`` on ``cuda``)."""
        out: dict[str, Any] = {
            "max_depth": self.max_depth,
            "gamma": self.gamma,
            "min_child_weight": self.min_child_weight,
            "eta": self.eta,
            "seed": self.seed,
        }
        if self.nthread is not None:
            out["nthread"] = self.nthread
        if self.tree_method == "gpu_hist":
            out.update(tree_method="hist", device="cuda")
        elif self.tree_method != "auto":
            out["tree_method"] = self.tree_method
        return out


@register("cost_model", "xgb")
class XGBModel(LearnedCostModel):
    """XGBoost cost model.

    Args:
        extractor: the feature extractor, or the kind to create.
        config: booster parameters.
        num_warmup_samples: below this many measured candidates, predictions are random.
        early_stopping_rounds: stop after this many rounds without a better average peak.
        verbose_eval: log the training metrics every this many rounds (debug level).
        average_peak_n: how many top predictions the average peak score looks at.
        adaptive_training: retrain only once the data has grown by a fifth.
        num_tuning_cores: threads for xgboost (overrides ``config.nthread``).
        tree_method: overrides ``config.tree_method``.
        pretrained: start from a pre-trained booster: True (the default one, see
            :func:`~metaschedule.cost_model.pretrained.default_path`; none there, or an
            ``extractor`` other than its own: start empty), a path to a model file
            (``metaschedule corpus train`` writes one), or False (start empty, as TVM).
    """

    def __init__(
        self,
        *,
        extractor: Literal["per-store-feature"] | FeatureExtractor = "per-store-feature",
        config: XGBConfig = XGBConfig(),  # noqa: B008 - an immutable NamedTuple
        num_warmup_samples: int = 100,
        early_stopping_rounds: int = 50,
        verbose_eval: int = 25,
        average_peak_n: int = 32,
        adaptive_training: bool = True,
        num_tuning_cores: int | None = None,
        tree_method: Literal["auto", "exact", "approx", "hist", "gpu_hist"] | None = None,
        pretrained: bool | str = True,
    ) -> None:
        try:  # fail here, not at the first update, when it is missing
            import xgboost  # noqa: F401
        except ImportError as err:
            raise ImportError(
                "XGBModel needs the xgboost package, which is not installed: "
                "`pip install xgboost-cpu` (CPU-only, what metaschedule depends on) or "
                "`pip install xgboost`; or tune with cost_model='mlp' or 'random'"
            ) from err

        base = _resolve_pretrained(pretrained, extractor)
        if base is not None and isinstance(extractor, str):
            extractor = PerStoreFeature(**base.extractor_settings)
        extractor = resolve_extractor(extractor, "XGBModel")
        if num_tuning_cores is not None:
            config = config._replace(nthread=num_tuning_cores)
        if tree_method is not None:
            config = config._replace(tree_method=tree_method)
        if early_stopping_rounds < 1 or average_peak_n < 1:
            raise ValueError(
                "XGBModel: early_stopping_rounds and average_peak_n must be >= 1, "
                f"got {early_stopping_rounds} and {average_peak_n}"
            )
        self.extractor = extractor
        self.config = config
        self.num_warmup_samples = num_warmup_samples
        self.early_stopping_rounds = early_stopping_rounds
        self.verbose_eval = verbose_eval
        self.average_peak_n = average_peak_n
        self.adaptive_training = adaptive_training
        self.data = TrainingData()
        self.booster: Any = None
        self.last_train_size = 0
        self.rng = np.random.default_rng(config.seed)
        #: boosting rounds at most (early stopping usually ends training before)
        self.max_rounds = MAX_BOOST_ROUNDS
        self.pretrained = base
        if base is not None:
            self.booster = base.booster(self._params())

    @property
    def informed(self) -> bool:
        """True with a booster: trained on the task, or pre-trained (then also while
        warming up: the pre-trained booster scores, not chance)."""
        return self.booster is not None

    # ------------------------------------------------------------------ persistence

    def save(self, path: str) -> None:
        """Write the booster, the training data and the counters to the tar file ``path``."""
        model: dict[str, bytes] = {}
        if self.booster is not None:
            model["model.json"] = bytes(self.booster.save_raw("json"))
        self._write_archive(path, "XGBModel", {}, model)

    def load(self, path: str) -> None:
        """Restore what :meth:`save` wrote to ``path``.

        The booster, training data, counters and generator state come from the file;
        settings (config, warm-up, early stopping) stay those of this instance.
        """
        import xgboost as xgb

        _, members = self._read_archive(path, "XGBModel")
        self.booster = None if self.pretrained is None else self.pretrained.booster(self._params())
        if "model.json" in members:
            self.booster = xgb.Booster(params=self._params())
            self.booster.load_model(bytearray(members["model.json"]))

    # ------------------------------------------------------------------ learning

    @property
    def is_trained(self) -> bool:
        return self.booster is not None

    def predict_features(self, features: list[np.ndarray]) -> np.ndarray:
        """Pooled booster scores of per-candidate feature matrices."""
        import xgboost as xgb

        if self.booster is None:
            raise RuntimeError(
                "XGBModel.predict_features: the model is not trained yet; "
                f"it trains once {self.num_warmup_samples} samples are added"
            )
        rows = np.array([len(f) for f in features], dtype=np.int64)
        if rows.sum() == 0:
            return np.zeros(len(features))
        x = np.concatenate(features).astype(np.float32, copy=False)
        margin = self.booster.predict(
            xgb.DMatrix(x, nthread=self.config.nthread or -1), output_margin=True
        )
        return pooled(margin.astype(np.float64), rows)

    def _params(self) -> dict[str, Any]:
        return {
            **self.config.to_dict(),
            "base_score": 0.0,
            "verbosity": 0,
            "disable_default_eval_metric": 1,
        }

    def _train(self) -> None:
        import xgboost as xgb

        rows = np.array([len(f) for f in self.data.features], dtype=np.int64)
        if rows.sum() == 0:
            return
        ys = self.data.targets()
        weights = ys + 0.1
        group = np.repeat(np.arange(len(rows)), rows)
        x = np.concatenate(self.data.features)
        dtrain = xgb.DMatrix(x, nthread=self.config.nthread or -1)
        peak_name = f"a-peak@{self.average_peak_n}"

        def objective(preds: np.ndarray, _: Any) -> tuple[np.ndarray, np.ndarray]:
            residual = pooled(preds.astype(np.float64), rows) - ys
            return (weights * residual)[group], weights[group]

        def metric(preds: np.ndarray, _: Any) -> list[tuple[str, float]]:
            pred = pooled(preds.astype(np.float64), rows)
            rmse = float(np.sqrt(np.mean((pred - ys) ** 2)))
            return [
                ("p-rmse", rmse),
                (peak_name, average_peak_score(pred, ys, self.average_peak_n)),
            ]

        stop = _peak_early_stopping(peak_name, self.early_stopping_rounds, self.verbose_eval)
        base = None if self.pretrained is None else self.pretrained.booster(self._params())
        self.booster = xgb.train(
            self._params(),
            dtrain,
            num_boost_round=self.max_rounds,
            xgb_model=base,
            obj=objective,
            evals=[(dtrain, "tr")],
            custom_metric=metric,
            verbose_eval=False,
            callbacks=[stop],
        )
        self.last_train_size = self.data_size
        logger.debug(
            "XGBModel: trained on %d samples, %d rounds, best %s=%.4f at round %d",
            self.data_size,
            stop.rounds,
            peak_name,
            stop.best,
            stop.best_round,
        )


def _resolve_pretrained(pretrained: bool | str, extractor: Any) -> Any:
    """The pre-trained model ``pretrained`` names (see :class:`XGBModel`), or None.

    Raises:
        ValueError: a path that is not a pre-trained model, or whose features differ from
            those of the given ``extractor``.
    """
    if pretrained is False or pretrained is None:
        return None
    explicit = not isinstance(pretrained, bool)
    path = str(pretrained) if explicit else default_path()
    if path is None:
        return None
    try:
        base = load_pretrained(path)
    except ValueError:
        if explicit:
            raise
        logger.warning("XGBModel: the pre-trained model %s does not load; starting empty", path)
        return None
    if isinstance(extractor, str):
        if extractor == "per-store-feature":
            return base
        mine = None
    else:
        mine = getattr(extractor, "settings", lambda: None)()
    if mine != base.extractor_settings:
        if explicit:
            raise ValueError(
                f"XGBModel: the pre-trained model {path!r} was trained with the features of "
                f"PerStoreFeature(**{base.extractor_settings}), not those of the given "
                f"extractor {extractor!r}; pass pretrained=False, or no extractor"
            )
        logger.info("XGBModel: a custom feature extractor; not using the pre-trained model")
        return None
    return base


def _peak_early_stopping(metric: str, patience: int, verbose_eval: int) -> Any:
    """An xgboost callback that stops once ``metric`` on "tr" has not improved for
    ``patience`` rounds (defined here so importing this module does not import xgboost)."""
    import xgboost as xgb

    class PeakEarlyStopping(xgb.callback.TrainingCallback):
        def __init__(self) -> None:
            super().__init__()
            self.best, self.best_round, self.rounds = -1.0, -1, 0

        def after_iteration(self, model: Any, epoch: int, evals_log: dict) -> bool:
            log = evals_log["tr"]
            peak = log[metric][-1]
            self.rounds = epoch + 1
            if peak > self.best + 1e-12:
                self.best, self.best_round = peak, epoch
            if verbose_eval and epoch % verbose_eval == 0:
                logger.debug(
                    "XGBModel round %d: tr-p-rmse=%.6f tr-%s=%.6f",
                    epoch,
                    log["p-rmse"][-1],
                    metric,
                    peak,
                )
            return epoch - self.best_round >= patience

    return PeakEarlyStopping()
