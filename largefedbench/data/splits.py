"""Client-level train/validation/test splits by a stable hash of the client id (never by span)."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass

from largefedbench.errors import InputError

PRIVATE_SPLITS = ("train", "validation", "test")
PUBLIC_SPLIT = "public"
SPLIT_SALT = "lfb-split-v1"


@dataclass(frozen=True)
class SplitRatios:
    """Fractions of private clients per split. Defaults 0.8/0.1/0.1; changing them changes the snapshot hash."""

    train: float = 0.8
    validation: float = 0.1
    test: float = 0.1

    def __post_init__(self) -> None:
        values = (self.train, self.validation, self.test)
        if any(v < 0 for v in values) or abs(sum(values) - 1.0) > 1e-9:
            raise InputError(
                f"split ratios train={self.train}, validation={self.validation}, test={self.test} must be "
                "non-negative and sum to 1, e.g. --splits 0.8,0.1,0.1"
            )

    @classmethod
    def parse(cls, text: str) -> SplitRatios:
        try:
            train, validation, test = (float(x) for x in text.split(","))
        except ValueError:
            raise InputError(f"--splits {text!r} must be three numbers train,validation,test such as 0.8,0.1,0.1") from None
        return cls(train, validation, test)

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def hash_unit(client_id: str, salt: str = SPLIT_SALT) -> float:
    """A uniform number in [0, 1) determined by the client id alone."""
    digest = hashlib.sha256(f"{salt}:{client_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def assign_split(client_id: str, ratios: SplitRatios, salt: str = SPLIT_SALT) -> str:
    """The split of a private client: the same id always lands in the same split."""
    u = hash_unit(client_id, salt)
    if u < ratios.train:
        return "train"
    if u < ratios.train + ratios.validation:
        return "validation"
    return "test"
