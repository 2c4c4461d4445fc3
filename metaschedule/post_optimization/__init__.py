"""Post-optimization: Droplet search around the best tuned schedule (003's names)."""

from .droplet import Droplet, DropletResult, significantly_faster
from .measure import Measurer
from .post_opt import PostOpt, PostOptResult, post_optimize
from .space import Knob, Space

__all__ = [
    "Droplet",
    "DropletResult",
    "Knob",
    "Measurer",
    "PostOpt",
    "PostOptResult",
    "Space",
    "post_optimize",
    "significantly_faster",
]
