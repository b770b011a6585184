"""Downstream evaluation (DESIGN.md §4, §8): next-token accuracy, downstream training, FID, gap closed, the
synthetic texts' vocabulary distance and diversity."""

from __future__ import annotations

from largefedbench.evaluation.accuracy import accuracy_counts, next_token_accuracy
from largefedbench.evaluation.downstream import DownstreamResult, EpochRecord, evaluate_downstream, train_downstream
from largefedbench.evaluation.fid import fid, mean_sq_distance
from largefedbench.evaluation.gap import gap_closed
from largefedbench.evaluation.text_stats import mean_pairwise_cosine, token_counts, unigram_jsd

__all__ = [
    "DownstreamResult", "EpochRecord", "accuracy_counts", "evaluate_downstream", "fid", "gap_closed",
    "mean_pairwise_cosine", "mean_sq_distance", "next_token_accuracy", "token_counts", "train_downstream", "unigram_jsd",
]
