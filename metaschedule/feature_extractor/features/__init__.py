"""The parts of :class:`~metaschedule.feature_extractor.PerStoreFeature`, one per seam:
the slot table (``layout``), op counting (``ops``), index linear forms (``linear``), the
loop-nest walk (``loop_nest``), buffer statistics (``buffers``) and one store's row
(``store_row``)."""

from .layout import Layout, feature_names, slot_table

__all__ = ["Layout", "feature_names", "slot_table"]
