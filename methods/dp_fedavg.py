"""DP-FedAvg: federated fine-tuning of the downstream model with user-level DP (McMahan et al., ICLR 2018,
"Learning differentially private recurrent language models", Alg. 1; POPri App. C.1).

Each round a Poisson cohort (rate q = clients_per_round / N) runs local SGD from the global weights
(:mod:`largefedbench.methods._local_training`); the server sees only the noisy sum of their updates, each
clipped to L2 ≤ ``clip``, plus N(0, (σ·clip)²) (``fed.private_sum`` with ``Gaussian(σ)``: secure aggregation +
Gaussian noise), and steps with the fixed-denominator estimator of McMahan et al. (2018, Alg. 1, ``f̃_f`` with unit client weights):

    θ ← θ + server_lr · noisy_sum / (q·N),

an unbiased estimate of the mean update whose sensitivity does not depend on the (random, private) cohort
size. σ is calibrated for ``PoissonGaussianEvent(σ, q, rounds)``, exactly POPri Table 3 σ₁ (opacus RDP);
the model kept is the round with the best validation top-1 (round 0 = the public model).
"""

from __future__ import annotations

from dataclasses import dataclass

from largefedbench.methods._local_training import (
    CohortTrainer,
    CohortUpdate,
    LocalSGD,
    RoundRun,
    UpdateNormTally,
    flat_weights,
    load_flat_weights,
    private_cohort_update,
)

from largefedbench.contract import Artifact, Method, PublicResources, config_to_dict
from largefedbench.errors import InputError
from largefedbench.federation import Federation
from largefedbench.privacy import PoissonGaussianEvent, PrivacyBudget
from largefedbench.privacy.mechanisms import Gaussian
from largefedbench.synthetic.rounds import cohort_fields, unreleased_path

__all__ = ["DPFedAvg", "DPFedAvgConfig"]


@dataclass(frozen=True)
class DPFedAvgConfig:
    """DP-FedAvg settings; the defaults are POPri App. C.1 (full fine-tuning, client batch size 2, sequence
    length 64, 20 rounds, client lr tuned in [0.01, 0.06] and clip in [0.01, 0.4] — the middle of both ranges
    here — SGD on the clients, server lr 1, i.e. plain averaging) with 1000 clients per round (Table 3).

    ``max_local_steps`` caps each client's local steps (None: every batch of ``local_epochs`` epochs);
    ``vectorize`` trains the cohort with vmap instead of a per-client loop (the faster one on the 2-core CPU
    of tests/methods/test_bench_cohort_update.py); ``record_update_norms`` writes the mean raw update norm and
    the fraction clipped per round to the run folder's ``unreleased-diagnostics.json`` — computed from un-noised
    updates, so NOT covered by the ε of the run and never written into the history or the entry.
    """

    rounds: int = 20
    clients_per_round: int = 1000
    local_epochs: int = 1
    client_batch_size: int = 2
    max_len: int = 64
    client_lr: float = 0.03
    max_local_steps: int | None = None
    clip: float = 0.1
    server_lr: float = 1.0
    eval_every: int = 1
    vectorize: bool = True
    chunk_clients: int = 16
    record_update_norms: bool = False

    def __post_init__(self) -> None:
        if self.rounds < 1 or self.clients_per_round < 1:
            raise InputError("rounds and clients_per_round must be at least 1")
        if not (self.clip > 0 and self.server_lr > 0):
            raise InputError(f"clip={self.clip} and server_lr={self.server_lr} must be > 0")

    @classmethod
    def tiny(cls) -> DPFedAvgConfig:
        """A few seconds on the demo snapshot: 3 rounds of ~100 clients, at most 2 local steps each."""
        return cls(rounds=3, clients_per_round=100, max_local_steps=2, client_lr=0.05, clip=0.5)

    @classmethod
    def cpu(cls) -> DPFedAvgConfig:
        """The ``cpu`` profile's 1.2M-parameter downstream model: 10 rounds of ~300 clients, at most 4 local steps."""
        return cls(rounds=10, clients_per_round=300, max_local_steps=4, client_lr=0.05, clip=0.5)

    def local(self) -> LocalSGD:
        return LocalSGD(lr=self.client_lr, batch_size=self.client_batch_size, epochs=self.local_epochs,
                        max_len=self.max_len, max_steps=self.max_local_steps, vectorize=self.vectorize,
                        chunk_clients=self.chunk_clients)


class DPFedAvg(Method):
    name = "dp-fedavg"
    paper = ("McMahan, Ramage, Talwar & Zhang, ICLR 2018, 'Learning differentially private recurrent language "
             "models' (DP-FedAvg); settings of POPri (Hou et al., ICML 2025) App. C.1 and Table 3")
    output = "model"
    Config = DPFedAvgConfig

    def train(self, fed: Federation, public: PublicResources, cfg: DPFedAvgConfig, budget: PrivacyBudget) -> Artifact:
        n = fed.n_clients
        q = min(1.0, cfg.clients_per_round / n)
        sigma = budget.calibrate(PoissonGaussianEvent(1.0, sample_rate=q, steps=cfg.rounds), n_clients=n)
        if cfg.record_update_norms:
            unreleased_path(public)  # fails now, not after the first round, if the run has no folder
        model = public.models.new_downstream()
        trainer = CohortTrainer(model, public.models.tokenizer, cfg.local())
        weights = flat_weights(model)
        run = RoundRun(fed, public, desc=f"{self.name} rounds", rounds=cfg.rounds, eval_every=cfg.eval_every,
                       fingerprint={"method": self.name, "config": config_to_dict(cfg), "sigma": sigma,
                                    "n_clients": n, "seed": public.seed})
        server = run.resume()
        if server is None:
            run.start(model, weights)
        else:
            weights = server["weights"].to(weights.device)
            load_flat_weights(model, weights)

        for r in run.rounds_left():
            cohort = fed.sample(q)
            tally = UpdateNormTally(cfg.clip) if cfg.record_update_norms else None
            row = cohort_fields(cohort, n)  # the expected cohort size: the exact Poisson count is not released
            # clip-and-sum chunk by chunk: memory holds chunk_clients updates, not the cohort's
            noisy = private_cohort_update(fed, cohort, CohortUpdate(trainer, weights, tally), clip=cfg.clip,
                                          mechanism=Gaussian(sigma), chunk_clients=cfg.chunk_clients, public=public,
                                          round_=r)
            weights = weights + cfg.server_lr * noisy.to(weights) / (q * n)
            load_flat_weights(model, weights)
            run.complete(r, row, model, weights, {"weights": weights.cpu()})

        load_flat_weights(model, run.best_weights)
        artifact = Artifact.trained_model(
            model, sigma=sigma, sample_rate=q, rounds=cfg.rounds, best_round=run.best_round, clip=cfg.clip,
            best_validation_top1=run.best_top1, expected_cohort=q * n,
            aggregation="theta += server_lr * noisy_sum / (q * N) (McMahan et al. 2018 fixed denominator)",
        )
        artifact.history = run.history
        return artifact
