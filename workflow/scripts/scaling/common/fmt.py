"""How a number reads, for the whole report (its text, tables, guidelines and answer): one layer, so
one quantity reads alike wherever it is shown.

- significant digits, never e-notation (1,229 / 52.3 / 0.000029);
- a value with an interval to the precision the interval supports (two significant digits of its
  width), and no interval where it has no width (a value that is exact, or every repeat alike);
- a lower end below what the quantity can take (a share, a time) shown as that floor;
- a count with its noun in the right number ("1 point", "3 points"), never "point(s)";
- a cost in GPU-hours on GPUs and rank-hours on CPUs, one unit each.

Standard library only: the planner may print with it too.
"""

from __future__ import annotations

import math


def _known(x) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def sig(x, digits: int = 3) -> str:
    """`x` to `digits` significant digits in plain notation with thousands separators: 12,288 (a
    number of more digits keeps them: it is not rounded to 12,300), 52.3, 0.000029; a whole number
    whole (96); '–' when unknown."""
    if not _known(x):
        return "–"
    x = float(x)
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    if x == 0:
        return "0"
    if x.is_integer() and abs(x) < 1e15:  # a whole number reads whole: 96 steps, not 96.0
        return f"{int(x):,}"
    nd = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    if abs(round(x, nd)) >= 10 ** (digits - nd) and nd > 0:  # 99.96 -> 100, not 100.0
        nd -= 1
    return f"{round(x, nd):,.{nd}f}"


def decimals(lo: float, hi: float, scale: float = 1.0) -> int:
    """Decimal places that keep two significant digits of the interval's width (at least 0): a number
    is printed to the precision its interval supports, no further (width 0.085 s: 3 places; 59%: 0)."""
    width = abs(hi - lo) * scale
    if width <= 0:
        return 2
    return max(0, 1 - math.floor(math.log10(width)))


def _places2(x: float) -> int:
    """Decimal places that show two significant digits of x (at least 0)."""
    return max(0, 1 - math.floor(math.log10(abs(x)))) if x else 0


def zero_width(lo, hi, value=None) -> bool:
    """An interval that says nothing: no ends, or ends equal to float noise (one repeat, or a
    quantity that is exact, such as the baseline's speedup of 1)."""
    if not (_known(lo) and _known(hi)):
        return True
    size = max(abs(float(lo)), abs(float(hi)), abs(float(value)) if _known(value) else 0.0)
    return abs(float(hi) - float(lo)) <= 1e-9 * size


def interval(value, lo=None, hi=None, scale: float = 1.0, unit: str = "", floor: float | None = None,
             level: str = "") -> str:
    """'8% [1%, 60%]' style: value and interval rounded alike to what the interval supports; a lower
    end below `floor` (a quantity that cannot be negative) is shown as the floor itself; a value with
    no interval, or one of no width, alone at three significant digits. `level` ('98.3%') names the
    interval's level inside it: '8% [98.3% CI 1%, 60%]'."""
    if not _known(value):
        return "–"
    if floor is not None and _known(lo):
        lo = max(float(lo), floor)
    if zero_width(lo, hi, value):
        return f"{sig(value * scale)}{unit}"
    nd = decimals(lo, hi, scale)
    # each number to the interval's precision, and never fewer than two significant digits of its
    # own (3.9 [0.81, 19], not 4 [1, 19]: an end that crosses 1 must not round onto it); 0 reads 0
    f = (lambda x: "0" if x == 0 else f"{x * scale:,.{max(nd, _places2(x * scale))}f}")
    at = f"{level} CI " if level else ""
    if unit == "%":  # '8% [1%, 60%]': a percentage reads with its sign on each number
        return f"{f(value)}% [{at}{f(lo)}%, {f(hi)}%]"
    return f"{f(value)} [{at}{f(lo)}, {f(hi)}]{unit}"


def band(b: dict | None, scale: float = 1.0, unit: str = "", floor: float | None = None) -> str:
    """A {value, lo, hi} mapping (a prediction's band) as `interval` reads it."""
    if not b:
        return "–"
    return interval(b.get("value"), b.get("lo"), b.get("hi"), scale, unit, floor)


def seconds(value, lo=None, hi=None, level: str = "") -> str:
    """A duration in the unit that reads best (ms below a second, s below an hour, h above)."""
    if not _known(value):
        return "–"
    if value < 1:
        return interval(value, lo, hi, 1e3, " ms", floor=0.0, level=level)
    if value < 3600:
        return interval(value, lo, hi, 1.0, " s", floor=0.0, level=level)
    return interval(value, lo, hi, 1 / 3600, " h", floor=0.0, level=level)


def cost_unit(device: str | None) -> str:
    """The one name of the cost: GPU-hours where the ranks ran on GPUs, rank-hours on CPUs."""
    return "GPU-hours" if device == "GPU" else "rank-hours"


def cost(hours, device: str | None) -> str:
    """'2.5 GPU-hours', '0.000029 rank-hours': two significant digits (a cost is an estimate), in
    hours whatever its size, so one cost has one unit across the report."""
    if not _known(hours):
        return "–"
    return f"{sig(hours, 2)} {cost_unit(device)}"


def about(x) -> str:
    """An estimate to two significant digits, whole: 'about 900' for 896 (a crossover batch read off a
    model is no sharper), the same wherever it is said."""
    if not _known(x):
        return "–"
    return f"{float(f'{float(x):.2g}'):,.0f}" if abs(x) >= 1 else sig(x, 2)


def error_text(pct) -> str:
    """A model's leave-one-out error: two significant digits below 10% (0.49%, not 0%), whole above."""
    if not _known(pct):
        return "not validated"
    return f"{sig(pct, 2)}%" if pct < 10 else f"{pct:.0f}%"


def plural(n, word: str, many: str | None = None) -> str:
    """'1 point', '3 points', '2 looks': a count with its noun in the right number."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"
