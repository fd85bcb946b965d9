"""The "gram" linear step: the conjugate gradients of "cg" on v -> c v + G_A v, with
G_A = X_A^T X_A kept as a dense D x D array: for many rows and a few thousand features."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import sparse

from .._footprint import FLOAT
from .._gram_matrix import build_bytes, fold, fold_pairs, rows_gram, stored
from .._margin_bounds import margin_bounds_bytes
from .._row_blocks import RowBlocks
from .._symmetric_product import SymmetricProduct
from .conjugate_gradients import CHUNK_BYTES, ConjugateGradientSystem

# When more than n / GRAM_REBUILD rows differ from the set G was built for (each product then
# passes over those rows), they are folded into G, or G is rebuilt from A's rows where that is
# cheaper: where the differing rows' upper-triangle pairs times FOLD_COST exceed A's. A fold's
# pair costs about 3x a build's (np.add.at against a sparse product) and a build forms both
# triangles: measured on bench/wide.py's data (50k x 2,000), a fold of 5,000 rows took 0.39 s,
# a build from 25,000 rows 1.32 s. After the first build, A's changes are folded (9,551 and
# 3,199 rows at 50k x 2,000 instead of two builds of 1.47 s each).
GRAM_REBUILD = 16
FOLD_COST = 1.5
# The differing rows are added into G (and R becomes A) when a fold adds to at most D^2 / 2
# entries (as many as a product reads), or when they hold more than GRAM_FOLD D^2 values
# (GRAM_FOLD D dense rows): each CG product passes over them, as over the D^2 / 2 values of
# G's triangle, and a fold once over their pairs.
GRAM_FOLD = 0.5


@dataclass
class Reference:
    """G_R = X_R^T X_R (C-contiguous; its upper triangle current) for the reference set R
    (``mask``), s_R = X_R^T y_R and c + diag(G_R)."""

    mask: np.ndarray
    G: np.ndarray
    s: np.ndarray
    diag: np.ndarray


@dataclass
class Differing:
    """The rows where A and R differ: U (as stored), U^T, and S (+1 entered, -1 left)."""

    U: object = None
    UT: object = None
    sign: np.ndarray = field(default_factory=lambda: np.zeros(0))


class GramSystem(ConjugateGradientSystem):
    """Preconditioned CG on (diag(c) + G_A) delta = theta s_A - G_A w, G_A = X_A^T X_A.

    G_R = X_R^T X_R is kept dense (D x D; its upper triangle is the one read) for a reference
    set R; the rows where A and R differ, U with signs S (+1 entered, -1 left), make
    G_A v = G_R v + U^T S U v exact in every product, and s_A = s_R + U^T S y_U. Each CG
    iteration is one symmetric D x D product (and a pass over U) instead of two passes over
    X. The differing rows are added into G_R (R becomes A) when that adds to at most D^2 / 2
    entries (sparse rows entering and leaving: every outer iteration) or when they hold more
    than GRAM_FOLD D^2 values; when more than n / GRAM_REBUILD rows differ at once, they are
    folded too, unless their pairs times FOLD_COST exceed A's: then G_R is rebuilt from A's
    rows (``_gram_matrix.rows_gram``, on the threads of ``rows``). Never
    factorises; 8 D^2 bytes besides X and the build's temporaries.

    Counters: ``gram_builds`` (G_R built from A's rows), ``gram_folds`` (differing rows added
    into G_R), ``unfolded_changes`` (new sets whose differing rows stay beside G_R),
    ``cg_iterations``, ``threaded_products`` (products with G_R made on more than one BLAS
    thread: ``_symmetric_product``)."""

    advice = "use linear_solver='cg' (memory O(nnz + n + D)) or fewer features"

    def __init__(self, X, y: np.ndarray, base: float | np.ndarray, *,
                 rows: RowBlocks | None = None, bias: bool = False,
                 update: str = "incremental") -> None:
        super().__init__(X, y, base, rows=rows, bias=bias)
        D = X.shape[1]
        self.ref = Reference(np.zeros(X.shape[0], dtype=bool), np.zeros((D, D)), np.zeros(D),
                             self.c.copy())
        self.differing = Differing()
        self.sA = np.zeros(D)
        self.counters = {"gram_builds": 0, "gram_folds": 0, "unfolded_changes": 0,
                         "cg_iterations": 0, "threaded_products": 0}
        self.product = SymmetricProduct(self.rows.threads, D)  # G v, on the faster threads
        self._taken: tuple[np.ndarray, object] | None = None  # (index, X[index]): _rows

    @staticmethod
    def footprint(n: int, D: int, nnz: int | None) -> int:
        """Peak bytes: G; while it is built, its temporaries (rows_gram); later, the rows that
        differ from the reference set (up to n / GRAM_REBUILD) or a fold's chunk of pairs;
        the CG vectors and the margins' bounds (``_margin_bounds``)."""
        differ = (FLOAT * D if nnz is None else 12 * nnz / max(n, 1)) * (n // GRAM_REBUILD)
        later = int(differ) + CHUNK_BYTES
        return (FLOAT * (D * D + 17 * D + 8 * n) + margin_bounds_bytes(n, D)
                + max(build_bytes(n, D, nnz), later))

    def followed(self) -> None:
        """X delta is not followed on this path (its products are with G, not X)."""
        return None

    def _many_differ(self, mask: np.ndarray) -> bool:
        """Whether G must change for the set ``mask``: not built yet, or more than
        n / GRAM_REBUILD rows differ from its reference set."""
        return not self.counters["gram_builds"] or (
            np.count_nonzero(mask != self.ref.mask) > mask.size // GRAM_REBUILD)

    def _rebuilds(self, mask: np.ndarray) -> bool:
        """Whether the set ``mask`` calls for G to be built from its rows: G must change and
        folding the differing rows would cost more than the build (FOLD_COST)."""
        if not self._many_differ(mask):
            return False
        if not self.counters["gram_builds"]:
            return True
        differ = np.flatnonzero(mask != self.ref.mask)
        return fold_pairs(self.Xa, differ) * FOLD_COST > fold_pairs(self.Xa, np.flatnonzero(mask))

    def set_active(self, mask: np.ndarray) -> None:
        if np.array_equal(mask, self.mask) and self.counters["gram_builds"]:
            return
        rebuild = self._rebuilds(mask)
        differ = np.flatnonzero(mask != self.ref.mask)
        changed = np.flatnonzero(mask != self.mask)
        self.warm.follow(lambda: self._rows(changed),
                         None if rebuild else np.where(mask[changed], 1.0, -1.0))
        if rebuild:
            self.ref.G = rows_gram(self.Xa, mask, self.rows.threads)
            self.ref.s = self.rows.rmatvec(np.where(mask, self.y, 0.0))
            differ = self._new_reference(mask)
            self.counters["gram_builds"] += 1
        elif differ.size and (fold_pairs(self.Xa, differ) <= self.ref.G.size // 2
                              or stored(self.Xa, differ) > GRAM_FOLD * self.ref.G.size
                              or self._many_differ(mask)):
            # fold the differing rows into G: the reference set becomes A
            sign = np.where(mask[differ], 1.0, -1.0)
            U = self._rows(differ)
            fold(self.ref.G, U, sign)
            self.ref.s += np.asarray(U.T @ (sign * self.y[differ])).ravel()
            differ = self._new_reference(mask)
            self.counters["gram_folds"] += 1
        else:
            self.counters["unfolded_changes"] += 1
        self._differing(mask, differ)
        np.copyto(self.mask, mask)
        self._keep_schur()

    def _differing(self, mask: np.ndarray, differ: np.ndarray) -> None:
        """U, S and what follows from them: s_A, c + diag(G_A) and (``bias``) X_A^T 1_A, G_A's
        bias column."""
        ref = self.ref
        if differ.size == 0:
            self.differing = Differing()
            self.sA, self.diag = ref.s.copy(), ref.diag.copy()
            if self.bias:
                self.ones = ref.G[:, -1].copy()
            return
        sign = np.where(mask[differ], 1.0, -1.0)
        U = self._rows(differ)
        self.differing = Differing(U, U.T, sign)
        self.sA = ref.s + np.asarray(U.T @ (sign * self.y[differ])).ravel()
        if sparse.issparse(U):
            squares = U.data * U.data * np.repeat(sign, np.diff(U.indptr))
            self.diag = ref.diag + np.bincount(U.indices, squares, minlength=U.shape[1])
        else:
            self.diag = ref.diag + sign @ (U * U)
        if self.bias:
            self.ones = ref.G[:, -1] + np.asarray(U.T @ sign).ravel()

    def _rows(self, index: np.ndarray):
        """X_A's rows ``index`` (X[index]). The last rows taken are kept: an outer iteration
        takes the same rows up to three times (the summary's ``moments``, the warm start's
        ``follow`` and the fold), each a copy of their values."""
        taken = self._taken
        if taken is None or not np.array_equal(taken[0], index):
            taken = self._taken = (index.copy(), self.Xa[index])
        return taken[1]

    def _new_reference(self, mask: np.ndarray) -> np.ndarray:
        """R = A (G and s_R are already those of A); returns the (empty) differing rows."""
        self.ref.diag = self.c + np.diagonal(self.ref.G)
        np.copyto(self.ref.mask, mask)
        return np.zeros(0, dtype=np.intp)

    def _gram(self, v: np.ndarray) -> np.ndarray:
        """G_A v."""
        out = self._symmetric(v)  # G's upper triangle is current: a fold writes only it
        rows = self.differing
        if rows.sign.size:
            out += np.asarray(rows.UT @ (rows.sign * np.asarray(rows.U @ v).ravel())).ravel()
        return out

    def _symmetric(self, v: np.ndarray) -> np.ndarray:
        """G_R v (``SymmetricProduct``), counted."""
        out = self.product(self.ref.G, v)
        self.counters["threaded_products"] = self.product.threaded
        return out

    def moments(self, mask: np.ndarray, w: np.ndarray
                ) -> tuple[float, float, np.ndarray] | None:
        """(w^T G_M w, s_M . w, G_M w) for a set M (``mask``) without changing the system:
        from G_R and the rows where M and R differ; None when G is not built yet or more than
        n / GRAM_REBUILD rows differ (a pass over X is cheaper then)."""
        if self._many_differ(mask):
            return None
        differ = np.flatnonzero(mask != self.ref.mask)
        gw = self._symmetric(w)
        s = self.ref.s
        if differ.size:
            sign = np.where(mask[differ], 1.0, -1.0)
            U = self._rows(differ)
            gw += np.asarray(U.T @ (sign * np.asarray(U @ w).ravel())).ravel()
            s = s + np.asarray(U.T @ (sign * self.y[differ])).ravel()
        return float(w @ gw), float(s @ w), gw

    def _apply(self, v: np.ndarray) -> np.ndarray:
        out = self._gram(v)
        out += self.c * v
        return out

    def step(self, w: np.ndarray, theta: float, f: np.ndarray | None,
             gram_w: np.ndarray | None = None) -> np.ndarray:
        """As ConjugateGradientSystem.step, with X_A^T e_A = theta s_A - G_A w.

        From the warm start x, r = theta s_A - c x - G_A (w + x) is one product, and
        b = r + c x + G_A x needs none where G_A x is known (``WarmStart.guess``). Where the
        caller gives G_A w (``gram_w``: the margins' summary formed it for this A), r needs
        none either: G_A w + G_A x, the latter followed, as X x is on "cg" (and taken afresh
        every X_REFRESH solves)."""
        x, gx, _ = self.warm.guess()
        gw = None if gram_w is None or self.warm.fresh else gram_w
        if gx is None:
            b = theta * self.sA - (self._gram(w) if gw is None else gw)
            r = b - self._apply(x)
            return self._solve_warm(x, b, r)
        r = theta * self.sA - self.c * x - (self._gram(w + x) if gw is None else gw + gx)
        b = r + self.c * x + gx
        if not np.linalg.norm(r) < np.linalg.norm(b):
            b = theta * self.sA - (self._gram(w) if gw is None else gw)
        return self._solve_warm(x, b, r)
