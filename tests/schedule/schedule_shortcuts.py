"""Switching off the replay shortcuts of the schedule, to check they change nothing."""

from __future__ import annotations

import contextlib
from unittest import mock

from metaschedule.schedule import affine, bindings, linear
from metaschedule.schedule.analysis import regions


@contextlib.contextmanager
def general_paths():
    """Switch the replay shortcuts off: every binding goes through the simplifier (none
    answered by the memo of simplified bindings), every region through int_set, every
    proof through the analyzer, every affine check through the full detection."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(
            mock.patch.object(bindings.LoopVarRewriter, "_fast", lambda self, old, values: None)
        )
        stack.enter_context(mock.patch.object(regions, "relax_linear", lambda *a: None))
        stack.enter_context(mock.patch.object(affine, "is_tiling_binding", lambda r, d: False))
        stack.enter_context(mock.patch.object(affine, "affine_memo", lambda state: None))
        stack.enter_context(
            mock.patch.object(
                bindings.BindingsMemo,
                "simplify",
                lambda self, *args: bindings.simplify_bindings(*args),
            )
        )
        stack.enter_context(
            mock.patch.object(
                linear.LinearProver, "le", lambda self, a, b: self.ana.can_prove(a <= b)
            )
        )
        stack.enter_context(
            mock.patch.object(linear.LinearProver, "simplify", lambda self, e: self.ana.simplify(e))
        )
        yield
