"""The noise of a synthetic-data method's rounds.

Privacy plan (POPri §3.1 "Privacy guarantees", App. D.1): T rounds, each one Poisson-sampled Gaussian sum of
unit-norm client vectors (sensitivity 1) at rate q = clients_per_round / n_clients (q = 1: full participation,
as in the paper's Table 1); σ is the smallest noise multiplier whose T planned events fit the budget
(``PrivacyBudget.calibrate``, opacus RDP as in the paper). Every round goes through ``fed.private_sum``, which
records the event that the harness accounts.
"""

from __future__ import annotations

from largefedbench.errors import InputError, MethodError
from largefedbench.privacy import PoissonGaussianEvent

__all__ = ["noise_for_rounds"]


def noise_for_rounds(budget, fed, *, rounds: int, clients_per_round: int | None) -> tuple[float, float]:
    """``(σ, q)`` for ``rounds`` noisy sums at sampling rate ``q`` within ``budget`` (0 < ε < ∞)."""
    if rounds < 1:
        raise InputError(f"rounds={rounds} must be at least 1")
    if budget.is_public or budget.is_non_private:
        raise MethodError(f"a synthetic-data method runs at 0 < ε < ∞, got ε={budget.epsilon}; the references are "
                          "the methods 'public' (ε = 0) and 'non-private' (ε = ∞)")
    n = fed.n_clients
    if clients_per_round is None:
        q = 1.0
    elif not 1 <= clients_per_round <= n:
        raise InputError(f"clients_per_round={clients_per_round} must be between 1 and the number of clients ({n})")
    else:
        q = clients_per_round / n
    sigma = budget.calibrate(PoissonGaussianEvent(1.0, sample_rate=q, steps=rounds), n_clients=n)
    return float(sigma), q
