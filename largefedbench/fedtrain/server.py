"""Server steps of federated training, applied to a round's released (noised) sum of client updates Δ.

- :class:`ServerOptimizer` — DP-FedAvg's fixed-denominator step (McMahan et al. 2018, Alg. 1): the mean update is
  the noisy sum divided by the *expected* cohort q·N (its sensitivity does not depend on the random, private cohort
  size), then SGD with optional momentum, or Adam on it (DP-FedAdam);
- :func:`ftrl_weights` — DP-FTRLM's step (Kairouz et al. 2021): θ_t = θ_0 + lr · m_t / B on the noisy prefix sum.

Both are post-processing of released sums only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from largefedbench.errors import InputError
from largefedbench.fedtrain.flat import FlatParams

__all__ = ["ServerOptimizer", "ServerState", "ftrl_weights"]


@dataclass
class ServerState:
    """The rounds-loop state of a method whose server holds the global weights: the server's ``state_dict()``."""

    server: dict[str, Any] = field(default_factory=dict)


class ServerOptimizer:
    """The global weights (``flat``) and the server optimizer: "sgd" (``lr``, ``momentum``) or "adam"."""

    ADAM_BETAS = (0.9, 0.999)
    ADAM_EPS = 1e-8

    def __init__(self, flat: FlatParams, *, lr: float = 1.0, momentum: float = 0.0, optimizer: str = "sgd") -> None:
        if optimizer not in ("sgd", "adam"):
            raise InputError(f"server_optimizer={optimizer!r}; choose 'sgd' or 'adam'")
        if not lr > 0 or not 0 <= momentum < 1:
            raise InputError(f"server lr={lr} must be > 0 and server momentum={momentum} in [0, 1)")
        self.flat, self.lr, self.momentum_factor, self.optimizer = flat, float(lr), float(momentum), optimizer
        zeros = torch.zeros_like(flat.get())
        self.momentum, self.second, self.steps = zeros, zeros.clone(), 0

    def step(self, noisy_sum: torch.Tensor, expected_clients: float) -> float:
        """Apply one round's released sum; returns the L2 norm of the noisy mean update."""
        weights = self.flat.get()
        mean = torch.as_tensor(noisy_sum).to(weights).reshape(-1) / max(float(expected_clients), 1e-12)
        self.steps += 1
        if self.optimizer == "adam":
            b1, b2 = self.ADAM_BETAS
            self.momentum = b1 * self.momentum + (1 - b1) * mean
            self.second = b2 * self.second + (1 - b2) * mean * mean
            move = (self.momentum / (1 - b1**self.steps)) / ((self.second / (1 - b2**self.steps)).sqrt() + self.ADAM_EPS)
        else:
            self.momentum = self.momentum_factor * self.momentum + mean
            move = self.momentum
        self.flat.set(weights + self.lr * move)
        return float(torch.linalg.vector_norm(mean))

    def state_dict(self) -> dict[str, Any]:
        return {"weights": self.flat.get().cpu(), "momentum": self.momentum.cpu(), "second": self.second.cpu(),
                "steps": self.steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        like = self.momentum
        self.flat.set(state["weights"].to(like))
        self.momentum, self.second = state["momentum"].to(like).clone(), state["second"].to(like).clone()
        self.steps = int(state["steps"])


def ftrl_weights(theta0: torch.Tensor, momentum_buffer: torch.Tensor | None, noisy_prefix_sum: torch.Tensor, *,
                 lr: float, momentum: float, per_round: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One DP-FTRLM server step: ``(θ_t, m_t)`` with m_t = β·m_{t-1} + S̃_t and θ_t = θ_0 + lr·m_t / B."""
    buffer = noisy_prefix_sum if momentum_buffer is None else momentum * momentum_buffer + noisy_prefix_sum
    return theta0 + lr * buffer / per_round, buffer
