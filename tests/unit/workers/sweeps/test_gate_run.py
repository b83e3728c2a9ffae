"""A sweep's fixtures parsed and gated on two processes (workers/sweeps/gate_run.py, two_processes.py).

Rule (validity gate): every fixture's report is the one the gate gives it, whatever runs it. Rule (bad
input names the file): the first bad fixture file in file order raises its FixtureError. The split run
must equal the one-process run exactly (fixtures, reports and their order, errors), a helper process that
fails, writes garbage or stops short leaves the parent to do its half, and no fork happens while another
thread is alive.
"""

from __future__ import annotations

import gc
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import pytest
import yaml

from afpbench.fixtures.loader import FixtureError, load_fixtures, read_fixture_files, select_fixture_files
from afpbench.reference.loader import ReferenceFileError, load_instructions, load_judge_prompt
from afpbench.scoring.render import render
from afpbench.scoring.validity import check_fixture
from afpbench.scoring.vocabulary import afp_terms
from afpbench.workers.sweeps import gate_run, two_processes
from afpbench.workers.sweeps import inputs as inputs_module
from afpbench.workers.sweeps.coordinator import validity_reports
from afpbench.workers.sweeps.fixture_map import facts_of
from afpbench.workers.sweeps.inputs import load_inputs
from afpbench.workers.sweeps.spec_loading import parse_spec
from benchmarks.harness import make_fixtures
from tests.conftest import REPO

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or (os.cpu_count() or 1) < 2, reason="needs fork, 2 cores")


def _variants(n: int) -> list:
    """n fixtures: the eight pilots under new ids, some broken so that reports differ (failures kept)."""
    pilots = load_fixtures()
    out = []
    for i in range(n):
        base = pilots[i % len(pilots)]
        changes: dict = {"id": f"V{i:04d}"}
        if i % 3 == 0:  # a grader fact the model never sees: fails visible_to_model
            changes["grader_facts"] = [*base.grader_facts, f"hidden figure {1000 + i} EUR"]
        out.append(base.model_copy(update=changes))
    return out


def _gate():
    instructions, judge_prompt = load_instructions(), load_judge_prompt()
    terms = afp_terms([instructions.text("C"), instructions.text("D")])
    calls: list[int] = []

    def gate(fx) -> dict:
        calls.append(os.getpid())
        prompts = {c: render(c, fx, instructions.text(c)) for c in "ABCD"}
        report = check_fixture(fx, prompts, terms, judge_prompt)
        return {"passed": report.passed, "failures": [{"check": f.check, "detail": f.detail} for f in report.failures]}

    return gate, calls


def split_gate_gives_the_one_process_reports() -> None:
    fixtures = _variants(gate_run.SPLIT_FROM_FIXTURES + 41)
    gate, calls = _gate()
    one = {fx.id: gate(fx) for fx in fixtures}
    calls.clear()
    split = gate_run.gate_all(fixtures, gate)
    assert list(split) == [fx.id for fx in fixtures]
    assert split == one
    assert any(not r["passed"] for r in split.values()) and any(r["passed"] for r in split.values())
    # The parent gated only its half: the rest came from the child (whose calls this list never sees).
    assert len(calls) == len(fixtures) // 2, f"{len(calls)} of {len(fixtures)} gated here: no split"


def failing_helper_leaves_the_parent_to_gate_its_half() -> None:
    fixtures = _variants(gate_run.SPLIT_FROM_FIXTURES)
    gate, calls = _gate()
    parent = os.getpid()

    def gate_that_fails_in_the_child(fx):
        if os.getpid() != parent:
            raise RuntimeError("the helper process breaks")
        return gate(fx)

    reports = gate_run.gate_all(fixtures, gate_that_fails_in_the_child)
    assert list(reports) == [fx.id for fx in fixtures]
    assert len(calls) == len(fixtures)  # every fixture gated here after the child failed
    assert reports == {fx.id: gate(fx) for fx in fixtures}


def _generate(directory: Path, n: int) -> None:
    """n generated fixture files (benchmarks/harness.py), every third given a grader fact the model never
    sees (so that it fails the gate)."""
    for i, fid in enumerate(make_fixtures(directory, n)):
        if i % 3 == 0:
            path = directory / f"{fid}.yaml"
            data = yaml.load(path.read_text(), Loader=yaml.CSafeLoader)
            data["grader_facts"] = [*data["grader_facts"], f"hidden figure {1000 + i} EUR"]
            path.write_text(yaml.dump(data, Dumper=yaml.CSafeDumper, sort_keys=False, allow_unicode=True))


def _break(directory: Path, positions: list[int]) -> None:
    """The files at these positions (file order) get a field of the wrong type."""
    files = sorted(directory.glob("*.yaml"))
    for i in positions:
        text = files[i].read_text()
        assert "high_risk: false" in text
        files[i].write_text(text.replace("high_risk: false", "high_risk: {not: a flag}"))


def _one_process(directory: Path, only: list[str] | None = None) -> tuple[list, dict]:
    """The serial path as it was: every file parsed, then the kept fixtures gated one by one."""
    gate, _ = _gate()
    fixtures = [fx for _, fx in select_fixture_files(read_fixture_files(directory), str(directory), only)]
    return fixtures, {fx.id: gate(fx) for fx in fixtures}


def _spec(directory: Path, only: list[str] | None = None):
    return parse_spec({"models": [{"provider": "sim", "model": "sim-1"}], "judges": [], "conditions": ["A"],
                       "fixtures": {"dir": str(directory), **({"only": only} if only else {})}})


@contextmanager
def _counting_parses() -> Iterator[list[str]]:
    """The files parsed in this process (the child's parses, after the fork, are never seen here)."""
    parent, parses, real = os.getpid(), [], gate_run.parse_fixture

    def counted(file):
        if os.getpid() == parent:
            parses.append(file.name)
        return real(file)

    with mock.patch.object(gate_run, "parse_fixture", counted):
        yield parses


def _forms(inputs) -> list:
    return [f.form for f in inputs.fixture_files]


def _no_child_left() -> None:
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)


def split_prepare_gives_the_one_process_fixtures_and_reports(generated: str) -> None:
    directory = Path(generated)
    n = len(list(directory.glob("*.yaml")))
    fixtures, reports = _one_process(directory)
    with _counting_parses() as parses:
        inputs = load_inputs(_spec(directory), with_validity=True)
    assert len(parses) == n // 2, f"{len(parses)} of {n} parsed here: no split"
    assert gc.isenabled()  # switched off only while the child's fixtures are unpickled
    assert inputs.facts is not None and list(inputs.facts.values()) == [facts_of(fx) for fx in fixtures]
    assert list(inputs.fixtures.values()) == fixtures
    # Each file carries its parsed form, from whichever process parsed it (the child's came back by position).
    assert _forms(inputs) == [fx.model_dump_json() for fx in fixtures]
    assert list(inputs.validity) == list(reports) and inputs.validity == reports
    assert validity_reports(inputs) == reports
    assert any(not r["passed"] for r in reports.values()) and any(r["passed"] for r in reports.values())
    # `only` keeps some from each half: only those are gated, in file order.
    only = [fx.id for fx in fixtures[5::40]]
    kept, kept_reports = _one_process(directory, only)
    narrowed = load_inputs(_spec(directory, only), with_validity=True)
    assert list(narrowed.fixtures.values()) == kept and narrowed.validity == kept_reports
    assert _forms(narrowed) == [fx.model_dump_json() for fx in kept]
    assert list(narrowed.validity) == only
    # At most `keep` parsed fixtures come back, the first in file order of those `only` keeps, from
    # either half (the child's share starts at n // 2).
    files = read_fixture_files(directory)
    for keep in (0, 50, n // 2 + 20, n + 5):
        prepared = gate_run.prepare_fixtures(files, None, None, keep=keep)
        assert list(prepared.parsed) == list(range(min(keep, n))), keep
        assert list(prepared.parsed.values()) == fixtures[:keep], keep
        assert prepared.facts == [facts_of(fx) for fx in fixtures]
    narrow_keep = gate_run.prepare_fixtures(files, None, only, keep=3)
    assert [fx.id for fx in narrow_keep.parsed.values()] == only[:3]
    _no_child_left()


def bad_files_raise_the_one_process_error(generated: str) -> None:
    n = len(list(Path(generated).glob("*.yaml")))
    for bad in ([n - 3], [n // 2], [7, n - 3], [3, 4]):  # the child's half, its first file, both halves, ours
        with tempfile.TemporaryDirectory() as tmp:
            directory = Path(shutil.copytree(generated, Path(tmp) / "fixtures"))
            _break(directory, bad)
            with pytest.raises(FixtureError) as serial:
                _one_process(directory)
            with pytest.raises(FixtureError) as split:
                load_inputs(_spec(directory), with_validity=True)
            assert str(split.value) == str(serial.value), bad
            assert f"B{bad[0] + 1:05d}.yaml" in str(split.value)
            assert type(split.value.__cause__) is type(serial.value.__cause__)
            _no_child_left()


def a_failing_helper_leaves_the_parent_to_prepare_its_half(generated: str) -> None:
    parent = os.getpid()
    directory = Path(generated)
    n = len(list(directory.glob("*.yaml")))
    fixtures, reports = _one_process(directory)
    real_parse = gate_run.parse_fixture

    def dies_in_the_child(file):
        if os.getpid() != parent and file.name == "B00150.yaml":  # in the child's half
            os._exit(7)
        return real_parse(file)

    def short_child(files, gate, kept, keep, offset, forms):  # ten, no reports: the rest is parsed here
        fixtures = [real_parse(f) for f in files[:10]]
        for j, fx in enumerate(fixtures):
            forms.add(offset + j, fx.model_dump_json().encode())
        return gate_run.PreparedFixtures([facts_of(fx) for fx in fixtures], {}, None, forms)

    garbage = types.SimpleNamespace(dumps=lambda *a, **k: b"\x80\x05not a pickle", load=pickle.load,
                                    HIGHEST_PROTOCOL=pickle.HIGHEST_PROTOCOL)
    failures = {
        "dies": (mock.patch.object(gate_run, "parse_fixture", dies_in_the_child), n),
        "writes garbage": (mock.patch.object(two_processes, "pickle", garbage), n),
        "stops short": (mock.patch.object(gate_run, "_child_share", short_child), n - 10),
    }
    for failure, (patch, parsed_here) in failures.items():
        with patch, _counting_parses() as parses:
            inputs = load_inputs(_spec(directory), with_validity=True)
        assert len(parses) == parsed_here, (failure, len(parses))
        assert list(inputs.fixtures.values()) == fixtures, failure
        assert _forms(inputs) == [fx.model_dump_json() for fx in fixtures], failure
        assert inputs.facts is not None and list(inputs.facts.values()) == [facts_of(fx) for fx in fixtures], failure
        assert validity_reports(inputs) == reports, failure
        assert (inputs.validity is None) == (failure == "stops short"), failure
        _no_child_left()


def a_gate_that_raises_is_left_to_validity_reports(generated: str) -> None:
    parent = os.getpid()
    directory = Path(generated)
    _, reports = _one_process(directory)
    real_gate = inputs_module.fixture_gate

    def breaks_in_the_child(instructions, judge_prompt):
        gate = real_gate(instructions, judge_prompt)
        return lambda fx: gate(fx) if os.getpid() == parent else 1 / 0

    inputs_module.fixture_gate = breaks_in_the_child
    try:
        inputs = load_inputs(_spec(directory), with_validity=True)
    finally:
        inputs_module.fixture_gate = real_gate
    assert inputs.validity is None  # no partial reports: the gate runs again, at creation, as before
    assert validity_reports(inputs) == reports


def _in_a_fresh_process(check: str, *args: str) -> None:
    """Run one of the checks above in a new interpreter: a test process has other threads alive (earlier
    tests' lease keeper, HTTP deadlines...), and with any other thread the gate rightly never forks."""
    code = f"import tests.unit.workers.sweeps.test_gate_run as t; t.{check}(*{args!r})"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_split_gate_gives_exactly_the_one_process_reports_in_order():
    _in_a_fresh_process("split_gate_gives_the_one_process_reports")


def test_a_failing_helper_leaves_the_parent_to_gate_its_half():
    _in_a_fresh_process("failing_helper_leaves_the_parent_to_gate_its_half")


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> str:
    directory = tmp_path_factory.mktemp("generated") / "fixtures"
    _generate(directory, gate_run.SPLIT_FROM_FIXTURES + 31)
    return str(directory)


def test_the_split_parse_gives_exactly_the_one_process_fixtures_and_reports(generated):
    _in_a_fresh_process("split_prepare_gives_the_one_process_fixtures_and_reports", generated)


def test_a_bad_file_in_either_half_raises_the_one_process_error(generated):
    _in_a_fresh_process("bad_files_raise_the_one_process_error", generated)


def test_a_helper_that_dies_writes_garbage_or_stops_short_leaves_the_parent_its_half(generated):
    _in_a_fresh_process("a_failing_helper_leaves_the_parent_to_prepare_its_half", generated)


def test_a_gate_that_raises_leaves_the_reports_to_validity_reports(generated):
    _in_a_fresh_process("a_gate_that_raises_is_left_to_validity_reports", generated)


@pytest.mark.parametrize("with_validity", [False, True])
def test_a_spec_wrong_in_fixtures_and_instructions_names_its_fixtures_first(tmp_path, with_validity):
    """Rule (bad input names the file): the instructions are read before the fixtures now (the gate needs
    them), but their error is raised after the fixtures' as it always was."""
    _generate(tmp_path / "fixtures", 3)
    _break(tmp_path / "fixtures", [1])
    spec = parse_spec({"models": [{"provider": "sim", "model": "sim-1"}], "judges": [], "conditions": ["A"],
                       "fixtures": {"dir": str(tmp_path / "fixtures")},
                       "instructions": {"dir": str(tmp_path / "no-such-instructions")}})
    with pytest.raises(FixtureError, match="B00002.yaml: high_risk"):
        load_inputs(spec, with_validity=with_validity)
    _break(tmp_path / "fixtures", [])
    (tmp_path / "fixtures" / "B00002.yaml").unlink()
    with pytest.raises(ReferenceFileError, match="no-such-instructions"):
        load_inputs(spec, with_validity=with_validity)


def test_no_fork_while_another_thread_is_alive():
    fixtures = _variants(gate_run.SPLIT_FROM_FIXTURES)
    gate, calls = _gate()
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, daemon=True)
    other.start()
    try:
        gate_run.gate_all(fixtures, gate)
    finally:
        stop.set()
        other.join()
    assert calls == [os.getpid()] * len(fixtures), "a process was forked beside a live thread"
