"""Feature extractors: turn measure candidates into feature matrices for cost models."""

from .base import FeatureExtractor, PyFeatureExtractor
from .per_store_feature import PerStoreFeature

__all__ = ["FeatureExtractor", "PerStoreFeature", "PyFeatureExtractor"]
