"""A model's trainable parameters as one flat vector: what a federated round broadcasts, what a client reports
(Δ = local − global) and what the server steps.

The trainable parameters are all of a model's for full fine-tuning (the downstream model) and only the adapter's for
LoRA (the generators, whose base weights are frozen). Tied weights count once (``parameters()`` yields them once).
"""

from __future__ import annotations

import torch

from largefedbench.errors import InputError

__all__ = ["FlatParams"]


class FlatParams:
    """The trainable parameters of ``model``, in ``parameters()`` order, read and written as one float32 vector
    on the model's device."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.params = [p for p in model.parameters() if p.requires_grad]
        if not self.params:
            raise InputError("the model has no trainable parameters, so there is nothing to train: unfreeze its "
                             "weights or add a LoRA adapter first")
        self.numel = sum(p.numel() for p in self.params)

    def get(self) -> torch.Tensor:
        """A detached copy of the parameters as one vector."""
        return torch.cat([p.detach().reshape(-1).float() for p in self.params])

    def set(self, vector: torch.Tensor) -> None:
        """Write a :meth:`get` vector back into the model (in place)."""
        if vector.numel() != self.numel:
            raise InputError(f"a vector of {vector.numel()} values for {self.numel} trainable parameters")
        with torch.no_grad():
            start = 0
            for p in self.params:
                p.copy_(vector[start : start + p.numel()].view_as(p).to(p.dtype))
                start += p.numel()
