"""The privacy ledger's event types.

Each event is a frozen dataclass that says what was released, with which noise multiplier σ and how
often. ``to_dict``/``from_dict`` give a JSON-able form; ``to_dp_event`` gives the ``dp_accounting``
``DpEvent`` the accountants compose (written out in each class's ``dp_event_form``).

A noise multiplier of 0 means "no noise" (the non-private reference); such an event maps to
``NonPrivateDpEvent`` and every accountant reports ε = ∞ for it.

Every event also states what its accounting assumes (docs/privacy.md §3): the neighbouring ``relation`` (``add_remove``
one client, ``replace_one`` client, or dp_accounting's ``replace_special`` for tree aggregation), the ``sampling``
of the released cohort (``poisson``, ``fixed``-size without replacement, or ``none``: no amplification claimed)
and the L2 ``sensitivity`` the noise was calibrated for, in units of the clip norm (the noise std is σ·clip, so
the accountant sees σ / sensitivity). Accountants refuse the pairs they cannot account for
(:func:`largefedbench.privacy.accountants.check_assumptions`). Ledgers written before these fields existed read
back with the assumptions those releases made (each class's defaults).
"""

from __future__ import annotations

import functools
import logging
import math
from dataclasses import Field, dataclass, fields, replace
from typing import Any, ClassVar

from largefedbench.errors import PrivacyError
from largefedbench.privacy.rules import positive_int

__all__ = [
    "ASSUMPTION_FIELDS",
    "RELATIONS",
    "EVENT_SAMPLINGS",
    "PoissonGaussianEvent",
    "TreeAggregationEvent",
    "GaussianEvent",
    "Event",
    "EVENT_TYPES",
    "event_from_dict",
]


class _DropRdpConvergenceNoise(logging.Filter):
    """dp_accounting's RDP code logs '_compute_log_a_frac failed to converge … Excluding this order'
    for small σ at fractional orders; the order is dropped and the result is still valid."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("_compute_log_a_frac failed to converge")


@functools.cache
def dp_accounting():
    """Import ``dp_accounting`` lazily (it costs ~0.8 s) and silence its known-benign log noise."""
    import dp_accounting as lib  # noqa: PLC0415 - lazy on purpose

    logging.getLogger("absl").addFilter(_DropRdpConvergenceNoise())
    return lib


def _number(name: str, value: Any, expected: str = "") -> float:
    """``value`` as a float, or a PrivacyError saying that ``name`` must be a number (``expected``: where)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        raise PrivacyError(f"{name} must be a number{expected}, got {value!r}.") from None


def _noise_multiplier(value: Any) -> float:
    sigma = _number("noise_multiplier", value)
    if not math.isfinite(sigma) or sigma < 0:
        raise PrivacyError(
            f"noise_multiplier must be finite and ≥ 0 (0 = no noise), got {value!r}; "
            "calibrate it with PrivacyBudget.calibrate or calibrate_noise_multiplier."
        )
    return sigma


def _sample_rate(value: Any) -> float:
    q = _number("sample_rate", value, " in (0, 1]")
    if not 0.0 < q <= 1.0:
        raise PrivacyError(
            f"sample_rate must be in (0, 1] (the Poisson probability that a client takes part in a "
            f"round, e.g. clients_per_round / n_clients), got {value!r}."
        )
    return q


#: neighbouring relations: add or remove one client; replace one client; dp_accounting's REPLACE_SPECIAL (a client's
#: contributions replaced by a special value: how tree aggregation is accounted)
RELATIONS = ("add_remove", "replace_one", "replace_special")
#: how the released cohort was drawn: Poisson (amplification by sampling), fixed size without replacement, or none
#: (everyone, or no amplification claimed)
EVENT_SAMPLINGS = ("poisson", "fixed", "none")
#: the fields that state an event's assumptions (older ledgers lack them: their class defaults apply)
ASSUMPTION_FIELDS = ("relation", "sampling", "sensitivity")
#: how an event's own fields are checked; every other one (steps, rounds_per_epoch, epochs, count) is a count ≥ 1
_FIELD_CHECKS = {"noise_multiplier": _noise_multiplier, "sample_rate": _sample_rate}


def _assumptions(event: Any) -> None:
    if event.relation not in RELATIONS:
        raise PrivacyError(f"relation={event.relation!r}: a ledger event's neighbouring relation is one of "
                           f"{', '.join(RELATIONS)}.")
    if event.sampling not in EVENT_SAMPLINGS:
        raise PrivacyError(f"sampling={event.sampling!r}: a ledger event's sampling is one of "
                           f"{', '.join(EVENT_SAMPLINGS)}.")
    sensitivity = _number("sensitivity", event.sensitivity, " (in clip norms)")
    if not (math.isfinite(sensitivity) and sensitivity > 0):
        raise PrivacyError(f"sensitivity must be finite and > 0 (the L2 sensitivity in clip norms: 1 for add/remove, "
                           f"2 for replace-one), got {event.sensitivity!r}.")
    event._set("sensitivity", sensitivity)


class _EventBase:
    """Shared checks, JSON form, merging, re-noising and ``DpEvent`` for the frozen event dataclasses below."""

    type_name: ClassVar[str]
    dp_event_form: ClassVar[str]
    _count_field: ClassVar[str]
    # declared for the type checker: every subclass is a dataclass with these fields
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]
    noise_multiplier: float
    sensitivity: float

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name not in ASSUMPTION_FIELDS:
                value = getattr(self, f.name)
                check = _FIELD_CHECKS.get(f.name)
                self._set(f.name, check(value) if check else positive_int(f.name, value))
        _assumptions(self)

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)

    def _released_once(self, dpa):
        """The ``DpEvent`` of one release (σ ≠ 0); ``to_dp_event`` composes it ``_count_field`` times."""
        raise NotImplementedError

    def to_dp_event(self):
        dpa = dp_accounting()
        if self.noise_multiplier == 0:
            return dpa.NonPrivateDpEvent()
        return dpa.SelfComposedDpEvent(self._released_once(dpa), getattr(self, self._count_field))

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type_name, **{f.name: getattr(self, f.name) for f in fields(self)}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]):
        if data.get("type") != cls.type_name:
            raise PrivacyError(
                f"cannot read a {cls.__name__} from {data!r}: its 'type' must be {cls.type_name!r}."
            )
        names = {f.name for f in fields(cls)}
        given = set(data) - {"type"}
        if not (given <= names and names - given <= set(ASSUMPTION_FIELDS)):
            raise PrivacyError(
                f"a {cls.type_name!r} ledger event needs exactly the fields {sorted(names)}, "
                f"got {sorted(given)}; the ledger file is damaged or from another version."
            )
        return cls(**{name: data[name] for name in names & given})

    @property
    def accounted_noise_multiplier(self) -> float:
        """σ / sensitivity: the noise std in units of what one client can change (what the accountant sees)."""
        return self.noise_multiplier / self.sensitivity

    def with_noise_multiplier(self, noise_multiplier: float):
        """The same event with another σ (used to calibrate σ for a planned event)."""
        return replace(self, noise_multiplier=noise_multiplier)

    def merged_with(self, other: Event) -> Event | None:
        """``self`` followed by ``other`` as one event if they differ only in count, else None."""
        if type(other) is not type(self):
            return None
        key = self._count_field
        if any(getattr(self, f.name) != getattr(other, f.name) for f in fields(self) if f.name != key):
            return None
        return replace(self, **{key: getattr(self, key) + getattr(other, key)})


@dataclass(frozen=True)
class PoissonGaussianEvent(_EventBase):
    """``steps`` rounds, each a Poisson-sampled (rate ``sample_rate``) sum of clipped client vectors
    plus N(0, (σ·clip)²) noise: DP-FedAvg, PrE-Text and POPri rounds."""

    noise_multiplier: float
    sample_rate: float
    steps: int = 1
    relation: str = "add_remove"
    sampling: str = "poisson"
    sensitivity: float = 1.0

    type_name: ClassVar[str] = "poisson_gaussian"
    dp_event_form: ClassVar[str] = (
        "SelfComposedDpEvent(PoissonSampledDpEvent(sample_rate, GaussianDpEvent(noise_multiplier)), steps)"
    )
    _count_field: ClassVar[str] = "steps"

    def _released_once(self, dpa):
        return dpa.PoissonSampledDpEvent(self.sample_rate, dpa.GaussianDpEvent(self.accounted_noise_multiplier))


@dataclass(frozen=True)
class TreeAggregationEvent(_EventBase):
    """DP-FTRL: a tree-aggregation mechanism over one epoch of ``rounds_per_epoch`` rounds, restarted
    each epoch, for ``epochs`` epochs. Accounted under the REPLACE_SPECIAL neighbouring relation."""

    noise_multiplier: float
    rounds_per_epoch: int
    epochs: int = 1
    relation: str = "replace_special"
    sampling: str = "fixed"
    sensitivity: float = 1.0

    type_name: ClassVar[str] = "tree_aggregation"
    dp_event_form: ClassVar[str] = (
        "SelfComposedDpEvent(SingleEpochTreeAggregationDpEvent(noise_multiplier, rounds_per_epoch), epochs)"
    )
    _count_field: ClassVar[str] = "epochs"

    def _released_once(self, dpa):
        return dpa.SingleEpochTreeAggregationDpEvent(self.accounted_noise_multiplier, self.rounds_per_epoch)


@dataclass(frozen=True)
class GaussianEvent(_EventBase):
    """``count`` plain Gaussian releases over all clients (no sampling), e.g. a DP histogram; the
    sensitivity is folded into σ (noise std = σ·sensitivity)."""

    noise_multiplier: float
    count: int = 1
    relation: str = "add_remove"
    sampling: str = "none"
    sensitivity: float = 1.0

    type_name: ClassVar[str] = "gaussian"
    dp_event_form: ClassVar[str] = "SelfComposedDpEvent(GaussianDpEvent(noise_multiplier), count)"
    _count_field: ClassVar[str] = "count"

    def _released_once(self, dpa):
        return dpa.GaussianDpEvent(self.accounted_noise_multiplier)


Event = PoissonGaussianEvent | TreeAggregationEvent | GaussianEvent
EVENT_TYPES: dict[str, type[_EventBase]] = {
    cls.type_name: cls for cls in (PoissonGaussianEvent, TreeAggregationEvent, GaussianEvent)
}


def event_from_dict(data: dict[str, Any]) -> Event:
    """Read any ledger event from its ``to_dict`` form."""
    kind = data.get("type") if isinstance(data, dict) else None
    if kind not in EVENT_TYPES:
        raise PrivacyError(
            f"unknown ledger event {data!r}: 'type' must be one of {sorted(EVENT_TYPES)}."
        )
    return EVENT_TYPES[kind].from_dict(data)
