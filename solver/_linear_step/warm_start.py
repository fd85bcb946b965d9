"""Where the conjugate-gradient linear steps ("cg", "gram") start each solve, and what they know
of its products without computing them: one small explicit state object, ``WarmStart``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# "cg": X x of the warm start is taken from the previous solves' followed X x, and computed
# by a pass over X every X_REFRESH solves (so that rounding cannot build up); "gram" takes
# G_A w afresh as often.
X_REFRESH = 50


@dataclass
class WarmStart:
    """The previous two solutions x_{k-1} (``previous``) and x_{k-2} (``before``), and what is
    known of them for the current set A without a product: ``g_*`` = X_A^T X_A x (None:
    unknown), ``X_*`` = X x (None: not followed), ``moved`` = X delta of the last solve
    (None: not followed), ``solves`` the solves made."""

    previous: np.ndarray
    before: np.ndarray | None = None
    g_previous: np.ndarray | None = None
    g_before: np.ndarray | None = None
    X_previous: np.ndarray | None = None
    X_before: np.ndarray | None = None
    moved: np.ndarray | None = None
    solves: int = field(default=0)

    @property
    def fresh(self) -> bool:
        """Whether this solve takes its products afresh (every X_REFRESH solves)."""
        return self.solves % X_REFRESH == 0

    def guess(self) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """The start x, and X_A^T X_A x and X x where they are known without a product.

        x: the previous two solutions extrapolated linearly, 2 x_{k-1} - x_{k-2} (on
        100k x 2,000 its residual is ~40x smaller than x_{k-1}'s), or the previous one alone.
        X_A^T X_A x of a solution is its b - r - c x (M x = b - r), followed through the rows
        that entered and left A since (``follow``); X x of a solution is followed through its
        CG, and taken afresh every X_REFRESH solves."""
        fresh = self.fresh
        if self.before is None or (self.g_previous is not None and self.g_before is None):
            return (self.previous.copy(),
                    None if self.g_previous is None else self.g_previous.copy(),
                    None if fresh or self.X_previous is None else self.X_previous.copy())
        x = 2.0 * self.previous
        x -= self.before
        gx = None if self.g_previous is None else 2.0 * self.g_previous - self.g_before
        Xx = None
        if not fresh and self.X_previous is not None and self.X_before is not None:
            Xx = 2.0 * self.X_previous
            Xx -= self.X_before
        return x, gx, Xx

    def follow(self, rows: Callable[[], Any], sign: np.ndarray | None) -> None:
        """X_A^T X_A x for the new set: X_A'^T X_A' x = X_A^T X_A x + U^T S U x over the rows
        U = ``rows()`` that changed (S = diag(sign): +1 entered, -1 left); ``sign`` None:
        unknown (after G or the preconditioner is rebuilt; the rows are not taken then)."""
        if sign is None or self.g_previous is None:
            self.g_previous = self.g_before = None
            return
        U = rows()
        kept = [self.previous] + ([] if self.g_before is None else [self.before])
        signed = np.asarray(U @ np.stack(kept, axis=1))
        signed *= sign[:, None]
        moved = np.asarray(U.T @ signed)
        self.g_previous += moved[:, 0]
        if self.g_before is not None:
            self.g_before += moved[:, 1]

    def record(self, x: np.ndarray, gx: np.ndarray, Xx: np.ndarray | None) -> None:
        """A solve ended at x, with X_A^T X_A x = gx and X x = Xx (None: not followed)."""
        self.g_before, self.g_previous = self.g_previous, gx
        self.before, self.previous, self.moved = self.previous, x, Xx
        self.X_before, self.X_previous = self.X_previous, Xx
        self.solves += 1
