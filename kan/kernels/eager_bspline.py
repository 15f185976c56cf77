"""Eager (pure PyTorch) kernels for the B-spline KAN layer: every order, device and dtype.

The fallback behind the same interface as kan/kernels/numba_bspline.py and kan/kernels/triton_bspline.py
(see _BSplineKANFunction in kan/layers.py). On a uniform grid, x in knot interval j
(u = (x - t_0) / h, j = floor(u), f = u - j) has only order + 1 non-zero B-splines,
k = j - order .. j, whose values are fixed polynomials in f: forward is one Horner on a
(B, order + 1, I) tensor and one scatter into a padded buffer; backward gathers the order + 1
local entries of grad_F back, and for out = 1 gathers the weights instead of forming grad_F.
The dense Cox-de Boor recursion over all K basis functions is never run.
"""

from __future__ import annotations

import torch


def uniform_bspline_local_coefficients(spline_order: int) -> torch.Tensor:
    """Polynomial coefficients (float64, (order + 1, order + 1)) of the local B-spline values.

    For u = j + f inside knot interval j, the non-zero basis functions are
    B_{j - order + r}, r = 0 .. order, and B_{j - order + r}(u) = sum_q M[q, r] f^q.
    Derived from the cardinal recursion N_p(z) = (z N_{p-1}(z) + (p + 1 - z) N_{p-1}(z - 1)) / p
    with z = p - r + f, which gives, on the local values v_p[r] = N_p(p - r + f):
        v_p[r] = ((p - r + f) v_{p-1}[r - 1] + (r + 1 - f) v_{p-1}[r]) / p.
    """
    p_max = spline_order
    # polys[r] = coefficient list (ascending powers of f), padded to p_max + 1 entries
    polys = [[1.0] + [0.0] * p_max]

    def mul_linear(poly: list[float], c0: float, c1: float) -> list[float]:
        out = [0.0] * (p_max + 1)
        for q, a in enumerate(poly):
            if a == 0.0:
                continue
            out[q] += a * c0
            if q + 1 <= p_max:
                out[q + 1] += a * c1
        return out

    for p in range(1, p_max + 1):
        new = []
        for r in range(p + 1):
            acc = [0.0] * (p_max + 1)
            if r - 1 >= 0:
                acc = [a + b for a, b in zip(acc, mul_linear(polys[r - 1], p - r, 1.0))]
            if r <= p - 1:
                acc = [a + b for a, b in zip(acc, mul_linear(polys[r], r + 1, -1.0))]
            new.append([a / p for a in acc])
        polys = new
    return torch.tensor(polys, dtype=torch.float64).t().contiguous()  # (q, r)


class LocalBSpline:
    """The uniform B-spline basis of one (grid, order, range), and its local evaluation.

    Every kernel reads the geometry: `order`, `num_basis` K, `num_intervals` (knot intervals in
    the extended span), `t0` (first knot) and `inv_h` (1 / knot spacing). The eager kernel's
    features live in a padded buffer (B, E, I), E = `num_rows` = K + 2p + 2, rows
        [0, p)             left padding
        p                  silu(x) (the base branch)
        p + 1 + k          B_k(x), k = 0 .. K - 1
        [p + 1 + K, E)     right padding
    For x in knot interval j (clamped to -1 .. G + 2p, so "left of" and "right of" the span are
    intervals too) the p + 1 local values go to rows j + 1 + r, r = 0 .. p. Values of basis
    functions that do not exist land in the padding or in the base row (written after the
    scatter), so no masks are needed; the GEMMs read rows [p, p + 1 + K) through a strided view.
    """

    def __init__(self, grid_size: int, spline_order: int, grid_range: tuple[float, float]) -> None:
        lo, hi = grid_range
        p = spline_order
        self.order = p
        self.num_basis = grid_size + p
        self.num_intervals = grid_size + 2 * p  # knot intervals in the extended span
        self.num_rows = self.num_basis + 2 * p + 2  # E
        self.h = (hi - lo) / grid_size
        self.inv_h = 1.0 / self.h
        self.t0 = lo - p * self.h  # first knot
        self.coef64 = uniform_bspline_local_coefficients(p)  # (q, r)
        self._cache: dict[tuple[torch.device, torch.dtype], tuple] = {}
        self._knots: dict[tuple[torch.device, torch.dtype], torch.Tensor] = {}

    def knots(self, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        """(2,) [t0, inv_h] on `device` in `dtype`, built once per (device, dtype) and then reused:
        a tensor built per call is a host-to-device copy, which CUDA-graph capture forbids."""
        key = (torch.device(device), dtype)
        if key not in self._knots:
            self._knots[key] = torch.tensor([self.t0, self.inv_h], dtype=dtype, device=device)
        return self._knots[key]

    def constants(self, device: torch.device, dtype: torch.dtype) -> tuple:
        key = (device, dtype)
        if key not in self._cache:
            p = self.order
            coef = self.coef64  # (q, r): B_{j-p+r} = sum_q coef[q, r] f^q
            # d/dx = (1/h) d/df: derivative coefficients, degree p - 1, padded to p + 1 powers
            dcoef = torch.zeros_like(coef)
            dcoef[:p] = coef[1:] * (torch.arange(1, p + 1, dtype=torch.float64) * self.inv_h).unsqueeze(1)
            both = torch.cat([coef, dcoef], dim=1)  # (q, 2(p+1)): values and derivatives in one Horner
            as_t = lambda t: t.to(device=device, dtype=dtype).view(p + 1, 1, -1, 1)  # noqa: E731
            self._cache[key] = (
                as_t(coef),
                as_t(both),
                (torch.arange(p + 1, device=device) + 1).view(1, p + 1, 1),
                torch.tensor(self.inv_h, dtype=dtype, device=device),
                torch.tensor(-self.t0 * self.inv_h, dtype=dtype, device=device),
            )
        return self._cache[key]

    def local(self, x: torch.Tensor, need_derivative: bool):
        """x (B, I) -> buffer rows (B, p+1, I) int64, values (B, p+1, I), d/dx values or None."""
        coef, both, row_offset, scale, shift = self.constants(x.device, x.dtype)
        p = self.order
        u = torch.addcmul(shift, x, scale)  # (B, I): (x - t_0) / h, position in knot intervals
        j = torch.floor(u)
        f = (u - j).unsqueeze(1)  # (B, 1, I) in [0, 1)
        rows = j.clamp_(-1, self.num_intervals).to(torch.int64).unsqueeze(1) + row_offset  # (B, p+1, I)
        c = both if need_derivative and p > 0 else coef
        # Horner in f, one polynomial per column of c (coefficients broadcast along dim 1)
        if p == 0:
            return rows, torch.ones_like(f), None
        v = torch.addcmul(c[p - 1], f, c[p])
        for q in range(p - 2, -1, -1):
            v = torch.addcmul(c[q], v, f)
        if c is coef:
            return rows, v, None
        return rows, v[:, : p + 1], v[:, p + 1 :]


def usable(x: torch.Tensor, spline_order: int) -> bool:
    """Always: the eager path is the fallback for every order, device and dtype."""
    return True


def features(x: torch.Tensor, spline: LocalBSpline, need_grad_x: bool):
    """x (B, I) -> F (B, 1 + K, I) = [silu(x) | B_0 .. B_{K-1}], a view of the padded buffer,
    and what grad_x needs: (buffer rows (B, p+1, I), d/dx of the local values or None)."""
    p, nb = spline.order, spline.num_basis
    rows, w, dw = spline.local(x, need_grad_x)
    buf = x.new_empty(x.shape[0], spline.num_rows, x.shape[1])  # (B, E, I)
    buf[:, p + 1 : p + 1 + nb].zero_()  # padding may hold anything: it is never read
    buf.scatter_(1, rows, w)
    torch.ops.aten.silu.out(x, out=buf[:, p])  # overwrites values that landed in the base row
    return buf[:, p : p + 1 + nb], (rows, dw)


def grad_x(x: torch.Tensor, spline: LocalBSpline, saved, grad_y: torch.Tensor, eff: torch.Tensor) -> torch.Tensor:
    """grad_y (B, O), effective weight W (O, 1 + K, I) -> grad_x (B, I), gathering only the
    p + 1 local rows of grad_F = grad_y W."""
    rows, dw = saved
    p, nb = spline.order, spline.num_basis
    num_batch, num_out = grad_y.shape
    sig = torch.sigmoid(x)
    dsilu = sig * (1 + x * (1 - sig))  # silu'(x)
    if num_out == 1:
        # grad_F = grad_y (B, 1) x W (1, (1+K) I) is an outer product: gather the local
        # entries of W (zero-padded like the features) instead of materialising grad_F
        w_pad = x.new_zeros(spline.num_rows, x.shape[1])  # (E, I)
        w_pad[p + 1 : p + 1 + nb] = eff[0, 1:]
        grad_x = eff[0, 0] * dsilu
        if dw is not None:
            grad_x += (w_pad.expand(num_batch, -1, -1).gather(1, rows) * dw).sum(1)
        grad_x *= grad_y
        return grad_x
    grad_buf = x.new_empty(num_batch, spline.num_rows, x.shape[1])  # (B, E, I), the features' padded layout
    grad_buf[:, :p].zero_()
    grad_buf[:, p + 1 + nb :].zero_()
    torch.mm(grad_y, eff.view(num_out, -1), out=grad_buf[:, p : p + 1 + nb].reshape(num_batch, (1 + nb) * x.shape[1]))
    grad_x = grad_buf[:, p] * dsilu
    if dw is not None:
        grad_buf[:, p] = 0  # base row: the local gather must read zeros there
        grad_x += (grad_buf.gather(1, rows) * dw).sum(1)
    return grad_x
