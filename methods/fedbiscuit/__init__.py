"""FedBis and FedBiscuit — Wu et al., "Towards Federated RLHF with Aggregated Client Preference for LLMs" (ICLR 2025,
§4, §5 Algorithm 1, App. A–B), with user-level DP added and the preference data derived from each client's own text.

**Preference data.** Neither bioRxiv nor Congress has human preference pairs, so each client's pairs come from its own
text: the server generates a public pool of candidate pairs (A, B) with the public generator from few-shot public
prompts (temperature 0.7, App. B.1); a client is given a fixed subset of the pool (its own seeded draw, split into a
training part and a small validation part, §5.1) and prefers the candidate closer to its spans in embedding space
(summed cosine similarity, POPri's signal). Training examples carry both orders (§4: (x, y_w, y_l, 0) and
(x, y_l, y_w, 1)).

**Binary selector.** A LoRA adapter (r 8, α 16, dropout 0.05) on the profile's generator reads
``"Text A: …\\nText B: …\\nWhich text is more like your own documents? Answer:"`` and is trained with cross-entropy
over the logits of the two choice tokens " A" and " B" at the last position (the reference's ``choices: ['A','B']``).
``selector="embedding"`` (ours, an ablation; :data:`EMBEDDING_SELECTOR_DEVIATION`) replaces it with a linear selector on
the pair's embedding difference, the space in which the clients' preferences are defined.

**FedBis** (§4, App. A.1): R rounds of DP-FedAvg on the selector — Poisson cohorts at the participation rate, K local
AdamW steps, the clipped Δ summed through ``fed.private_sum``, the mean applied (Eq. 8).

**FedBiscuit** (§5, Alg. 1): U selectors. Warm-up: selector u is trained alone for T rounds, u = 0..U−1. Then every τ
rounds the clients are regrouped, and in each round every cohort client trains its own group's selector; its Δ sits
in its group's slot of a U-slot vector, so one ``private_sum`` releases all U sums; selector u moves by its slot's sum
/ M (Eq. 6 with the paper's uniform weights p_m = 1/M, as the reference aggregator's ``1 / num_clients``;
``selector_weights="group"`` divides by the group size N_u instead).

*Grouping made private.* The paper collects every client's U validation losses in the clear and runs a balanced
greedy assignment (the reference's ``check_and_grouping``). Here the losses never leave the client: each client
releases its ranking of the selectors as a unit vector (its negative losses, centred and normalised), all clients'
vectors side by side in one ``private_sum`` (``fed.everyone()``, q = 1, σ_g, sensitivity 1: a client only writes its
own slot), and the server runs the reference's balanced greedy assignment on the noisy rankings, in a public seeded
client order (the reference's shuffle). The groups are therefore exactly balanced (Eq. 5: sizes ⌈M/U⌉ or ⌊M/U⌋,
known from M alone), and each client's group is a function of the noisy release only; with no noise it is the
reference's grouping. σ_g is set so that the grouping releases alone would be (``grouping_budget_share``·ε, δ)-DP
(analytic Gaussian); the DP-FedAvg σ is calibrated so that the whole ledger — warm-up rounds, grouping releases,
clustered rounds, in order — meets (ε, δ). At small ε the per-client rankings are mostly noise, so the grouping
tends to the reference's on random losses (balanced, not preference-driven); the release costs M·U floats per
client (its row in an M·U vector).

**RLHF** (App. A.2, §5 "majority voting"): the server generates ``n_completions`` completions per public prompt with
the generator (temperature 0.7), forms all C(n, 2) pairs, labels each by the majority vote of the U selectors (U = 1
for FedBis), and trains the generator's LoRA adapter with DPO (β 0.1). The synthetic set is then sampled from the
DPO'd generator (one sample per fresh public prompt; empty completions are redrawn). The paper's own tasks (TL;DR
summarisation and SHP/SafeRLHF question answering, judged by win rate against GPT-4/Auto-J) are out of scope: the
benchmark scores the synthetic text by the downstream model's next-token accuracy.

Deviations: :data:`DEVIATIONS` (also in the artifact's ``info["deviations"]``).

The modules, lowest first:

- ``config`` — :class:`FedBisConfig`, :class:`FedBiscuitConfig` and their presets;
- ``pairs`` — the public :class:`PairPool` and each client's preferences on its own share of it;
- ``selector`` — the LoRA selector (:class:`SelectorTask`) and the selectors' :func:`majority_vote`;
- ``embedding_selector`` — the ``selector="embedding"`` ablation (:class:`EmbeddingSelectorTask`);
- ``agreement`` — the unreleased ``record_agreement`` diagnostic (:class:`AgreementTally`);
- ``client`` — :class:`SelectorUpdate`, the client function of a selector round;
- ``grouping`` — FedBiscuit's private balanced grouping and the step of the grouped selectors;
- ``server`` — :class:`SelectorServer`, the selector rounds (FedBis's, or FedBiscuit's schedule) in the driver;
- ``method`` — :class:`FedBis` and :class:`FedBiscuit`: the selector rounds, the RLHF phase and the final set.
"""

from largefedbench.methods.fedbiscuit.agreement import AGREEMENT_NEEDS_LOCAL, AgreementTally
from largefedbench.methods.fedbiscuit.client import SelectorUpdate
from largefedbench.methods.fedbiscuit.config import (
    SELECTOR_DTYPES,
    SELECTOR_WEIGHTS,
    SELECTORS,
    FedBisConfig,
    FedBiscuitConfig,
)
from largefedbench.methods.fedbiscuit.embedding_selector import EMBEDDING_SELECTOR_DEVIATION, EmbeddingSelectorTask
from largefedbench.methods.fedbiscuit.grouping import (
    balanced_grouping,
    clustered_step,
    grouping_rows,
    preference_scores,
    private_grouping,
)
from largefedbench.methods.fedbiscuit.method import DEVIATIONS, DpoStage, FedBis, FedBiscuit, deviations
from largefedbench.methods.fedbiscuit.pairs import PairPool, client_pair_indices, client_preferences, own_pairs
from largefedbench.methods.fedbiscuit.selector import CHOICES, PairTask, SelectorTask, majority_vote
from largefedbench.methods.fedbiscuit.server import SelectorServer, SelectorState, selector_task

__all__ = ["AGREEMENT_NEEDS_LOCAL", "CHOICES", "DEVIATIONS", "EMBEDDING_SELECTOR_DEVIATION", "SELECTORS",
           "SELECTOR_DTYPES", "SELECTOR_WEIGHTS", "AgreementTally", "DpoStage", "EmbeddingSelectorTask", "FedBis",
           "FedBisConfig", "FedBiscuit", "FedBiscuitConfig", "PairPool", "PairTask", "SelectorServer", "SelectorState",
           "SelectorTask", "SelectorUpdate", "balanced_grouping", "client_pair_indices", "client_preferences",
           "clustered_step", "deviations", "grouping_rows", "majority_vote", "own_pairs", "preference_scores",
           "private_grouping", "selector_task"]
