"""How much each test tier runs: one rule for every proof and property test.

- ``make test-fast`` sets ``CHONGMING_TIER=fast``: property tests run a fifth
  of their examples (the inner loop; the same rules, fewer random cases).
- ``make test`` runs every property test at its full count and every proof
  at a reduced size, so a change is checked against every failure mode within
  the suite's budget.
- ``make proofs`` sets ``CHONGMING_PROOFS=full``: each proof runs at the size
  its pass mark names (docs/reliability.md).

A proof's own variable (``CHONGMING_DURABLE_KILLS=20``) wins over the tier,
for a run of one size by hand. A proof that has a full size carries the
``proof`` mark, which is what ``make proofs`` selects.
"""

from __future__ import annotations

import os

#: ``make proofs``: every proof at its full size.
FULL = os.environ.get("CHONGMING_PROOFS", "") == "full"
#: ``make test-fast``: property tests with fewer examples.
FAST = os.environ.get("CHONGMING_TIER", "") == "fast"


class TierSizeError(ValueError):
    """A size variable that is not a positive number."""


def proof_size(variable: str, *, reduced: int, full: int) -> int:
    """The count a proof runs with: ``$variable``, else ``full`` or ``reduced``."""
    return int(_read(variable, reduced=reduced, full=full))


def proof_scale(variable: str, *, reduced: float, full: float = 1.0) -> float:
    """A load multiplier (1.0 = the pass mark), chosen the same way."""
    return _read(variable, reduced=reduced, full=full)


def examples(count: int) -> int:
    """``max_examples`` for a property test: ``count``, or a fifth in the fast tier."""
    return max(10, count // 5) if FAST else count


def _read(variable: str, *, reduced: float, full: float) -> float:
    raw = os.environ.get(variable, "")
    if not raw:
        return full if FULL else reduced
    try:
        value = float(raw)
    except ValueError:
        raise TierSizeError(f"{variable}={raw!r} is not a number") from None
    if not value > 0:
        raise TierSizeError(f"{variable}={raw!r} must be positive")
    return value
