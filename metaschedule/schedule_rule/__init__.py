"""Schedule rules: how PostOrderApply rewrites each block into design spaces."""

from .base import RULE_KINDS, PyScheduleRule, ScheduleRule, create, register_default_rules

__all__ = ["RULE_KINDS", "PyScheduleRule", "ScheduleRule", "create", "register_default_rules"]
