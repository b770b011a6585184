"""Sentence embeddings with the packaged all-MiniLM-L6-v2 and the per-(snapshot, embedder) disk cache."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from largefedbench.data import load_snapshot
from largefedbench.models import PackagedEmbedder, embed, embedding_cache_path, load_embedder, span_embeddings


class FakeSnapshot:
    """Just what the embedding cache reads from a FederatedDataset."""

    def __init__(self, splits: dict[str, list[str]]) -> None:
        self.manifest = {"content_sha256": "ab" * 32}
        self.splits = splits

    def __getitem__(self, split: str) -> SimpleNamespace:
        return SimpleNamespace(all_spans=lambda: self.splits[split])


@pytest.fixture(scope="module")
def minilm():
    return load_embedder(PackagedEmbedder(), device="cpu")


def test_packaged_minilm_is_the_real_model(minilm):
    model, info = minilm
    vecs = embed(["A man is eating food.", "A man is eating a piece of bread.", "The stock market fell sharply."], model)
    assert vecs.dtype == np.float32 and vecs.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert vecs[0] @ vecs[1] == pytest.approx(0.7553, abs=0.005)  # the published all-MiniLM-L6-v2 value
    assert vecs[0] @ vecs[2] < 0.3
    assert info["dim"] == 384 and len(info["sha256"]) == 64 and info["cache_key"].endswith(info["sha256"][:12])
    assert embed([], model).shape == (0, 384)


def test_split_embeddings_are_cached_on_disk(minilm, tmp_path_factory, shared_root, monkeypatch):
    model, info = minilm
    fd = load_snapshot("demo", home=shared_root)
    cache_root = tmp_path_factory.mktemp("emb")
    first = span_embeddings(fd, "test", model, info["cache_key"], root=cache_root, batch_size=64, progress=False)
    path = embedding_cache_path(fd, "test", info["cache_key"], cache_root)
    assert path.is_file() and path.parent.name == fd.manifest["content_sha256"][:16]
    assert first.shape == (len(fd.test.all_spans()), 384) and first.dtype == np.float32
    np.testing.assert_allclose(first[:3], embed(fd.test.all_spans()[:3], model), atol=1e-5)

    monkeypatch.setattr(model, "encode", lambda *a, **k: pytest.fail("cached embeddings were recomputed"))
    second = span_embeddings(fd, "test", model, info["cache_key"], root=cache_root, progress=False)
    np.testing.assert_array_equal(first, second)
    # another embedder id is another cache entry
    assert embedding_cache_path(fd, "test", "other/model@v2", cache_root) != path


def test_a_stale_cache_is_recomputed(minilm, tmp_path):
    model, info = minilm
    spans = ["one short span", "another span of text", "a third"]
    fd = FakeSnapshot({"train": spans})
    path = embedding_cache_path(fd, "train", info["cache_key"], tmp_path)
    path.parent.mkdir(parents=True)
    np.save(path, np.zeros((2, 384), dtype=np.float32))  # rows for a different span list
    out = span_embeddings(fd, "train", model, info["cache_key"], root=tmp_path, progress=False)
    assert out.shape == (3, 384) and np.load(path).shape == (3, 384)
    path.write_bytes(b"not a numpy file")
    assert span_embeddings(fd, "train", model, info["cache_key"], root=tmp_path, progress=False).shape == (3, 384)
