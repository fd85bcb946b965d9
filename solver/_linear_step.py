"""How linear MSVMAv solves its semi-variance step, chosen per problem (msvmav.md 1.2-1.4).

The step is w' = w + delta with (c I + X_A^T X_A) delta = X_A^T e_A, c = n beta,
e_i = theta y_i - f_i (i in A). Four ways to solve it, the same delta up to rounding:

* "dense" (``_active_set.PrimalSystem``): keeps X_A^T X_A and its inverse, D x D, updated by
  low-rank edits. Fastest while D is small; memory and refactorisations grow as D^2 and D^3.
* "woodbury" (``RowSpaceSystem``): the |A|-space form
  delta = X_A^T (c I + X_A X_A^T)^{-1} e_A, from the n x n row Gram matrix X X^T formed once.
  For few rows and many features (n << D).
* "cg" (``ConjugateGradientSystem``): matrix-free preconditioned conjugate gradients on
  v -> c v + X^T (1_A * (X v)); the Jacobi preconditioner c + sum_{i in A} x_ij^2 is kept
  current as rows enter and leave A; each solve starts from the previous step's delta. Memory
  O(n + D) besides X; X is never densified and X^T X never formed.
* "gram" (``GramSystem``): the same conjugate gradients on v -> c v + G_A v, G_A = X_A^T X_A
  from X_R^T X_R kept as a dense D x D array for a reference set R plus the few rows where A
  and R differ; the right-hand side is theta X_A^T y_A - G_A w. One pass over X per outer
  iteration (the margins) instead of two per CG iteration; no factorisation. For many rows
  and a few thousand features.

``choose_linear_solver`` is the one place the automatic choice is made; fit() and the memory
estimate (``solver.memory``) both call it.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg, sparse
from scipy.linalg import blas

from ._footprint import FLOAT
from ._gram_matrix import build_bytes, fold, fold_pairs, rows_gram, stored
from ._margin_bounds import margin_bounds_bytes
from ._row_blocks import RowBlocks

LINEAR_SOLVERS = ("dense", "woodbury", "cg", "gram")
# "auto": the dense D x D system up to this dimension (D = features + 1 with the intercept).
DENSE_MAX_DIM = 512
# "auto": the kept Gram matrix ("gram") above DENSE_MAX_DIM up to this dimension (8 D^2 bytes:
# 128 MiB at 4096), where X holds at least D^2 / GRAM_MIN_FILL values: a product with the
# symmetric D x D matrix (reading D^2 / 2 of its values) then costs at most one pass over X,
# and a CG iteration on X makes two.
GRAM_MAX_DIM = 4096
GRAM_MIN_FILL = 4
# "gram": G is rebuilt for the current active set when more than n / GRAM_REBUILD rows differ
# from the set it was built for (each product then passes over those rows).
GRAM_REBUILD = 16
# "gram": the differing rows are added into G (and R becomes A) when a fold adds to at most
# D^2 / 2 entries (as many as a product reads), or when they hold more than GRAM_FOLD D^2
# values (GRAM_FOLD D dense rows): each CG product passes over them, as over the D^2 / 2
# values of G's triangle, and a fold once over their pairs.
GRAM_FOLD = 0.5
# "auto": the |A|-space form while the training rows are at most this many and fewer than D.
WOODBURY_MAX_ROWS = 256
# Conjugate gradients stop at ||residual|| <= CG_RTOL ||rhs||: on bench/wide.py's data the
# decisions then agree with the dense path to ~1e-13 and with a 1e-12 tolerance to 1e-13, in
# 214 CG iterations instead of 307 (100k x 100k) and 402 instead of 502 (100k x 2,000);
# CG_MAX_ITER caps the iterations per solve.
CG_RTOL = 1e-10
CG_MAX_ITER = 5000
# "cg": X x of the warm start is taken from the previous solves' followed X x, and computed
# by a pass over X every X_REFRESH solves (so that rounding cannot build up).
X_REFRESH = 50
# Rows squared at a time when the preconditioner is rebuilt (bounds the temporary copy).
CHUNK_BYTES = 16 * 2**20


def choose_linear_solver(requested: str, n: int, D: int, nnz: int | None = None) -> str:
    """The linear step's solver for n training rows and D columns (intercept included) holding
    nnz stored values (None: dense, n D)."""
    if requested != "auto":
        return requested
    if D <= DENSE_MAX_DIM:
        return "dense"
    if n <= WOODBURY_MAX_ROWS and n < D:
        return "woodbury"
    stored = n * D if nnz is None else nnz
    if D <= GRAM_MAX_DIM and stored * GRAM_MIN_FILL >= D * D:
        return "gram"
    return "cg"


def linear_system_bytes(path: str, n: int, D: int, nnz: int | None) -> int:
    """Peak bytes of one task's step system on the given path (X itself not counted)."""
    if path == "dense":
        # G, M and the matrix being inverted; rows entering A densified (at most 16 D of them
        # for CSR input, all n for dense input), and their signed copy
        rows = n if nnz is None else min(n, 16 * D)
        return FLOAT * (3 * D * D + 2 * rows * D)
    if path == "woodbury":
        # X X^T (its sparse product first, for CSR input), the block of A and its factor
        product = 0 if nnz is None else min(n * n, nnz * max(1, nnz // max(D, 1)))
        return FLOAT * 3 * n * n + 12 * product
    if path == "gram":
        # G; while it is built, its temporaries (rows_gram); later, the rows that differ from
        # the reference set (up to n / GRAM_REBUILD) or a fold's chunk of pairs; the CG vectors
        # and the margins' bounds (``_margin_bounds``)
        differ = (FLOAT * D if nnz is None else 12 * nnz / max(n, 1)) * (n // GRAM_REBUILD)
        later = int(differ) + CHUNK_BYTES
        return (FLOAT * (D * D + 17 * D + 8 * n) + margin_bounds_bytes(n, D)
                + max(build_bytes(n, D, nnz), later))
    # cg: x, r, z, p, A p, the preconditioner (Jacobi's diagonal, X_A^T 1_A and the Schur
    # diagonal), the previous two deltas and X_A^T X_A of each, rhs and the temporaries
    # forming it; n-vectors (X x followed through the CG, and kept for the previous two
    # steps, among them); one chunk of rows squared for the preconditioner (a copy and its
    # squares)
    data = FLOAT * n * D if nnz is None else 12 * nnz
    return FLOAT * (17 * D + 10 * n) + 2 * min(CHUNK_BYTES, data)


def _row_chunks(X, rows: np.ndarray):
    """rows in pieces whose squared copy stays within CHUNK_BYTES."""
    n, D = X.shape
    per_row = (X.nnz / max(n, 1) * 12 if sparse.issparse(X) else FLOAT * D) or 1.0
    step = max(1, int(CHUNK_BYTES // per_row))
    for lo in range(0, rows.size, step):
        yield rows[lo:lo + step]


def column_sums(X, rows: np.ndarray, weights: np.ndarray,
                plain: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """(sum_k weights_k x_{rows_k, j}^2, and with ``plain`` sum_k weights_k x_{rows_k, j}) for
    every column j ((D,) arrays), chunk by chunk, from one gather of the rows."""
    D = X.shape[1]
    squares, sums = np.zeros(D), (np.zeros(D) if plain else None)
    for part in _row_chunks(X, np.arange(rows.size)):
        sub = X[rows[part]]
        if sparse.issparse(sub):
            weighted = sub.data * np.repeat(weights[part], np.diff(sub.indptr))
            squares += np.bincount(sub.indices, weights=sub.data * weighted, minlength=D)
            if plain:
                sums += np.bincount(sub.indices, weights=weighted, minlength=D)
        else:
            squares += weights[part] @ (sub * sub)
            if plain:
                sums += weights[part] @ sub
    return squares, sums


class RowSpaceSystem:
    """(c I + X_A^T X_A)^{-1} X_A^T e_A = X_A^T (c I + X_A X_A^T)^{-1} e_A, via X X^T (n x n)."""

    def __init__(self, Xa, y: np.ndarray, c: float) -> None:
        self.Xa, self.y, self.c = Xa, y, c
        K = Xa @ Xa.T
        self.K = K.toarray() if sparse.issparse(K) else np.asarray(K)
        self.mask = np.zeros(Xa.shape[0], dtype=bool)
        self.idx = np.zeros(0, dtype=np.intp)
        self.factor = self.H = None
        self.n_refactor = 0
        self.n_updates = 0

    def set_active(self, mask: np.ndarray) -> None:
        if self.factor is not None and np.array_equal(mask, self.mask):
            return
        np.copyto(self.mask, mask)
        self.idx = np.flatnonzero(mask)
        H = self.K[np.ix_(self.idx, self.idx)]
        H[np.diag_indices_from(H)] += self.c
        self.H = H
        self.factor = linalg.cho_factor(H, lower=True, check_finite=False)
        self.n_refactor += 1

    def step(self, w: np.ndarray, theta: float, f: np.ndarray) -> np.ndarray:
        e = theta * self.y[self.idx] - f[self.idx]
        z = linalg.cho_solve(self.factor, e, check_finite=False)
        # one step of iterative refinement against K_AA (cheap: |A|^2)
        r = e - self.H @ z
        z += linalg.cho_solve(self.factor, r, check_finite=False)
        u = np.zeros(self.Xa.shape[0])
        u[self.idx] = z
        return np.asarray(self.Xa.T @ u).ravel()


class ConjugateGradientSystem:
    """Matrix-free preconditioned CG on (diag(c) + X_A^T X_A) delta = X_A^T e_A; c is n beta
    (linear MSVMAv) or a vector (the low-rank kernel path's metric, as for PrimalSystem).

    The preconditioner is Jacobi's, c + diag(X_A^T X_A); with ``bias`` (X's last column is the
    constant 1 of the intercept) it also eliminates that column exactly: with
    z = X_A^T 1_A (the bias column of X_A^T X_A; its last entry is |A|) and m = c_D + |A|,
    P = L diag(d_S, m) L^T, L = [[I, z/m], [0, 1]], d_S = diag - z^2 / m (> c by Cauchy-Schwarz),
    i.e. Jacobi's on the Schur complement of the bias. On data of one sign (features scaled to
    [0, 1]) the bias couples with the mean row, the direction Jacobi's leaves worst conditioned:
    100,000 x 2,000 at beta = 0.25, the condition number 3.6 -> 1.2; at beta = 2^-10,
    2,341 -> 3.5."""

    def __init__(self, Xa, y: np.ndarray, c: float | np.ndarray,
                 rows: RowBlocks | None = None, bias: bool = False) -> None:
        n, D = Xa.shape
        self.Xa, self.y, self.bias = Xa, y, bias
        self.rows = rows if rows is not None else RowBlocks(Xa)  # Xa's products
        self.ones = np.zeros(D if bias else 0)  # X_A^T 1_A, kept with ``bias``
        self.schur = np.zeros(0)  # d_S, kept with ``bias``
        self.c = np.broadcast_to(np.asarray(c, dtype=np.float64), (D,)).copy()
        self.mask = np.zeros(n, dtype=bool)
        self.weights = np.zeros(n)  # 1.0 on A: a float mask for the products
        self.diag = self.c.copy()
        self.previous = np.zeros(D)
        self.before: np.ndarray | None = None  # the step before the previous one
        # X_A^T X_A x for x = previous and x = before, A the current set (None: unknown)
        self.g_previous: np.ndarray | None = None
        self.g_before: np.ndarray | None = None
        # X delta for the last step's delta, followed through the CG (None: not followed)
        self.moved: np.ndarray | None = None
        # X x for x = previous and x = before (followed; None: unknown), and the solves made
        self.X_previous: np.ndarray | None = None
        self.X_before: np.ndarray | None = None
        self.solves = 0
        self.Xv = np.zeros(0)  # X v for the last product's v (before masking by A)
        self.n_refactor = 0  # (no factorisation: the rebuilds of the preconditioner)
        self.n_updates = 0
        self.cg_iterations = 0

    def set_active(self, mask: np.ndarray) -> None:
        changed = np.flatnonzero(mask != self.mask)
        if changed.size == 0:
            return
        rebuild = changed.size > mask.size // 4
        self._follow(mask, changed, rebuild)
        if rebuild:  # exact sums, no drift
            rows = np.flatnonzero(mask)
            squares, sums = column_sums(self.Xa, rows, np.ones(rows.size), self.bias)
            self.diag = self.c + squares
            self.ones = sums if self.bias else self.ones
            self.n_refactor += 1
        else:
            sign = np.where(mask[changed], 1.0, -1.0)
            squares, sums = column_sums(self.Xa, changed, sign, self.bias)
            self.diag += squares
            np.maximum(self.diag, self.c, out=self.diag)
            if self.bias:
                self.ones += sums
            self.n_updates += 1
        np.copyto(self.mask, mask)
        self.weights = mask.astype(np.float64)
        self._keep_schur()

    def _follow(self, mask: np.ndarray, changed: np.ndarray, rebuild: bool) -> None:
        """g_previous and g_before for the new set: X_A'^T X_A' x = X_A^T X_A x + U^T S U x
        over the rows U that changed (S: +1 entered, -1 left); unknown after a rebuild."""
        if rebuild or self.g_previous is None:
            self.g_previous = self.g_before = None
            return
        U = self.Xa[changed]
        kept = [self.previous] + ([] if self.g_before is None else [self.before])
        signed = np.asarray(U @ np.stack(kept, axis=1))
        signed *= np.where(mask[changed], 1.0, -1.0)[:, None]
        moved = np.asarray(U.T @ signed)
        self.g_previous += moved[:, 0]
        if self.g_before is not None:
            self.g_before += moved[:, 1]

    def _keep_schur(self) -> None:
        """d_S of the class docstring, for the current A (``bias`` only)."""
        if self.bias:
            z, m = self.ones[:-1], self.diag[-1]
            if self.schur.shape != z.shape:
                self.schur = np.empty_like(z)
            np.multiply(z, z, out=self.schur)
            self.schur /= -m
            self.schur += self.diag[:-1]
            np.maximum(self.schur, self.c[:-1], out=self.schur)

    def _precondition(self, r: np.ndarray, out: np.ndarray) -> np.ndarray:
        """out = P^{-1} r (the class docstring's P), without D-sized temporaries."""
        if not self.bias:
            return np.divide(r, self.diag, out=out)
        z, m, head = self.ones[:-1], self.diag[-1], out[:-1]
        np.multiply(z, -r[-1] / m, out=head)
        head += r[:-1]
        head /= self.schur
        out[-1] = (r[-1] - float(z @ head)) / m
        return out

    def _apply(self, v: np.ndarray) -> np.ndarray:
        self.Xv = self.rows.matvec(v)
        out = self.rows.rmatvec(self.Xv * self.weights)
        out += self.c * v
        return out

    def _warm_start(self) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """The warm start x, and X_A^T X_A x and X x where they are known without a product.

        x: the previous two steps' solutions extrapolated linearly, 2 x_{k-1} - x_{k-2} (on
        100k x 2,000 its residual is ~40x smaller than x_{k-1}'s), or the previous one alone.
        X_A^T X_A x for a solve's x is its b - r - c x (M x = b - r), followed through the rows
        that entered and left A since (``_follow``); X x for a solve's x is followed through
        its CG (``moved``), and taken afresh every X_REFRESH solves. The step's residual
        r = b - M x is computed from them, so the solve is exact up to their rounding; b only
        scales the stopping test, and is computed afresh if zero is the better start."""
        fresh = self.solves % X_REFRESH == 0
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

    def step(self, w: np.ndarray, theta: float, f: np.ndarray) -> np.ndarray:
        """Solve for X_A^T e_A, e = theta y - f, from the warm start x: r = X_A^T (e - X x)_A
        - c x takes one pass over X^T (and one over X where X x is not known), and
        b = r + c x + X_A^T X_A x none where X_A^T X_A x is known (``_warm_start``); else b is
        a second pass over X^T."""
        x, gx, Xx = self._warm_start()
        if Xx is None:
            Xx = self.rows.matvec(x)
        e = theta * self.y - f
        e *= self.weights
        r = self.rows.rmatvec(e - self.weights * Xx)
        r -= self.c * x
        b = None if gx is None else r + self.c * x + gx
        if b is None or not np.linalg.norm(r) < np.linalg.norm(b):
            b = self.rows.rmatvec(e)
        return self._solve_warm(x, b, r, Xx)

    def _solve_warm(self, x: np.ndarray, b: np.ndarray, r: np.ndarray,
                    Xx: np.ndarray | None = None) -> np.ndarray:
        """The system solved for b from the start ``x`` (r = b - A x), or from zero when that
        is the better start; kept for the next steps' start. With ``Xx`` = X x, X x is
        followed through the iterations (from each product's X p) and kept as ``moved``."""
        b_norm = float(np.linalg.norm(b))
        if b_norm == 0.0:
            self.moved = None if Xx is None else np.zeros_like(Xx)
            return np.zeros_like(x)
        if not np.linalg.norm(r) < b_norm:  # the warm start is worse than zero
            x[:] = 0.0
            r = b.copy()
            if Xx is not None:
                Xx[:] = 0.0
        self._iterate(x, r, CG_RTOL * b_norm, Xx)
        # X_A^T X_A x = b - r - c x (the recurrence's r: rounding, not the solve, apart)
        self.g_before, self.g_previous = self.g_previous, b - r - self.c * x
        self.before, self.previous, self.moved = self.previous, x, Xx
        self.X_before, self.X_previous = self.X_previous, Xx
        self.solves += 1
        return x.copy()

    def _iterate(self, x: np.ndarray, r: np.ndarray, target: float,
                 Xx: np.ndarray | None = None) -> None:
        """CG iterations in place on x and r (r = b - A x on entry), and on Xx = X x."""
        z = self._precondition(r, np.empty_like(r))
        p = z.copy()
        rz = float(r @ z)
        for _ in range(CG_MAX_ITER):
            if np.linalg.norm(r) <= target:
                return
            Ap = self._apply(p)
            step = rz / float(p @ Ap)
            x += step * p
            r -= step * Ap
            if Xx is not None:
                Xx += step * self.Xv
            self.cg_iterations += 1
            self._precondition(r, z)
            rz_new = float(r @ z)
            p *= rz_new / rz
            p += z
            rz = rz_new


class GramSystem(ConjugateGradientSystem):
    """Preconditioned CG on (diag(c) + G_A) delta = theta s_A - G_A w, G_A = X_A^T X_A.

    G_R = X_R^T X_R is kept dense (D x D; its upper triangle is the one read) for a reference
    set R; the rows where A and R differ, U with signs S (+1 entered, -1 left), make
    G_A v = G_R v + U^T S U v exact in every product, and s_A = s_R + U^T S y_U. Each CG
    iteration is one symmetric D x D product (and a pass over U) instead of two passes over
    X. The differing rows are added into G_R (R becomes A) when that adds to at most D^2 / 2
    entries (sparse rows entering and leaving: every outer iteration) or when they hold more
    than GRAM_FOLD D^2 values; when more than n / GRAM_REBUILD rows differ at once, G_R is
    rebuilt from A's rows (``_gram_matrix.rows_gram``, on the threads of ``rows``). Never
    factorises; 8 D^2 bytes besides X and the build's temporaries."""

    def __init__(self, Xa, y: np.ndarray, c: float | np.ndarray,
                 rows: RowBlocks | None = None, bias: bool = False) -> None:
        super().__init__(Xa, y, c, rows, bias)
        D = Xa.shape[1]
        self.G = np.zeros((D, D))
        self.ref = np.zeros(Xa.shape[0], dtype=bool)
        self.sR = np.zeros(D)
        self.sA = np.zeros(D)
        self.dR = self.c.copy()
        self.U = self.UT = None
        self.sign = np.zeros(0)
        self.n_folds = 0
        self.moments_of: tuple[np.ndarray, np.ndarray] | None = None  # (w, G_A w)
        # G_A x for x = previous and x = before, A the current set (None: unknown)
        self.g_previous: np.ndarray | None = None
        self.g_before: np.ndarray | None = None

    def set_active(self, mask: np.ndarray) -> None:
        if np.array_equal(mask, self.mask) and self.n_refactor:
            return
        rebuild = self.would_rebuild(mask)
        self.moments_of = None
        differ = np.flatnonzero(mask != self.ref)
        self._follow(mask, np.flatnonzero(mask != self.mask), rebuild)
        if rebuild:
            self.G = rows_gram(self.Xa, mask, self.rows.threads)
            self.sR = self.rows.rmatvec(np.where(mask, self.y, 0.0))
            differ = self._new_reference(mask)
            self.n_refactor += 1
        elif differ.size and (fold_pairs(self.Xa, differ) <= self.G.size // 2
                              or stored(self.Xa, differ) > GRAM_FOLD * self.G.size):
            # fold the differing rows into G: the reference set becomes A
            sign = np.where(mask[differ], 1.0, -1.0)
            U = self.Xa[differ]
            fold(self.G, U, sign)
            self.sR += np.asarray(U.T @ (sign * self.y[differ])).ravel()
            differ = self._new_reference(mask)
            self.n_folds += 1
            self.n_updates += 1
        else:
            self.n_updates += 1
        self._differing(mask, differ)
        np.copyto(self.mask, mask)
        self._keep_schur()

    def _differing(self, mask: np.ndarray, differ: np.ndarray) -> None:
        """U, S and what follows from them: s_A, c + diag(G_A) and (``bias``) X_A^T 1_A, G_A's
        bias column."""
        if differ.size == 0:
            self.sign, self.U, self.UT = np.zeros(0), None, None
            self.sA, self.diag = self.sR.copy(), self.dR.copy()
            if self.bias:
                self.ones = self.G[:, -1].copy()
            return
        sign = self.sign = np.where(mask[differ], 1.0, -1.0)
        U = self.U = self.Xa[differ]
        self.UT = U.T
        self.sA = self.sR + np.asarray(self.UT @ (sign * self.y[differ])).ravel()
        if sparse.issparse(U):
            squares = U.data * U.data * np.repeat(sign, np.diff(U.indptr))
            self.diag = self.dR + np.bincount(U.indices, squares, minlength=U.shape[1])
        else:
            self.diag = self.dR + sign @ (U * U)
        if self.bias:
            self.ones = self.G[:, -1] + np.asarray(self.UT @ sign).ravel()

    def _new_reference(self, mask: np.ndarray) -> np.ndarray:
        """R = A (G and s_R are already those of A); returns the (empty) differing rows."""
        self.dR = self.c + np.diagonal(self.G)
        np.copyto(self.ref, mask)
        return np.zeros(0, dtype=np.intp)

    def _gram(self, v: np.ndarray) -> np.ndarray:
        """G_A v."""
        # G's upper triangle is current (a fold writes only it): it is the lower triangle of
        # G.T, the Fortran-ordered view of the C-contiguous G (no copy)
        out = blas.dsymv(1.0, self.G.T, v, lower=1)
        if self.sign.size:
            out += np.asarray(self.UT @ (self.sign * np.asarray(self.U @ v).ravel())).ravel()
        return out

    def would_rebuild(self, mask: np.ndarray) -> bool:
        """Whether set_active(mask) would rebuild G rather than update it."""
        return not self.n_refactor or (
            np.count_nonzero(mask != self.ref) > mask.size // GRAM_REBUILD)

    def active_moments(self, w: np.ndarray) -> tuple[float, float]:
        """(sum_A (x_i . w)^2, sum_A y_i x_i . w) = (w^T G_A w, s_A . w) for the current A;
        G_A w is kept for a step from w on this A (``step``)."""
        gw = self._gram(w)
        self.moments_of = (w.copy(), gw)
        return float(w @ gw), float(self.sA @ w)

    def _kept_gram(self, w: np.ndarray) -> np.ndarray | None:
        """G_A w kept by active_moments for this w and A (None: not kept, or a fresh product
        is due: every X_REFRESH solves, as for the followed products)."""
        kept = self.moments_of
        if kept is None or self.solves % X_REFRESH == 0 or not np.array_equal(kept[0], w):
            return None
        return kept[1]

    def _apply(self, v: np.ndarray) -> np.ndarray:
        out = self._gram(v)
        out += self.c * v
        return out

    def step(self, w: np.ndarray, theta: float, f: np.ndarray) -> np.ndarray:
        """As ConjugateGradientSystem.step, with X_A^T e_A = theta s_A - G_A w.

        From the warm start x, r = theta s_A - c x - G_A (w + x) is one product, and
        b = r + c x + G_A x needs none where G_A x is known (``_warm_start``). Where G_A w was
        kept by active_moments (the margins' summary on this A) r needs none either: it is
        then G_A w + G_A x, the latter followed, as X x is on "cg" (and taken afresh every
        X_REFRESH solves)."""
        x, gx, _ = self._warm_start()
        gw = self._kept_gram(w)
        if gx is None:
            b = theta * self.sA - (self._gram(w) if gw is None else gw)
            r = b - self._apply(x)
            return self._solve_warm(x, b, r)
        r = theta * self.sA - self.c * x - (self._gram(w + x) if gw is None else gw + gx)
        b = r + self.c * x + gx
        if not np.linalg.norm(r) < np.linalg.norm(b):
            b = theta * self.sA - (self._gram(w) if gw is None else gw)
        return self._solve_warm(x, b, r)
