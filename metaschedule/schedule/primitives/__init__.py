"""Schedule primitives, one mixin class per theme; composed into ``Schedule``."""
