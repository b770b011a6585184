"""Federated training, one home for every method that trains a model (DESIGN.md §2):

- ``flat`` — :class:`FlatParams`: a model's trainable parameters (all of them, or a LoRA adapter) as one vector;
- ``local_sgd`` — :func:`local_updates`: a client's local SGD/AdamW from the global weights, Δ = local − global;
  language-model examples and their loss;
- ``model_update`` — the full-model client update of DP-FedAvg and DP-FTRL, and its unreleased norm diagnostic;
- ``server`` — server steps on released sums: :class:`ServerOptimizer` (SGD, momentum, Adam), DP-FTRLM's step;
- ``fedavg`` — :class:`FedAvgSettings` and DP-FedAvg rounds of an adapter (:func:`train_adapter`).
"""

from largefedbench.fedtrain.fedavg import (
           CHUNK_CLIENTS,
           ClientUpdate,
           FedAvgSettings,
           run_round,
           train_adapter,
)
from largefedbench.fedtrain.flat import FlatParams
from largefedbench.fedtrain.local_sgd import (
           LMExample,
           LocalSGD,
           lm_examples,
           lm_loss,
           local_steps,
           local_updates,
           per_client,
)
from largefedbench.fedtrain.model_update import (
           CohortUpdate,
           ModelUpdate,
           UpdateNormTally,
           private_cohort_update,
)
from largefedbench.fedtrain.server import ServerOptimizer, ServerState, ftrl_weights

__all__ = ["CHUNK_CLIENTS", "ClientUpdate", "CohortUpdate", "FedAvgSettings", "FlatParams", "LMExample", "LocalSGD",
           "ModelUpdate", "ServerOptimizer", "ServerState", "UpdateNormTally", "ftrl_weights", "lm_examples", "lm_loss", "local_steps",
           "local_updates", "per_client", "private_cohort_update", "run_round", "train_adapter"]
