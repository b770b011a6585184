"""Gap closed (POPri §5, DESIGN.md §8): the share of the eps=0 -> eps=inf accuracy gap a method recovers."""

from __future__ import annotations

import math

from largefedbench.errors import InputError


def gap_closed(acc: float, acc0: float, acc_inf: float) -> float:
    """``(acc - acc0) / (acc_inf - acc0)``: 0 at the public model (eps=0), 1 at non-private training (eps=inf).

    Negative when the method is worse than the public model, above 1 when it beats non-private training.
    """
    values = []
    for name, value in (("acc", acc), ("acc0", acc0), ("acc_inf", acc_inf)):
        try:
            values.append(float(value))
        except (TypeError, ValueError):
            raise InputError(f"{name}={value!r} must be a number (an accuracy)") from None
        if not math.isfinite(values[-1]):
            raise InputError(f"{name}={value!r} must be a finite accuracy")
    acc, acc0, acc_inf = values
    if acc_inf == acc0:
        raise InputError(
            f"gap closed is undefined: the eps=inf reference accuracy equals the eps=0 one ({acc0}). The non-private "
            "model did not improve on the public one; check that it was trained on the private train clients (more "
            "epochs, a larger learning rate) and that the window differs from the public period."
        )
    return (acc - acc0) / (acc_inf - acc0)
