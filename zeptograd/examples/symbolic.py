"""An example: build a symbolic index expression, simplify it, print the graph before and after.

The expression is what a reshape of a (4, 6) view into (24,) and back leaves in a kernel: the flat index
split into row and column with // and %, recombined, then offset and bounds-checked. The symbolic rules
fold it back to the plain loop index.

    python -m zeptograd.examples.symbolic
"""

from __future__ import annotations

from collections import Counter

from zeptograd.uop import UOp, track_rewrites


def build() -> tuple[UOp, UOp]:
    """The expression and its bounds check, over a loop index i in [0, 24) and a variable n in [1, 8]."""
    i = UOp.range(24, axis=0)
    n = UOp.variable("n", 1, 8)
    row, col = i // 6, i % 6
    flat = (row * 6 + col) * n + n * 2 - n * 2  # reshape back, scaled by a symbolic stride
    offset = (flat + n * 4) // n  # a view that starts 4 rows later
    in_bounds = (offset < 28) & (offset >= 4)
    return offset, in_bounds


def main() -> None:
    offset, in_bounds = build()
    for title, expr in (("index", offset), ("bounds check", in_bounds)):
        with track_rewrites() as events:
            simple = expr.simplify()
        print(f"=== {title} ===")
        print(f"before ({len(expr.toposort())} nodes): {expr}")
        print(expr.render())
        print(f"after ({len(simple.toposort())} nodes): {simple}")
        print(simple.render())
        fired = Counter(e.rule for e in events)
        print("rules applied:", ", ".join(f"{rule} x{n}" for rule, n in fired.most_common()))
        print()


if __name__ == "__main__":
    main()
