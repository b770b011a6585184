"""lfb bench scale: the synthetic federation at (here: small) scale, its report and checksum; never timed."""

from __future__ import annotations

import json

import numpy as np
import pytest

from largefedbench.bench.scale import format_report, run_scale, span_counts, unit_row_blocks, unit_rows
from largefedbench.cli import main
from largefedbench.errors import InputError


def test_span_counts_average_about_six_point_six_with_at_least_one_each():
    counts = span_counts(200_000, np.random.default_rng(0))
    assert counts.min() >= 1 and abs(counts.mean() - 6.6) < 0.05 and counts.max() > 40  # a long tail


def test_unit_rows_are_unit_float32():
    rows = unit_rows(1000, 16, np.random.default_rng(1), block=300)
    assert rows.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, rtol=1e-5)


def test_unit_row_blocks_are_the_rows_of_unit_rows_block_by_block():
    blocks = list(unit_row_blocks(1000, 16, np.random.default_rng(2), block=300))
    assert [len(b) for b in blocks] == [300, 300, 300, 100]
    np.testing.assert_array_equal(np.concatenate(blocks), unit_rows(1000, 16, np.random.default_rng(2), block=300))


def test_the_report_is_consistent_and_the_checksum_follows_the_seed():
    a, b, c = (run_scale(600, 300, dim=32, seed=s, progress=False) for s in (4, 4, 5))
    assert a.checksum == b.checksum != c.checksum
    assert a.spans > 600 and a.limit_seconds == pytest.approx(600 * 300 * 32 / (a.gemm_gmacs * 1e9))
    assert a.ratio == pytest.approx(a.client_side_seconds / a.limit_seconds)
    assert a.peak_rss_bytes > 0 and set(a.stages) >= {"generate span embeddings", "release: wall"}
    assert "× the limit" in format_report(a)


def test_the_shortcut_and_the_general_path_release_the_same_sum_at_bench_shapes():
    from largefedbench.bench.scale import SyntheticClients
    from largefedbench.federation import Federation, SpanEmbeddings
    from largefedbench.privacy.mechanisms import NoNoise
    from largefedbench.synthetic.scoring import PopriScores

    rng = np.random.default_rng(0)
    counts = span_counts(500, rng)
    emb = SpanEmbeddings(unit_rows(int(counts.sum()), 24, rng), np.concatenate([[0], np.cumsum(counts)]))
    score = PopriScores(unit_rows(200, 24, rng))
    outs = []
    for fn in (score, lambda chunk: score(chunk)):  # the lambda has no shortcut
        fed = Federation(SyntheticClients(500), embeddings=emb)
        outs.append(fed.private_sum(fed.everyone(), fn, clip=1.0, mechanism=NoNoise(), batched=True, chunk_clients=128))
    np.testing.assert_allclose(outs[0], outs[1], atol=1e-5 * np.abs(outs[1]).max())


def test_lfb_bench_scale_json_and_bad_input(capsys):
    assert main(["bench", "scale", "--clients", "400", "--samples", "100", "--dim", "16", "--json", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["clients"] == 400 and len(report["checksum"]) == 16 and report["executor"] == "local"
    assert main(["bench", "scale", "--clients", "0", "--quiet"]) == 2
    assert "need ≥ 1 client" in capsys.readouterr().err
    with pytest.raises(InputError, match="--path"):
        run_scale(10, 10, path="fast", progress=False)
