"""Differential-privacy accounting for LargeFedBench (DESIGN.md §5–6).

Events (what was released) go into a ``PrivacyLedger``; accountants (opacus RDP, dp_accounting RDP
with tree aggregation, PLD, PRV) turn events into ε; calibration turns a target (ε, δ) into σ.
Importing this package does not import torch, opacus or dp_accounting.
"""

from largefedbench.privacy.accountants import ACCOUNTANTS, epsilon_of, make_accountant, resolve_accountant
from largefedbench.privacy.calibration import PrivacyBudget, calibrate_noise_multiplier
from largefedbench.privacy.events import (
    Event,
    GaussianEvent,
    PoissonGaussianEvent,
    TreeAggregationEvent,
    event_from_dict,
)
from largefedbench.privacy.ledger import PrivacyLedger
from largefedbench.privacy.mechanisms import (
    add_gaussian_noise,
    analytic_gaussian_sigma,
    classical_gaussian_sigma,
)
from largefedbench.privacy.report import epsilon_report, noise_report

__all__ = [
    "ACCOUNTANTS",
    "Event",
    "GaussianEvent",
    "PoissonGaussianEvent",
    "PrivacyBudget",
    "PrivacyLedger",
    "TreeAggregationEvent",
    "add_gaussian_noise",
    "analytic_gaussian_sigma",
    "calibrate_noise_multiplier",
    "classical_gaussian_sigma",
    "epsilon_of",
    "epsilon_report",
    "event_from_dict",
    "make_accountant",
    "noise_report",
    "resolve_accountant",
]
