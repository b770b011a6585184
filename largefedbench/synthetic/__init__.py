"""The synthetic-data pipeline shared by PE, PE+SFT, POPri and the methods built on generated text.

- ``prompts`` — ``build_prompts`` with the reference's "Original Text Sample" template (``PROMPT_TEMPLATE``);
- ``generation`` — ``generate`` / ``generate_flat`` / ``generate_ids``: batched KV-cache sampling, left padding,
  left-truncated prompts, seeded, continuations cleaned (``decode_continuations``);
- ``lora`` — ``add_lora``, ``lora_state``, ``load_lora_state`` (peft);
- ``dpo`` — ``dpo_update`` (trl ``DPOTrainer``: DPO, IPO, cDPO, rDPO), ``sft`` — ``sft_update`` (trl ``SFTTrainer``);
- ``scoring`` — client functions for ``Federation.private_sum``: POPri's score (``PopriScores``) and PE's
  nearest-neighbour vote (``nn_votes``), with per-client reference loops;
- ``preferences`` — chosen/rejected pairs from the noisy ranking; ``variation`` — PE's variation operators;
- ``rounds`` — noise calibration for T rounds, cohorts, FID, the best-FID checkpoint.
"""
