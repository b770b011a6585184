"""Federated training, one home for every method that trains a model (DESIGN.md §2):

- ``flat`` — :class:`FlatParams`: a model's trainable parameters (all of them, or a LoRA adapter) as one vector;
- ``local_sgd`` — :func:`local_updates`: a client's local SGD/AdamW from the global weights, Δ = local − global;
  language-model examples and their loss;
- ``model_update`` — the full-model client update of DP-FedAvg and DP-FTRL, and its unreleased norm diagnostic;
- ``server`` — server steps on released sums: :class:`ServerOptimizer` (SGD, momentum, Adam), DP-FTRLM's step;
- ``driver`` — the one federated-training driver: a :class:`Server` (a round's :class:`Release`, the step on the
  released sum) run by :func:`train_rounds` in the rounds loop;
- ``fedavg`` — :class:`FedAvgSettings` and DP-FedAvg rounds of an adapter (:func:`train_adapter`);
- ``frozen_prefix`` — :class:`FrozenPrefix`: the hidden states of fixed token rows under an adapter in the top
  layers, run once per row instead of in every forward (FedBis' selectors);
- ``generator`` — DP fine-tuning of a generator's LoRA adapter (its sequence format, client update, pretraining on
  public text), shared by CTCL, DP instruction resampling, weak-client voting and FedBiscuit (imported as
  ``largefedbench.fedtrain.generator``).
"""

from largefedbench.fedtrain.driver import Release, Server, release_round, train_rounds
from largefedbench.fedtrain.fedavg import (
           CHUNK_CLIENTS,
           AdapterServer,
           ClientUpdate,
           FedAvgSettings,
           run_round,
           train_adapter,
)
from largefedbench.fedtrain.flat import FlatParams
from largefedbench.fedtrain.local_sgd import (
           BATCH_ROWS,
           LMExample,
           LocalSGD,
           lm_examples,
           lm_loss,
           lm_row_losses,
           local_steps,
           local_updates,
           per_client,
)
from largefedbench.fedtrain.model_update import (
           CohortUpdate,
           ModelUpdate,
           UpdateNormTally,
           record_update_norms,
)
from largefedbench.fedtrain.server import ServerOptimizer, ServerState, ftrl_weights

__all__ = ["BATCH_ROWS", "CHUNK_CLIENTS", "AdapterServer", "ClientUpdate", "CohortUpdate", "FedAvgSettings",
           "FlatParams", "LMExample", "LocalSGD", "ModelUpdate", "Release", "Server", "ServerOptimizer", "ServerState",
           "UpdateNormTally", "ftrl_weights", "lm_examples", "lm_loss", "lm_row_losses", "local_steps", "local_updates",
           "per_client", "record_update_norms", "release_round", "run_round", "train_adapter", "train_rounds"]
