"""Which whole-number counts reproduce rows of WebDetective's results table, under each form of F1_KU?

The paper's equations are unreachable; its table is not (as a published paper
note transcribes it). With n = 200 questions, a row's F1_GR, F1_KU and
GenScore pin the counts S (evidence sufficient), r (refused), h (refused among
the insufficient) and c (correct among the sufficient). This script searches
every count and prints, for each row and each candidate F1_KU form, the count
sets that reproduce all three printed values within 0.01 points (the table's
own rounding). The evidence behind the form chosen in
``docs/webdetective-metrics.md``; it reads no data (about 10 s of CPU):

    python scripts/webdetective_table_fit.py
"""

from __future__ import annotations

import sys

N = 200
TOLERANCE = 0.01  # points: the table's own rounding (two of its rows round up where ours round down)
#: (F1_GR, F1_KU, GenScore) as printed, in %
ROWS = {
    "o3-Pro": (9.37, 49.40, 20.86),
    "Grok-4": (37.63, 56.19, 34.71),
    "Doubao-1.6-Flash": (53.95, 19.46, 20.00),
    "DeepSeek-R1": (18.81, 15.55, 10.57),
}
#: F1_KU denominators: "every answer" is |A| + |S| (the paper's, by this fit), "sufficient answers" |A ∩ S| + |S|
FORMS = {
    "precision over every answer": lambda S, r, h: (N - r) + S,
    "precision over sufficient answers": lambda S, r, h: (S - (r - h)) + S,
}


def close(value: float, printed: float) -> bool:
    return abs(100 * value - printed) <= TOLERANCE + 1e-9


def solutions(f1_gr: float, f1_ku: float, gen: float, denominator) -> list[tuple[int, int, int, int]]:
    """Every (S, r, h, c) whose F1_GR = 2h/(r+I), F1_KU = 2c/denominator, GenScore = mean × S/N match the row."""
    found = []
    for S in range(1, N + 1):
        insufficient = N - S
        for r in range(N + 1):
            for h in range(min(r, insufficient) + 1):
                if r + insufficient == 0 or r - h > S:
                    continue
                gr = 2 * h / (r + insufficient)
                if not close(gr, f1_gr):
                    continue
                den = denominator(S, r, h)
                for c in range(S - (r - h) + 1):
                    ku = 2 * c / den if den else 0.0
                    if close(ku, f1_ku) and close((gr + ku) / 2 * S / N, gen):
                        found.append((S, r, h, c))
    return found


def main() -> int:
    for model, row in ROWS.items():
        for form, denominator in FORMS.items():
            found = solutions(*row, denominator)
            shown = ", ".join(f"S={S} r={r} h={h} c={c}" for S, r, h, c in found) or "none"
            print(f"{model:18} F1_KU {form:34} {len(found)} solution(s): {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
