"""Dense numpy oracles, written from the maths (docs/algorithms.md), for every kernel and path."""

import numpy as np


def boolean_product(W, H):
    return (W.astype(np.int64) @ H.astype(np.int64)) > 0


def boolean_error(X, W, H, observed=None):
    """Hamming error, over the cells where ``observed`` (dense bool; None: all) is True."""
    wrong = X.astype(bool) ^ boolean_product(W, H)
    return int(np.sum(wrong if observed is None else wrong & observed))


def grid_errors(X, Wb, Hb, P, observed):
    """Dense: the Hamming error over the observed cells at every point of the threshold grid
    (``linspace(0, max, P)`` of each factor, strict ``>``) of the (balanced) factors."""
    w_points = np.linspace(0.0, Wb.max() if Wb.size else 0.0, P)
    h_points = np.linspace(0.0, Hb.max() if Hb.size else 0.0, P)
    return np.array(
        [[boolean_error(X, Wb > a, Hb > b, observed) for b in h_points] for a in w_points]
    )


def masked_objective(X, W, H, lower, upper, observed):
    """½‖Y − WH‖² over the observed cells, Y the projection of WH (onto [lower, upper] on the
    ones, 0 on the zeros): the objective BANMF descends with unknown cells."""
    WH = W @ H
    Y = np.where(X.astype(bool), np.clip(WH, lower, upper), 0.0)
    return 0.5 * float((((Y - WH) ** 2) * observed).sum())


def project_spmm(X, W, Ht, lower, upper, project, y, cells=None):
    """Dense: Y on the support (projected or given) and on the unknown ``cells`` (dense bool:
    WH there), Y @ Ht, and the two sums per row (residual on the support, s² on both).
    Returns Y on the support, Y on the cells (row-major order), Y @ Ht and the sums."""
    mask = X.astype(bool)
    cells = np.zeros_like(mask) if cells is None else cells
    S = W @ Ht.T
    Y = np.zeros_like(S)
    Y[mask] = np.clip(S[mask], lower, upper) if project else y
    Y[cells] = S[cells]
    res = np.where(mask, (Y - S) ** 2, 0.0).sum(axis=1)
    s2 = np.where(mask | cells, S**2, 0.0).sum(axis=1)
    return Y[mask], Y[cells], Y @ Ht, np.stack([res, s2], axis=1)


def gather_spmm(X, y, W, cells=None, cy=None):
    """Dense Yᵀ W, Y holding ``y`` on X's support and ``cy`` on the ``cells``."""
    Y = np.zeros(X.shape)
    Y[X.astype(bool)] = y
    if cy is not None:
        Y[cells] = cy
    return Y.T @ W


def mu_update(F, numer, linear, lam, eps, floor=0.0):
    """The MU step; positive values below ``floor`` (the kernels' subnormal floor for their
    dtype) raised to it."""
    out = F * (numer + 3 * lam * F**2) / (linear + 2 * lam * F**3 + lam * F + eps)
    return np.where((out > 0) & (out < floor), floor, out)


def pack_bits(B):
    words = max(1, -(-B.shape[1] // 64))
    out = np.zeros((B.shape[0], words), dtype=np.uint64)
    for i, j in zip(*np.nonzero(B)):
        out[i, j // 64] |= np.uint64(1) << np.uint64(j % 64)
    return out


def hits_grid(X, u, vt, P):
    """hits[s, t] = #ones of X covered when W = u > s and H = (vt > t).T."""
    mask = X.astype(bool)
    return np.array(
        [
            [int(np.sum(mask & boolean_product(u > s, (vt > t).T))) for t in range(P)]
            for s in range(P)
        ]
    )


def balance(W, H):
    W, H = W.copy(), H.copy()
    for l in range(W.shape[1]):
        a, b = W[:, l].max(), H[l].max()
        if a * b > 0:
            W[:, l] *= np.sqrt(b / a)
            H[l] *= np.sqrt(a / b)
    return W, H


def booleanize(X, W, H, P, normalize=True):
    """Full grid over [0, max], strict '>', first minimum in C order."""
    if normalize:
        W, H = balance(W, H)
    wp = np.linspace(0, W.max(), P)
    hp = np.linspace(0, H.max(), P)
    grid = np.array([[boolean_error(X, W > a, H > b) for b in hp] for a in wp])
    s, t = np.unravel_index(np.argmin(grid), grid.shape)
    return W > wp[s], H > hp[t], wp[s], hp[t], int(grid[s, t]), grid


def banmf(X, W, H, n_iter, lams, lower, upper, eps, project=True):
    """Dense BANMF / Reg-BANMF (W, H, Y order); returns W, H, Y and the objective per iteration."""
    mask = X.astype(bool)
    W, H = W.astype(float).copy(), H.astype(float).copy()
    Y = mask.astype(float)
    f = []
    for t in range(n_iter):
        lam = lams[t]
        W = W * (Y @ H.T + 3 * lam * W**2) / (W @ (H @ H.T) + 2 * lam * W**3 + lam * W + eps)
        H = H * (W.T @ Y + 3 * lam * H**2) / ((W.T @ W) @ H + 2 * lam * H**3 + lam * H + eps)
        if project:
            S = W @ H
            Y = np.where(mask, np.clip(S, lower, upper), 0.0)
        f.append(objective(Y, W, H, lam))
    return W, H, Y, np.array(f)


def objective(Y, W, H, lam=0.0):
    f = 0.5 * np.sum((Y - W @ H) ** 2)
    return f + 0.5 * lam * (np.sum((W**2 - W) ** 2) + np.sum((H**2 - H) ** 2))


def asso(X, k, tau, w_pos=1.0, w_neg=1.0, unknown=None):
    """Dense ASSO: confidence matrix, candidates A >= tau, greedy cover with row-wise usage.
    ``unknown`` (dense bool) cells are "don't care": in no count, allowed in any factor."""
    unknown = np.zeros(X.shape, dtype=bool) if unknown is None else unknown
    X = X.astype(bool) & ~unknown
    zeros = ~X & ~unknown
    n, m = X.shape
    G = X.T.astype(int) @ X.astype(int)
    colsum = np.diag(G).astype(float)
    A = np.zeros((m, m))
    nz = colsum > 0
    A[nz] = G[nz] / colsum[nz, None]
    cands = [row for row in (A >= tau) if row.any()]
    C = np.zeros((n, m), dtype=bool)
    W = np.zeros((n, k), dtype=bool)
    H = np.zeros((k, m), dtype=bool)
    for l in range(k):
        if not cands:
            break
        best, best_c, best_u = -1.0, None, None
        for c in cands:
            free = c & ~C
            a, b = (free & X).sum(axis=1), (free & zeros).sum(axis=1)
            gains = w_pos * a - w_neg * b > 0
            # From the integer sums over the rows that gain, as the kernels do: a sum of the
            # rows' float gains would depend on their order, and could break ties differently.
            score = w_pos * a[gains].sum() - w_neg * b[gains].sum()
            if score > best:
                best, best_c, best_u = score, c, gains
        if best <= 0:
            break
        W[:, l], H[l] = best_u, best_c
        C |= best_u[:, None] & best_c[None, :]
    return W, H


def grecond(X, k=None, unknown=None):
    """Dense GreConD (Belohlavek & Vychodil): grow each concept's intent greedily by coverage.
    ``unknown`` (dense bool) cells join the relation but are never counted as covered."""
    unknown = np.zeros(X.shape, dtype=bool) if unknown is None else unknown
    U = X.astype(bool) & ~unknown
    X = U | unknown
    n, m = X.shape
    extents, intents = [], []

    def up(rows):  # columns shared by every row in `rows`
        return X[rows].all(axis=0)

    while U.any() and (k is None or len(extents) < k):
        extent = np.ones(n, dtype=bool)
        intent = up(extent)
        best = int(U[:, intent].sum())  # the concept of all rows: D ⊕ j for a full column j
        while True:
            values = np.full(m, -1)
            for j in range(m):
                if intent[j]:
                    continue
                ext = extent & X[:, j]
                values[j] = int((U[ext][:, up(ext)]).sum()) if ext.any() else 0
            j = int(np.argmax(values))
            if values[j] <= best:
                break
            best = values[j]
            extent = extent & X[:, j]
            intent = up(extent)
        if best == 0:
            break
        extents.append(extent)
        intents.append(intent)
        U &= ~(extent[:, None] & intent[None, :])
    kk = len(extents) if k is None else k
    W = np.zeros((n, kk), dtype=bool)
    H = np.zeros((kk, m), dtype=bool)
    for l, (e, d) in enumerate(zip(extents, intents)):
        W[:, l], H[l] = e, d
    return W, H


def subset_sums(counts, k):
    return np.array([sum(counts[t] for t in range(1 << k) if t & s == t) for s in range(1 << k)])


def row_errors(X, H, observed=None):
    """errors[i, a] = Hamming error of row i of X when W's row i is the k-bit pattern a (over
    the ``observed`` cells only, if given)."""
    k = H.shape[0]
    pats = ((np.arange(1 << k)[:, None] >> np.arange(k)) & 1).astype(bool)
    covered = boolean_product(pats, H)  # (2^k, m)
    wrong = X.astype(bool)[:, None, :] ^ covered[None, :, :]
    if observed is not None:
        wrong &= observed[:, None, :]
    return wrong.sum(axis=2)


def single_cover(X, A, B):
    """out[r, l]: ones of row r of X covered by bit l alone of A[r] & B[j]; out[r, k]: ones no
    bit covers (A (r, k), B (c, k) bool; dense)."""
    k = A.shape[1]
    out = np.zeros((X.shape[0], k + 1), dtype=np.int64)
    for r, j in zip(*np.nonzero(X)):
        shared = np.flatnonzero(A[r] & B[j])
        if len(shared) == 0:
            out[r, k] += 1
        elif len(shared) == 1:
            out[r, shared[0]] += 1
    return out


def swap_changes(X, W, H):
    """change[l, j]: error after replacing factor l by column j over the rows where its ones are
    then uncovered, minus the error now (dense brute force, one trial per pair)."""
    k, m = H.shape
    now = boolean_error(X, W, H)
    change = np.zeros((k, m), dtype=np.int64)
    for l in range(k):
        for j in range(m):
            W2, H2 = W.copy(), H.copy()
            W2[:, l] = False
            H2[l] = False
            rows = X[:, j].astype(bool) & ~boolean_product(W2, H2)[:, j]
            W2[:, l] = rows
            H2[l, j] = True
            change[l, j] = boolean_error(X, W2, H2) - now
    return change


def column_factors(X, k):
    """The k columns with the most ones (ties: lower index), each with all its rows."""
    n, m = X.shape
    top = np.argsort(-X.astype(bool).sum(axis=0), kind="stable")[:k]
    W = np.zeros((n, k), dtype=bool)
    H = np.zeros((k, m), dtype=bool)
    for l, j in enumerate(top):
        W[:, l] = X[:, j].astype(bool)
        H[l, j] = True
    return W, H


def nndsvda(X, k):
    """NNDSVDa from the dense SVD: each singular pair's positive or negative parts (the larger
    product of norms), scaled by sqrt(σ · that product); zeros filled with the mean of X."""
    Xf = X.astype(float)
    n, m = Xf.shape
    U, S, Vt = np.linalg.svd(Xf, full_matrices=False)
    r = min(k, min(n, m) - 1)
    W, Ht = np.zeros((n, k)), np.zeros((m, k))
    for j in range(r):
        x, y = U[:, j], Vt[j]
        parts = [(np.maximum(s * x, 0), np.maximum(s * y, 0)) for s in (1, -1)]
        a, b = max(parts, key=lambda ab: np.linalg.norm(ab[0]) * np.linalg.norm(ab[1]))
        sigma = np.linalg.norm(a) * np.linalg.norm(b)
        if sigma > 0:
            W[:, j] = np.sqrt(S[j] * sigma) * a / np.linalg.norm(a)
            Ht[:, j] = np.sqrt(S[j] * sigma) * b / np.linalg.norm(b)
    fill = Xf.mean()
    W[W <= 1e-12 * max(W.max(), 1.0)] = fill
    Ht[Ht <= 1e-12 * max(Ht.max(), 1.0)] = fill
    return W, Ht


def description_length(X, W, H, observed=None):
    """Dense, from the definition (banmf.model_selection.description_length): k by Rissanen's
    universal code, each factor's ones as a count and a choice, the errors typed by whether
    W⊗H covers the cell; only the ``observed`` cells (dense bool; None: all) are sent."""
    from math import comb, log2

    X = X.astype(bool)
    observed = np.ones(X.shape, dtype=bool) if observed is None else observed
    n, m = X.shape
    k = W.shape[1]
    z, bits = float(k + 1), log2(2.865064)
    while z > 1:
        z = log2(z)
        if z > 0:
            bits += z
    for l in range(k):
        bits += log2(n + 1) + log2(comb(n, int(W[:, l].sum())))
        bits += log2(m + 1) + log2(comb(m, int(H[l].sum())))
    P = boolean_product(W, H)
    for covered in (False, True):
        cells = observed & (P == covered)
        wrong = cells & (X != P)
        bits += log2(int(cells.sum()) + 1) + log2(comb(int(cells.sum()), int(wrong.sum())))
    return bits


# -- OrMachine (banmf.models.ormachine, banmf._kernels.ormachine) -----------------------------


def ormachine_log_likelihood(X, observed, Z, U, lam):
    """Σ over the observed cells of log σ(λ·x̃·(1 − 2∏_l(1 − z_il u_jl))), x̃ = 2x − 1: the
    OrMachine's log-likelihood, dense, from the definition (Z (n, k), U (m, k))."""
    xt = 2.0 * X.astype(np.float64) - 1.0
    none = np.prod(1 - Z[:, None, :].astype(np.int64) * U[None, :, :].astype(np.int64), axis=2)
    t = lam * xt * (1.0 - 2.0 * none)
    return float(np.sum(np.where(observed, -np.logaddexp(0.0, -t), 0.0)))


def ormachine_log_odds(X, observed, Z, U, lam):
    """log p(z_il = 1 | rest) − log p(z_il = 0 | rest) for every entry of Z, by enumerating
    z_il ∈ {0, 1} in the full likelihood (uniform prior), shape (n, k)."""
    n, k = Z.shape
    out = np.zeros((n, k))
    for i in range(n):
        for l in range(k):
            Z1, Z0 = Z.copy(), Z.copy()
            Z1[i, l], Z0[i, l] = True, False
            out[i, l] = ormachine_log_likelihood(
                X, observed, Z1, U, lam
            ) - ormachine_log_likelihood(X, observed, Z0, U, lam)
    return out


def ormachine_scores(X, observed, Z, U):
    """``Σ_j x̃_ij u_jl ∏_{l'≠l}(1 − z_il' u_jl')`` over the observed cells, shape (n, k)."""
    xt = np.where(observed, 2 * X.astype(np.int64) - 1, 0)
    n, k = Z.shape
    out = np.zeros((n, k), dtype=np.int64)
    for i in range(n):
        for l in range(k):
            others = Z[i].copy()
            others[l] = False
            free = ~boolean_product(others[None, :], U.T)[0]
            out[i, l] = int(np.sum(xt[i] * U[:, l] * free))
    return out


def ormachine_sweep(X, observed, Z, U, lam, uniforms):
    """One Gibbs sweep over the rows of Z (each row's factors in order, each from its full
    conditional given the current others): ``z_il = uniforms[i, l] < σ(λ·score)``. Returns the
    new Z and each row's errors on the observed cells."""
    Z = Z.copy()
    n, k = Z.shape
    for i in range(n):
        for l in range(k):
            score = ormachine_scores(X[i : i + 1], observed[i : i + 1], Z[i : i + 1], U)[0, l]
            Z[i, l] = uniforms[i, l] < 1.0 / (1.0 + np.exp(-lam * score))
    wrong = (X.astype(bool) ^ boolean_product(Z, U.T)) & observed
    return Z, wrong.sum(axis=1)


# -- PaNDa+ (tests/test_panda.py) ----------------------------------------------------------


def panda_cost(X, W, H, rho, observed=None):
    """PaNDa+'s J_P^ρ: ρ·Σ_P (|P_T| + |P_I|) plus the errors over the ``observed`` cells."""
    return rho * (int(W.sum()) + int(H.sum())) + boolean_error(X, W, H, observed)


def _panda_with(W, H, rows, items):
    return np.column_stack([W, rows]), np.vstack([H, items])


def panda_noise_ok(X, observed, rows, items, eps_row, eps_col):
    """PaNDa+'s noise constraints: every row of the pattern has at most ``eps_row·|I|``
    observed zeros in its items, every item at most ``eps_col·|T|`` in its rows."""
    noise = (~X.astype(bool) & observed)[np.ix_(rows, items)]
    return bool(
        np.all(noise.sum(axis=1) <= eps_row * items.sum())
        and np.all(noise.sum(axis=0) <= eps_col * rows.sum())
    )


def panda_find_core(X, observed, W, H, order, rho):
    """FIND-CORE (TKDE 2014 Alg. 2) on the residual data (the ones that W⊗H leaves
    uncovered), each step judged by the full cost J of Π ∪ C. Returns (rows, items, ext):
    bool masks and the extension list."""
    Xb = X.astype(bool)
    R = Xb & ~boolean_product(W, H)
    n, m = X.shape
    rows = R[:, order[0]].copy()
    items = np.zeros(m, dtype=bool)
    if not rows.any():
        return rows, items, []
    items[order[0]] = True
    ext = []
    for s in order[1:]:
        new_rows = rows & R[:, s]
        new_items = items.copy()
        new_items[s] = True
        if panda_cost(X, *_panda_with(W, H, new_rows, new_items), rho, observed) <= panda_cost(
            X, *_panda_with(W, H, rows, items), rho, observed
        ):
            rows, items = new_rows, new_items
        else:
            ext.append(s)
    return rows, items, ext


def panda_extend(X, observed, W, H, rows, items, ext, eps_row, eps_col, rho):
    """EXTEND-CORE (TKDE 2014 Alg. 3), each step judged by the full cost J of Π ∪ C and the
    noise constraints checked on the whole candidate pattern. Returns (rows, items)."""
    rows, items, ext = rows.copy(), items.copy(), list(ext)

    def cost(r, c):
        return panda_cost(X, *_panda_with(W, H, r, c), rho, observed)

    while True:
        for i in range(X.shape[0]):
            if rows[i]:
                continue
            new = rows.copy()
            new[i] = True
            if panda_noise_ok(X, observed, new, items, eps_row, eps_col) and cost(
                new, items
            ) <= cost(rows, items):
                rows = new
        added = False
        while ext:
            e = ext.pop(0)
            new = items.copy()
            new[e] = True
            if panda_noise_ok(X, observed, rows, new, eps_row, eps_col) and cost(rows, new) <= cost(
                rows, items
            ):
                items, added = new, True
                break
        if not added:
            return rows, items


def panda(X, k, eps_row=1.0, eps_col=1.0, rho=1.0, observed=None):
    """PaNDa+ (TKDE 2014 Alg. 1) with the frequency order (one round): patterns are added
    while one lowers J strictly, at most k (None: no limit). Returns W, H."""
    Xb = X.astype(bool)
    n, m = X.shape
    observed = np.ones((n, m), dtype=bool) if observed is None else observed
    W = np.zeros((n, 0), dtype=bool)
    H = np.zeros((0, m), dtype=bool)
    while k is None or W.shape[1] < k:
        R = Xb & ~boolean_product(W, H)
        if not R.any():
            break
        freq = R.sum(axis=0)
        order = np.lexsort((np.arange(m), -freq))
        rows, items, ext = panda_find_core(X, observed, W, H, order, rho)
        rows, items = panda_extend(X, observed, W, H, rows, items, ext, eps_row, eps_col, rho)
        W2, H2 = _panda_with(W, H, rows, items)
        if not panda_cost(X, W2, H2, rho, observed) < panda_cost(X, W, H, rho, observed):
            break
        W, H = W2, H2
    return W, H


# -- message passing (Ravanbakhsh, Póczos, Greiner, ICML 2016) ---------------------------------


def maxsum_message(log_factor, incoming, target):
    """Max-sum message, as a log-ratio, from a factor over binary variables to variable
    ``target``, by enumerating every assignment: ``max_{z: z_t=1} − max_{z: z_t=0}`` of
    ``log_factor(z) + Σ_{v≠t} incoming[v]·z_v`` (``incoming``: the other variables' messages as
    log-ratios; the target's entry is ignored)."""
    import itertools

    best = [-np.inf, -np.inf]
    for z in itertools.product((0, 1), repeat=len(incoming)):
        value = log_factor(z) + sum(incoming[v] * z[v] for v in range(len(z)) if v != target)
        best[z[target]] = max(best[z[target]], value)
    return best[1] - best[0]


def mp_channel(gamma, co):
    """Messages (..., k) to each Z_l from the factor ``p(X | OR_l Z_l)`` given the messages
    ``gamma`` (..., k) from the Z_l and the channel's log-ratio ``co`` (...): Z_l off costs
    turning the best other one on if none is positive; Z_l on satisfies the OR. Each l by
    brute force over the others (no top-two trick)."""
    k = gamma.shape[-1]
    pos = np.maximum(gamma, 0.0)
    out = np.empty_like(gamma)
    for l in range(k):
        best_other = (
            np.delete(gamma, l, axis=-1).max(axis=-1) if k > 1 else np.full(co.shape, -np.inf)
        )
        rest = np.delete(pos, l, axis=-1).sum(axis=-1) + co
        out[..., l] = np.minimum(np.maximum(-best_other, 0.0), rest)
    return out


def mp_step(X, observed, in_x, in_y, out_x, out_y, damping, co1, co0, cx, cy):
    """One iteration of max-sum BP for X ≈ W ⊗ H on dense (n, m, k) message arrays, from the
    outgoing messages ``out_x`` (W_il → its AND factor at (i, j)) and ``out_y``; the incoming
    ``in_x``, ``in_y`` are the previous (damped) ones. Only observed cells have factors.
    Returns the new (in_x, in_y, marg_x (n, k), marg_y (m, k), largest change before damping).
    Each factor's message is the brute-force max over the other factors (no top-two trick)."""
    obs = observed.astype(bool)
    co = np.where(X.astype(bool), co1, co0)
    gamma = np.minimum(np.minimum(out_x + out_y, out_x), out_y)  # AND factor → Z
    gamma_hat = mp_channel(gamma, co)  # channel factor → Z
    new_x = np.maximum(gamma_hat + out_y, 0.0) - np.maximum(out_y, 0.0)  # AND factor → W
    new_y = np.maximum(gamma_hat + out_x, 0.0) - np.maximum(out_x, 0.0)  # AND factor → H
    diff = max(
        np.abs(new_x - in_x)[obs].max(initial=0.0), np.abs(new_y - in_y)[obs].max(initial=0.0)
    )
    in_x = np.where(obs[:, :, None], damping * in_x + (1 - damping) * new_x, 0.0)
    in_y = np.where(obs[:, :, None], damping * in_y + (1 - damping) * new_y, 0.0)
    return in_x, in_y, cx + in_x.sum(axis=1), cy + in_y.sum(axis=0), diff


def message_passing(X, observed, out_x0, out_y0, n_iter, damping, co1, co0, cx, cy):
    """``n_iter`` iterations of :func:`mp_step` from the outgoing messages ``out_x0``,
    ``out_y0`` (n, m, k) and no incoming ones, as the reference code starts. Returns (in_x,
    in_y, marg_x, marg_y, the largest change of each iteration)."""
    n, m, k = out_x0.shape
    in_x = np.zeros((n, m, k))
    in_y = np.zeros((n, m, k))
    out_x, out_y = out_x0, out_y0
    diffs = []
    for _ in range(n_iter):
        in_x, in_y, marg_x, marg_y, diff = mp_step(
            X, observed, in_x, in_y, out_x, out_y, damping, co1, co0, cx, cy
        )
        diffs.append(diff)
        out_x = marg_x[:, None, :] - in_x  # W_il → factor (i, j): all its messages but that one
        out_y = marg_y[None, :, :] - in_y
    return in_x, in_y, marg_x, marg_y, diffs


def cut_sums(vals, d, order, current):
    """The least prefix sum of d in the order ``order`` over the cuts of ``vals`` (where it
    drops, and 0 and n): (first such cut, its sum, the sum after ``current`` rows)."""
    cum = np.concatenate(([0], np.cumsum(d[order])))
    cuts = np.unique(np.concatenate(([0], 1 + np.flatnonzero(vals[1:] < vals[:-1]), [len(vals)])))
    best = int(cuts[np.argmin(cum[cuts])])
    return best, int(cum[best]), int(cum[current])


def descending_keys(values, shift):
    """Per value: its float64 bits turned into a word that falls as the value rises (sign and
    magnitude as one unsigned order), its low ``shift`` bits replaced by the value's position."""
    u = np.asarray(values, dtype=np.float64).view(np.uint64)
    sign = np.uint64(1) << np.uint64(63)
    key = np.where(u & sign, u, ~u & ~sign)
    low = (np.uint64(1) << np.uint64(shift)) - np.uint64(1)
    return (key & ~low) | np.arange(len(u), dtype=np.uint64)


def unpack_keys(keys, shift, values):
    """The positions in the low ``shift`` bits of ``keys``, and the values at them."""
    order = (keys & ((np.uint64(1) << np.uint64(shift)) - np.uint64(1))).astype(np.intp)
    return values[order], order


def order_ties(vals, order):
    """``vals`` and ``order`` stably sorted by decreasing ``vals``."""
    at = np.argsort(-vals, kind="stable")
    return vals[at], order[at]


def mask_times(X, B):
    """The 0/1 matrix X (dense) times the dense block B."""
    return X.astype(float) @ B


def rows_times(Y, M):
    """A block times a small matrix."""
    return Y @ M


# -- ELBMF (Dalleiger & Vreeken, NeurIPS 2022) -------------------------------------------------


def elbmf_prox(x, kappa, lam):
    """The elastic Boolean proximal operator of the reference code (sdall/elbmf-python's
    ``proxelbmfnn``): towards the nearer of 0 and 1 by ``kappa``, shrunk by ``1 / (1 + lam)``,
    floored at 0."""
    y = np.where(x <= 0.5, x - kappa * np.sign(x), x - kappa * np.sign(x - 1) + lam) / (1 + lam)
    return np.maximum(y, 0.0)


def elbmf_support_gradient(X, cells, F, Ot, listed):
    """Dense: the sparse part of ELBMF's gradient (``banmf._kernels.elbmf.support_gradient``).
    ``X``, ``cells`` dense bool of one shape; ``listed``: the cells are the observed zeros."""
    S = F.astype(np.float64) @ Ot.astype(np.float64).T
    if listed:
        R = np.where(X, S - 1.0, 0.0) + np.where(cells, S, 0.0)
    else:
        R = -X.astype(np.float64) - np.where(cells, S, 0.0)
    return R @ Ot


def elbmf_observed_sums(X, cells, F, Ot):
    """Dense: (Σ_X s, Σ_X s², Σ_cells s²) of ``s = F Otᵀ``."""
    S = F.astype(np.float64) @ Ot.astype(np.float64).T
    return np.array([S[X].sum(), (S[X] ** 2).sum(), (S[cells] ** 2).sum()])


def _elbmf_step(X, M, U, U_prev, V, l1, l2, beta):
    """One iPALM half-step of ELBMF for U against V (the reference's ``elbmf_step_ipalm``),
    the loss masked to the observed cells ``M`` (None: every cell, the reference's own
    gradient ``U VVᵀ − X Vᵀ``)."""
    VVt = V @ V.T
    L = max(np.linalg.norm(VVt), 1e-4)  # Frobenius, as the reference code's ``norm()``
    if beta:
        U_hat = U + beta * (U - U_prev)
        eta = 2 * (1 - beta) / (1 + 2 * beta) / L
    else:
        U_hat = U
        eta = 1 / (1.1 * L)
    grad = U_hat @ VVt - X @ V.T if M is None else (M * (U_hat @ V - X)) @ V.T
    return elbmf_prox(U_hat - eta * grad, l1 * eta, l2 * eta)


def elbmf(X, U, V, max_iter, l1=0.01, l2=0.02, rate=1.02, beta=1e-4, tol=None, observed=None):
    """Dense numpy port of ELBMF (the reference code's ``elbmf_ipalm``, float64) from U (n, k),
    V (k, m): U then V each iteration with l2 weight ``l2 · min(rate^t, 1e100)``, the inertia
    from the previous iterate (iPALM), the loss ``‖X − UV‖²`` over ``observed`` (dense bool;
    None: all) after each iteration, stopping when it moves by less than ``tol``. Returns U, V
    and the losses (round at ½ for the Boolean factors)."""
    X = np.asarray(X, dtype=np.float64)
    M = None if observed is None else observed.astype(np.float64)
    U, V = np.array(U, dtype=np.float64), np.array(V, dtype=np.float64)
    U_prev, V_prev = U.copy(), V.copy()
    losses, loss = [], np.inf
    for t in range(max_iter):
        tau = min(rate**t, 1e100)
        U, U_prev = _elbmf_step(X, M, U, U_prev, V, l1, l2 * tau, beta), U
        Vt = _elbmf_step(X.T, None if M is None else M.T, V.T, V_prev.T, U.T, l1, l2 * tau, beta)
        V, V_prev = Vt.T, V
        R = (X - U @ V) ** 2
        previous, loss = loss, float((R if M is None else M * R).sum())
        losses.append(loss)
        if tol and abs(loss - previous) < tol:
            break
    return U, V, losses
