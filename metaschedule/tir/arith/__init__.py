"""Arithmetic analysis of the IR: simplifier, integer bounds, affine iteration maps."""

from .analyzer import Analyzer, eval_bound, simplify
from .evaluate import evaluate
from .int_set import NEG_INF, POS_INF, ConstIntBound, IntervalSet, union_interval
from .iter_map import (
    IterMapResult,
    IterMark,
    IterSplitExpr,
    IterSumExpr,
    detect_iter_map,
    is_affine_binding,
    iter_map_simplify,
    normalize_iter_map_to_expr,
)

__all__ = [
    "NEG_INF",
    "POS_INF",
    "Analyzer",
    "ConstIntBound",
    "IntervalSet",
    "IterMapResult",
    "IterMark",
    "IterSplitExpr",
    "IterSumExpr",
    "detect_iter_map",
    "eval_bound",
    "evaluate",
    "is_affine_binding",
    "iter_map_simplify",
    "normalize_iter_map_to_expr",
    "simplify",
    "union_interval",
]
