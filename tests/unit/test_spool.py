"""A new sweep's fixture texts are read once into a spool and read back from it (fixtures/spool.py):
exactly as read, in any view, from a forked child, without holding the texts in memory, and the seal
and the stored rows get the text that was parsed even when its file changes meanwhile."""

from __future__ import annotations

import os
import pickle
import sys
import tempfile
import tracemalloc
from pathlib import Path

import pytest

from afpbench.fixtures.loader import read_fixture_files
from afpbench.fixtures.spool import FixtureFile, ParsedForms, SpooledFiles, subset
from afpbench.reference.hashing import text_sha256
from afpbench.workers.sweeps.inputs import load_inputs
from afpbench.workers.sweeps.seal import seal_components
from afpbench.workers.sweeps.spec import SweepSpec

# Texts no canned fixture has: CRLF and lone CR line ends, non-ASCII letters, an emoji, a BOM-like
# character inside, a trailing space, and the empty text.
ODD_TEXTS = ["id: X1\r\ntitle: caf\u00e9 \u2014 na\u00efve\r\n", "a\rb\rc ", "\U0001f600 \ufeffmid", "", "x" * 70_000]


def test_every_text_comes_back_exactly_as_spooled_in_order_and_in_views():
    files = SpooledFiles.spool((f"f{i}.yaml", t) for i, t in enumerate(ODD_TEXTS))
    assert [f.text for f in files] == ODD_TEXTS
    assert [f.name for f in files] == [f"f{i}.yaml" for i in range(len(ODD_TEXTS))] == files.names()
    assert files[-1] == FixtureFile("f4.yaml", ODD_TEXTS[-1])
    assert [f.text for f in files[1:4:2]] == [ODD_TEXTS[1], ODD_TEXTS[3]]
    view = files.subset([4, 0, 2])
    assert [f.name for f in view] == ["f4.yaml", "f0.yaml", "f2.yaml"] and len(view) == 3
    assert [f.text for f in view[1:]] == [ODD_TEXTS[0], ODD_TEXTS[2]]
    with pytest.raises(IndexError):
        files[len(ODD_TEXTS)]


def test_subset_of_a_plain_list_is_a_list_of_those_files():
    plain = [FixtureFile("a", "1"), FixtureFile("b", "2"), FixtureFile("c", "3")]
    assert subset(plain, [2, 0]) == [plain[2], plain[0]]


def test_the_texts_are_not_held_in_memory():
    texts = [f"id: F{i:05d}\n" + "task: " + "w" * 7000 + "\n" for i in range(2000)]  # ~14 MB, as 2,000 fixtures
    tracemalloc.start()
    try:
        files = SpooledFiles.spool((f"F{i:05d}.yaml", t) for i, t in enumerate(texts))
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < 1_000_000, f"the spool holds {held} bytes of Python objects for 14 MB of texts"
    assert files[1234].text == texts[1234]


def test_without_a_temporary_file_the_texts_are_held_and_still_read_back(monkeypatch):
    def no_temp_files(*_a, **_k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "TemporaryFile", no_temp_files)
    files = SpooledFiles.spool((f"f{i}", t) for i, t in enumerate(ODD_TEXTS))
    assert [f.text for f in files] == ODD_TEXTS and [f.text for f in files.subset([3, 1])] == ODD_TEXTS[3:0:-2]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork (gate_run.py splits only where it exists)")
def test_a_forked_child_reads_the_same_texts():
    files = SpooledFiles.spool((f"f{i}", t) for i, t in enumerate(ODD_TEXTS))
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: what gate_run's helper does with its half
        os.close(read_end)
        with os.fdopen(write_end, "wb") as out:
            out.write(pickle.dumps([f.text for f in files[2:]]))
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as incoming:
        seen = pickle.loads(incoming.read())
    os.waitpid(pid, 0)
    assert seen == ODD_TEXTS[2:]


def test_a_fixture_file_edited_after_it_was_read_is_sealed_and_stored_as_it_was_read(tmp_path: Path):
    """Seal rule: the seal hashes exactly the text the sweep parsed, gated and stores, even when the
    file changes between the parse and the seal (the preflight lies between them)."""
    pilot = list(read_fixture_files(None))
    for f in pilot[:3]:
        (tmp_path / f.name).write_text(f.text, encoding="utf-8", newline="")
    spec = SweepSpec.model_validate({"name": "t", "models": [{"provider": "sim", "model": "sim-good"}], "judges": [],
                                     "fixtures": {"dir": str(tmp_path)}})
    inputs = load_inputs(spec, with_validity=True)
    edited = pilot[0].name
    (tmp_path / edited).write_text(pilot[0].text + "\n# edited after the read\n", encoding="utf-8")
    components = seal_components(inputs.seal_inputs())
    assert components["fixtures"] == {f.name: text_sha256(f.text) for f in pilot[:3]}
    assert [f.text for f in inputs.fixture_files] == [f.text for f in pilot[:3]]
    first_id = next(iter(inputs.fixtures))
    assert inputs.fixtures[first_id].id == first_id


def test_reading_a_spooled_set_leaves_no_file_behind(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR is read once and cached
    files = read_fixture_files(None)
    assert len(files) == 8 and list(tmp_path.iterdir()) == [], "the spool is unlinked from the start"
    if sys.platform.startswith("linux"):
        assert any("(deleted)" in os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
                   if os.path.islink(f"/proc/self/fd/{fd}"))


def test_parsed_forms_come_back_by_position_in_views_subsets_and_joins():
    forms = ParsedForms()
    for i in (0, 2, 3):
        forms.add(i, f'{{"id": "F{i}", "note": "caf\u00e9"}}'.encode())
    assert forms.get(2) == '{"id": "F2", "note": "caf\u00e9"}' and forms.get(1) is None and len(forms) == 3
    files = SpooledFiles.spool((f"f{i}.yaml", f"id: F{i}\n") for i in range(4)).with_forms(forms)
    assert [f.form for f in files] == [forms.get(0), None, forms.get(2), forms.get(3)]
    assert [f.form for f in files.subset([3, 1, 0])] == [forms.get(3), None, forms.get(0)]
    assert [f.form for f in files[2:]] == [forms.get(2), forms.get(3)]
    assert files[0] == FixtureFile("f0.yaml", "id: F0\n"), "a form is not part of a file's equality"
    other = ParsedForms()
    other.add(0, b'{"id": "G0"}')
    joined = forms.joined(other.moved([1]))
    assert [joined.get(i) for i in range(4)] == [forms.get(0), '{"id": "G0"}', forms.get(2), forms.get(3)]


def test_a_forked_child_adds_forms_that_come_back_by_position_and_the_parent_adds_after_them():
    shared = ParsedForms()
    shared.add(0, b"parent-before")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: adds two forms and sends the ParsedForms back pickled
        os.close(read_end)
        shared.add(5, b"child-five")
        shared.add(6, "child-six \u00e9".encode())
        with os.fdopen(write_end, "wb") as out:
            pickle.dump(shared, out)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as incoming:
        returned = pickle.load(incoming)
    os.waitpid(pid, 0)
    assert returned.get(5) is None, "positions alone, until taken back"
    taken = shared.take_back(returned)
    shared.add(7, b"parent-after")
    assert [taken.get(i) for i in (0, 5, 6, 7)] == ["parent-before", "child-five", "child-six \u00e9", "parent-after"]


def test_forms_a_child_held_in_its_own_memory_are_left_out(monkeypatch):
    def no_temp_files(*_a, **_k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "TemporaryFile", no_temp_files)
    shared = ParsedForms()  # made before a fork: the child's copy holds its bytes in the child's memory
    in_the_child = ParsedForms()
    in_the_child.add(1, b"in memory")
    returned = pickle.loads(pickle.dumps(in_the_child))
    assert len(shared.take_back(returned)) == 0 and shared.get(1) is None
