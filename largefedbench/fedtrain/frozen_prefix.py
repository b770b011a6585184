"""The hidden states of fixed token rows below an adapter's lowest layer, computed once.

A LoRA adapter in the top k decoder layers leaves every layer under it frozen, so the hidden state that enters the
lowest adapted layer is a function of the tokens alone. FedBis's clients each train a selector on a few rows of one
public pair pool, and every round's ~800 clients read the same ~2,000 rows: running the frozen layers once per row,
instead of in every forward of every client, makes a selector step about 3× faster (SmolLM2-135M, a LoRA in the top
4 of its 30 layers; docs/speed.md).

The states are computed for all rows at once, in fixed batches of the rows' own order, so they do not depend on which
client asks first (a resumed run computes the same ones). They are used only in eval mode (where dropout is off, as
in :func:`~largefedbench.fedtrain.local_sgd.local_updates` and in scoring) and only for the model they were computed
with; anything else runs the whole model. They are not pickled: each process computes its own.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch

__all__ = ["FrozenPrefix", "decoder_layers", "lowest_adapted_layer", "pad_rows"]


class _StopForward(Exception):
    """Raised by the pre-hook once the lowest adapted layer's input is caught: the layers above need not run."""


def decoder_layers(model: torch.nn.Module) -> torch.nn.ModuleList | None:
    """The decoder layers of a (peft-wrapped) transformers causal LM: its module list of ``num_hidden_layers``
    (``n_layer``) entries, or None when there is no such list."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    config = getattr(base, "config", None)
    n = getattr(config, "num_hidden_layers", None) or getattr(config, "n_layer", None)
    for module in base.modules():
        if isinstance(module, torch.nn.ModuleList) and n and len(module) == n:
            return module
    return None


def lowest_adapted_layer(model: torch.nn.Module) -> int:
    """The index of the lowest decoder layer with a trainable parameter when every trainable parameter lies in the
    decoder layers (a LoRA in the top layers); 0 otherwise (nothing below the adapter is frozen)."""
    layers = decoder_layers(model)
    if layers is None:
        return 0
    in_layers = {id(p) for p in layers.parameters()}
    if any(p.requires_grad and id(p) not in in_layers for p in model.parameters()):
        return 0
    adapted = [i for i, layer in enumerate(layers) if any(p.requires_grad for p in layer.parameters())]
    return adapted[0] if adapted else 0


class _Feed(torch.nn.Module):
    """Stands in for decoder layer 0: returns the batch's cached states, whatever it is given."""

    def __init__(self, states: torch.Tensor) -> None:
        super().__init__()
        self.states = states

    def forward(self, hidden_states, *args, **kwargs):
        return self.states


class _Skip(torch.nn.Module):
    """Stands in for a frozen decoder layer above 0: passes the cached states through."""

    def forward(self, hidden_states, *args, **kwargs):
        return hidden_states


class FrozenPrefix:
    """For the token ``rows`` of one model, the input of the adapter's lowest layer ``below`` (each row's states at
    its own length), computed on first use per autocast setting, and a context that feeds a batch of them in."""

    def __init__(self, model: torch.nn.Module, rows: Sequence[Sequence[int]], pad_id: int, batch_size: int = 64,
                 progress: bool = False) -> None:
        self.layers = decoder_layers(model)
        self.below = lowest_adapted_layer(model)
        self.model, self.rows, self.pad_id, self.batch_size = model, rows, int(pad_id), max(1, int(batch_size))
        self.progress = bool(progress)
        self.index = {tuple(r): i for i, r in enumerate(rows)}
        self._states: dict[bool, list[torch.Tensor]] = {}

    def __getstate__(self):  # a worker computes its own states
        return {**self.__dict__, "_states": {}}

    def covers(self, model: torch.nn.Module, rows: Sequence[Sequence[int]]) -> bool:
        """Whether a forward of ``model`` on ``rows`` may start from the cached states."""
        return (self.below > 0 and model is self.model and not model.training
                and all(tuple(r) in self.index for r in rows))

    def states(self, autocast: bool) -> list[torch.Tensor]:
        """Every row's input of layer ``below`` under this autocast setting, computed once."""
        if autocast not in self._states:
            self._states[autocast] = self._compute(autocast)
        return self._states[autocast]

    @torch.no_grad()
    def _compute(self, autocast: bool) -> list[torch.Tensor]:
        from tqdm.auto import tqdm

        caught: list[torch.Tensor] = []

        def catch(module, args, kwargs):
            caught.append(args[0] if args else kwargs["hidden_states"])
            raise _StopForward

        device = next(self.model.parameters()).device
        out: list[torch.Tensor] = []
        handle = self.layers[self.below].register_forward_pre_hook(catch, with_kwargs=True)
        try:
            desc = f"layers 0-{self.below - 1} once per row ({'bf16' if autocast else 'float32'})"
            for start in tqdm(range(0, len(self.rows), self.batch_size), desc=desc, disable=not self.progress,
                              leave=False):
                rows = self.rows[start : start + self.batch_size]
                ids, mask = pad_rows(rows, self.pad_id)
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
                    try:
                        self.model(input_ids=ids.to(device), attention_mask=mask.to(device))
                    except _StopForward:
                        pass
                states = caught.pop().float()
                out.extend(states[i, : len(r)].clone() for i, r in enumerate(rows))
        finally:
            handle.remove()
        return out

    @contextmanager
    def feeding(self, rows: Sequence[Sequence[int]], width: int, autocast: bool) -> Iterator[None]:
        """Within: the model's frozen layers are replaced by the cached states of ``rows`` (right-padded with zeros
        to ``width``; a causal model's real positions never read the padding)."""
        cached = self.states(autocast)
        first = cached[0]
        batch = first.new_zeros((len(rows), width, first.shape[-1]))
        for i, r in enumerate(rows):
            batch[i, : len(r)] = cached[self.index[tuple(r)]]
        saved = [self.layers[i] for i in range(self.below)]
        try:
            for i in range(self.below):
                self.layers[i] = _Feed(batch) if i == 0 else _Skip()
            yield
        finally:
            for i, layer in enumerate(saved):
                self.layers[i] = layer


def pad_rows(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token rows right-padded with ``pad_id`` to the longest, and their attention mask."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.as_tensor(list(r))
        mask[i, : len(r)] = 1
    return ids, mask
