"""The cluster-backed *spaces* of ``solver._msvmav_core.iterate`` (linear MSVMAv, coef = w in
R^D, the identity metric): the iteration itself is the shared one; only its sums over rows run
on the cluster (``_cluster.ClusterRows``), and the D-sized solve runs here.

As on the local "gram" path (``_msvmav_core.PrimalSpace`` with ``MarginBounds``), the margins
f = X w are never formed here: theta = s . w / n exactly (s = X^T t, the average-margin shift),
the sign test is s . w' < 0, and one pass over the blocks gives A's size, the semi-variance and
what the step needs. The active set stays on the cluster: ``summary`` returns an ``ActiveSet``
holding only |A| (``np.count_nonzero`` of it is |A|, the one use ``iterate`` makes of a mask).

* ``GramSpace`` (D x D, the local "dense" path's system): each pass returns, summed over the
  blocks, the change of G_A = X_A^T X_A and s_A = X_A^T t_A over the rows that entered or left
  A since the previous pass (all of A on the first pass, every F_REFRESH passes, and on every
  pass with update="rebuild"): one D x D reduce an iteration. The step solves
  (c I + G_A) delta = theta s_A - G_A w here by Cholesky, c = n beta.
* ``MatrixFreeSpace`` (the local "cg" path): each pass leaves the blocks' masks of A on their
  workers and returns s_A, diag(G_A) and (with the intercept) X_A^T 1_A, D-vectors; the step is
  preconditioned conjugate gradients (scipy's) whose every product X_A^T X_A v is one more
  pass (a D-vector each way). The preconditioner is the local path's: Jacobi's, the bias
  column eliminated exactly (``_linear_step.ConjugateGradientSystem``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import linalg
from scipy.sparse.linalg import LinearOperator, cg

from .._msvmav_core import undefined_direction
from . import _blocks
from ._cluster import ClusterRows

# G_A from all of A's rows (not from the rows that changed) every this many passes.
F_REFRESH = 50
# The conjugate gradients' tolerance and cap, as on the local "cg" path.
CG_RTOL = 1e-10
CG_MAX_ITER = 5000


class ActiveSet:
    """A = {i : m_i < theta} of one pass, kept on the cluster; here only its size."""

    def __init__(self, count: int) -> None:
        self.count = count

    def __array_function__(self, func, types, args, kwargs):
        if func is np.count_nonzero:
            return self.count
        return NotImplemented


class ClusterSpace:
    """What both cluster spaces share: w's norm, the initial direction, theta and the sign.

    ``metric`` (the low-rank kernel path's, ``solver.distributed._kernel``): the rows are
    the kernel's rotated features X = U Sigma^2 (``MSVMAv._fit_features``) and the norm is
    ||w||_mu with mu = Sigma^2 = ``metric``; the step's system is diag(c (1 + mu)) + G_A
    and the initial direction U^T t = X^T t / mu, as ``_msvmav_core.PrimalSpace`` with
    ``base_extra=mu, mu=mu``. None: the identity (linear MSVMAv)."""

    def __init__(self, rows: ClusterRows, positive: Any, beta: float,
                 metric: np.ndarray | None = None) -> None:
        self.rows, self.positive = rows, positive
        self.dim = rows.D
        self.c = rows.n * beta
        self.sums = rows.reduce(_blocks.shift, positive=positive)  # X^T t
        self.mu = np.ones(self.dim) if metric is None else metric
        self.sqrt_mu = np.sqrt(self.mu)
        self.base = self.c if metric is None else self.c * (1.0 + metric)
        self.shift = self.sums if metric is None else self.sums / metric
        self.shift_f = 0.0  # f is never formed (margins_of is None)
        # named counters for fit_info_ (read by MSVMAv._run_tasks through counters())
        self.counts: dict[str, int] = {}

    def counters(self) -> dict[str, int]:
        """The step's named counters: full Gram reduces (``gram_builds``) and reduces of the
        rows that entered or left A (``gram_updates``), or the matrix-free path's passes over
        the rows for A (``active_set_passes``) and its ``cg_iterations``."""
        return dict(self.counts)

    def _count(self, name: str, by: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + by

    def norm(self, coef: np.ndarray, f: None) -> float:
        return float(np.sqrt(coef @ (self.mu * coef)))

    def initial(self) -> np.ndarray:
        nrm = self.norm(self.shift, None)
        if not nrm > 0:
            raise undefined_direction()
        return self.shift / nrm

    def margins_of(self, coef: np.ndarray) -> None:
        return None

    def signed_sum(self, coef: np.ndarray, f: None) -> float:
        return float(self.sums @ coef)

    def theta(self, coef: np.ndarray) -> float:
        return float(self.sums @ coef) / self.rows.n

    def distance(self, a: np.ndarray, b: np.ndarray) -> float:
        return float(np.linalg.norm(self.sqrt_mu * (a - b)) / math.sqrt(self.dim))


class GramSpace(ClusterSpace):
    """One D x D reduce an iteration; the step by Cholesky of c I + G_A."""

    def __init__(self, rows: ClusterRows, positive: Any, beta: float, *,
                 direct: bool = False, metric: np.ndarray | None = None) -> None:
        super().__init__(rows, positive, beta, metric)
        self.direct = direct
        self.G = np.zeros((self.dim, self.dim))
        self.sA = np.zeros(self.dim)
        self.before: tuple[np.ndarray, float] | None = None
        self.passes = 0

    def summary(self, coef: np.ndarray, f: None) -> tuple[float, ActiveSet, float]:
        theta = self.theta(coef)
        full = self.direct or self.before is None or self.passes % F_REFRESH == 0
        stats = self.rows.reduce(_blocks.gram_stats, blocks=self.rows.names,
                                 positive=self.positive, w=coef, theta=theta,
                                 before=None if full else self.before)
        if full:
            self.G, self.sA = stats["G"], stats["s"]
            self._count("gram_builds")
        else:
            self.G += stats["G"]
            self.sA += stats["s"]
            self._count("gram_updates")
        self.before = (coef.copy(), theta)
        self.passes += 1
        return theta, ActiveSet(stats["count"]), stats["sv"] / self.rows.n

    def prox_step(self, coef: np.ndarray, f: None, mask: ActiveSet, theta: float):
        if mask.count == 0:
            return coef.copy(), None
        H = self.G.copy()
        H[np.diag_indices_from(H)] += self.base
        factor = linalg.cho_factor(H, lower=True, check_finite=False)
        rhs = theta * self.sA - self.G @ coef
        delta = linalg.cho_solve(factor, rhs, check_finite=False)
        delta += linalg.cho_solve(factor, rhs - H @ delta, check_finite=False)  # refinement
        return coef + delta, None


class MatrixFreeSpace(ClusterSpace):
    """Masks of A on the workers; the step by conjugate gradients, one pass a product."""

    def __init__(self, rows: ClusterRows, positive: Any, beta: float, *, bias: bool) -> None:
        super().__init__(rows, positive, beta)
        self.bias = bias
        self.masks: list = []
        self.stats: dict = {}
        self.previous = np.zeros(self.dim)  # the last step, the next solve's start
        self.counts["cg_iterations"] = 0

    def summary(self, coef: np.ndarray, f: None) -> tuple[float, ActiveSet, float]:
        theta = self.theta(coef)
        masks, stats = self.rows.again(lambda: self._pass(coef, theta))
        self.rows.hold(masks)  # (the previous set's masks are no longer read: dropped)
        self.masks, self.stats = masks, stats
        self._count("active_set_passes")
        return theta, ActiveSet(stats["count"]), stats["sv"] / self.rows.n

    def _pass(self, coef: np.ndarray, theta: float) -> tuple[list, dict]:
        """The blocks' masks of A (futures, left on their workers) and A's sums."""
        client = self.rows.client
        pairs = self.rows.map(_blocks.active_stats, positive=self.positive, w=coef,
                              theta=theta, bias=self.bias)
        masks = [client.submit(_item, pair, 0, pure=False) for pair in pairs]
        self.rows.pending.extend(masks)
        stats = self.rows.total([client.submit(_item, pair, 1, pure=False) for pair in pairs])
        return masks, stats

    def _gram(self, v: np.ndarray) -> np.ndarray:
        """G_A v, one pass."""
        return self.rows.reduce(_blocks.product, blocks=self.masks, v=v)

    def _product(self, v: np.ndarray) -> np.ndarray:
        """(c I + G_A) v."""
        out = self._gram(v)
        out += self.c * v
        return out

    def prox_step(self, coef: np.ndarray, f: None, mask: ActiveSet, theta: float):
        if mask.count == 0:
            return coef.copy(), None
        D = self.dim
        rhs = theta * self.stats["s"] - self._gram(coef)
        operator = LinearOperator((D, D), matvec=self._product, dtype=np.float64)
        preconditioner = LinearOperator((D, D), matvec=self._preconditioned, dtype=np.float64)
        counter = [0]
        delta, info = cg(operator, rhs, x0=self.previous, rtol=CG_RTOL, atol=0.0,
                         maxiter=CG_MAX_ITER, M=preconditioner,
                         callback=lambda _: counter.__setitem__(0, counter[0] + 1))
        self._count("cg_iterations", counter[0])
        self.previous = delta
        return coef + delta, None

    def _preconditioned(self, r: np.ndarray) -> np.ndarray:
        """P^{-1} r: Jacobi's on c I + G_A, with ``bias`` its bias column eliminated exactly
        (P = L diag(d_S, m) L^T, z = X_A^T 1_A, m = c + |A|, d_S = diag - z^2 / m)."""
        diag = self.c + self.stats["squares"]
        if not self.bias:
            return r / diag
        z, m = self.stats["ones"][:-1], diag[-1]
        schur = np.maximum(diag[:-1] - z * z / m, self.c)
        head = (r[:-1] - z * (r[-1] / m)) / schur
        return np.append(head, (r[-1] - float(z @ head)) / m)


def _item(pair: tuple, index: int) -> Any:
    return pair[index]
