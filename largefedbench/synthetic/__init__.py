"""The synthetic-data pipeline shared by PE, PE+SFT, POPri and the methods built on generated text.

- ``prompts`` — ``build_prompts`` with the reference's "Original Text Sample" template (``PROMPT_TEMPLATE``) and the
  prompt settings (``SamplingSettings``);
- ``generation`` — ``generate`` / ``generate_flat`` / ``generate_ids``: batched KV-cache sampling, left padding,
  left-truncated prompts, seeded, continuations cleaned (``decode_continuations``);
- ``generation_settings`` — ``GenerationSettings``, the sampling fields a generating method's config inherits, and
  the keywords they give the samplers (``generation_kwargs``);
- ``generator_rounds`` — the rounds template of POPri and PE+SFT (sample, score privately, select, update, keep the
  lowest-FID state, final samples); ``early_stopping`` — its stop on the validation clients;
- ``lora`` — ``add_lora``, ``lora_state``, ``load_lora_state`` (peft);
- ``dpo`` — ``dpo_update`` (trl ``DPOTrainer``: DPO, IPO, cDPO, rDPO), ``sft`` — ``sft_update`` (trl ``SFTTrainer``);
- ``scoring`` — client functions for ``Federation.private_sum``: POPri's score (``PopriScores``) and PE's
  nearest-neighbour vote (``NnVotes``), with per-client reference loops;
- ``preferences`` — chosen/rejected pairs from the noisy ranking; ``variation`` — PE's variation operators;
- ``histograms`` — buckets, votes and resampling of the histogram methods; ``noise`` — σ for T rounds;
  ``texts`` — picking texts by index and cutting a count into generation chunks.
"""
