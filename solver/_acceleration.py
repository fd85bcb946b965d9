"""Anderson acceleration of MSVMAv's fixed-point map (docs/solver.md, "Convergence").

One iteration of ``_msvmav_core.iterate`` is a map x_k = T(x_{k-1}) on the unit-norm
coefficients (the semi-variance step, the sign safeguard, the average-margin step, the
normalisation). Its fixed point is the converged model, but the plain iteration approaches it
slowly: on 690 magic rows (RBF, gamma "scale", alpha 16, beta 1/4) its residual
||T(x) - x|| / sqrt(n) is 5e-5 at the paper's T = 100 (J = SV / theta^2 10 % above its fixed
point's), 1e-8 at 4,000 iterations and 1e-11 at 8,000.

Type-II Anderson acceleration with memory m keeps the last m + 1 pairs (x_j, g_j = T(x_j) - x_j)
and extrapolates to

    x_acc = T(x_k) - sum_j gamma_j (T(x_{j+1}) - T(x_j)),
    gamma = argmin || g_k - sum_j gamma_j (g_{j+1} - g_j) ||

(the least-squares problem in the space's own inner product: w^T diag(mu) v for linear and
low-rank coefficients, a^T K b for the exact kernel's), scaled back to unit norm. f = K a is
linear in the coefficients, so the exact kernel's extrapolated f is the same combination of
the kept f's: no product with K (``propose``).

The safeguard (``advance``): an extrapolation stands only if the plain map's residual at it,
||T(x_acc) - x_acc||, is at most RESIDUAL_SLACK times the residual ||T(x_k) - x_k|| of the
point it replaced; else
the iteration goes back to the plain image T(x_k) (already computed) and the memory restarts,
one iteration lost. A safeguard on J (take x_acc only where J(x_acc) <= J(T(x_k))) was tried
first and dropped: from a warm start on the other side of the fixed point J rises towards it
(600 rows: 0 of 57 extrapolations taken), and MSVMAv's fixed point is not a minimiser of J.
"""

from __future__ import annotations

import numpy as np

# The values of MSVMAv's ``acceleration``.
ACCELERATIONS = ("anderson", "none")
# Pairs kept beyond the newest (the memory m of Anderson's method).
ANDERSON_MEMORY = 5
# Spaces of more coefficients than this iterate plainly: the 2 (m + 1) kept vectors would
# outweigh the rest of a matrix-free fit (the sparse "cg" path keeps ~17 D-vectors; at
# D = 10^6, 12 more are 96 MB).
ANDERSON_MAX_DIM = 2**17
# An extrapolation stands while the plain map's residual at it is at most this many times the
# residual of the point it replaced (``advance``). 1 (a monotone residual) rejected 78 of 168
# extrapolations on a 700-row RBF fit and met the objective rule 0.61 (relative) away from the
# fixed point; 2 rejected none there and met it 1e-3 away (36 iterations).
RESIDUAL_SLACK = 2.0
# Tikhonov term of the least-squares problem, relative to its Gram matrix's trace.
REGULARISATION = 1e-10


class Anderson:
    """The extrapolation of the module docstring for one space (``propose``)."""

    def __init__(self, space, memory: int = ANDERSON_MEMORY) -> None:
        self.space, self.memory = space, memory
        self.images: list[np.ndarray] = []  # T(x_j)
        self.residuals: list[np.ndarray] = []  # g_j
        self.image_f: list[np.ndarray] = []  # f of T(x_j) (empty where the space has no f)
        self.residual_f: list[np.ndarray] = []
        # (T(x_k), its f, its summary, ||T(x_k) - x_k||) while x_acc stands in for T(x_k)
        self.pending: tuple | None = None
        self.rejected = 0

    def advance(self, coef: np.ndarray, f, image: np.ndarray, image_f, found: tuple,
                residual: float) -> tuple[np.ndarray, np.ndarray | None, tuple, str]:
        """The next iterate from the plain step coef -> ``image`` (``found`` its summary,
        ``residual`` the step's distance): (coef, f, summary, how), ``how`` "accelerated" (the
        extrapolation), "plain" (none yet, or a singular problem) or "rejected" (coef was an
        extrapolation whose residual exceeds the one of the point it replaced: that point's
        plain image instead, and the memory restarts)."""
        if self.pending is not None and not residual <= RESIDUAL_SLACK * self.pending[3]:
            image, image_f, found, _ = self.pending
            self.images, self.residuals, self.image_f, self.residual_f = [], [], [], []
            self.pending = None
            self.rejected += 1
            return image, image_f, found, "rejected"
        proposal = self.propose(coef, f, image, image_f)
        summary = None if proposal is None else self.space.summary(*proposal)
        if summary is None or not summary[0] > 0:  # theta > 0, as every plain iterate's
            self.pending = None
            return image, image_f, found, "plain"
        self.pending = (image, image_f, found, residual)
        return (*proposal, summary, "accelerated")

    def propose(self, coef: np.ndarray, f: np.ndarray | None, image: np.ndarray,
                image_f: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None] | None:
        """Record T(coef) = ``image`` (f's alike) and return the unit-norm extrapolation
        (coef, f), or None before two pairs are kept or where the least-squares problem is
        singular. Where the space's ``combines_f`` (the exact kernel: f = K a costs a product
        with K) the extrapolation's f is the kept f's combination; elsewhere (linear, low-rank:
        X w costs O(n D) and keeping m + 1 n-vectors would double a matrix-free fit's memory)
        it is ``space.margins_of`` the extrapolated coefficients (None where the space
        summarises the margins itself)."""
        self.images = [*self.images[-self.memory:], image]
        self.residuals = [*self.residuals[-self.memory:], image - coef]
        combine = bool(self.space.combines_f) and f is not None
        if combine:
            self.image_f = [*self.image_f[-self.memory:], image_f]
            self.residual_f = [*self.residual_f[-self.memory:], image_f - f]
        if len(self.images) < 2:
            return None
        dG = np.diff(self.residuals, axis=0)
        dGf = np.diff(self.residual_f, axis=0) if combine else None
        H = self.space.inner(dG, dGf, dG, dGf)
        H = 0.5 * (H + H.T)
        trace = float(np.trace(H))
        if not (trace > 0 and np.isfinite(trace)):
            return None
        b = self.space.inner(dG, dGf, self.residuals[-1][None, :],
                             self.residual_f[-1][None, :] if combine else None)[:, 0]
        try:
            gamma = np.linalg.solve(H + REGULARISATION * trace * np.eye(H.shape[0]), b)
        except np.linalg.LinAlgError:
            return None
        coef_a = image - gamma @ np.diff(self.images, axis=0)
        f_a = (image_f - gamma @ np.diff(self.image_f, axis=0) if combine
               else self.space.margins_of(coef_a))
        return _unit(self.space, coef_a, f_a)


def _unit(space, coef: np.ndarray, f: np.ndarray | None
          ) -> tuple[np.ndarray, np.ndarray | None] | None:
    """(coef, f) scaled to the space's unit norm; None where the norm is zero or not finite."""
    try:
        nrm = space.norm(coef, f)
    except ValueError:  # a^T K a = 0
        return None
    if not (nrm > 0 and np.isfinite(nrm)):
        return None
    coef /= nrm
    if f is not None:
        f /= nrm
    return coef, f
