"""A new sweep's fixtures parsed and put through the validity gate, on two cores when that is safe.

Parsing a fixture file (~1.2 ms) and gating it (~1.5 ms, scoring/validity.py) are pure and per fixture,
all before the sweep row exists, while the second core of a small machine idles. With many fixtures,
and only when this process has no other thread (a command-line `run` before its worker starts; never
the HTTP server), a forked child parses and gates the second half of the files while this process does
the first (two_processes.py); the child sends back what creation needs of each fixture (FixtureFacts),
its reports and, for the first few, the parsed fixture (unpickling one costs ~0.13 ms, a tenth of
parsing it). Only a bounded number of parsed fixtures is kept (fixture_map.CAPACITY): a sweep's workers
parse a fixture when its cell needs it, so holding all of a 10,000-fixture sweep (~200 MB) bought
nothing. Whatever the child leaves undone (it dies, writes something unreadable, stops at a bad file,
is short), this process does itself, so the outcome is exactly the one-core outcome: the same facts and
parsed fixtures, the same reports in file order, and the same FixtureError for the first bad file.
More processes would not help: the machines this is for have two cores.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from afpbench.fixtures.loader import FixtureError, FixtureFile, parse_fixture
from afpbench.fixtures.schema import Fixture
from afpbench.fixtures.spool import ParsedForms, subset
from afpbench.reference.hashing import json_sha256
from afpbench.reference.loader import InstructionSet
from afpbench.reference.protocol_facts import CONDITIONS
from afpbench.scoring.render import RenderedPrompt, render
from afpbench.scoring.validity import check_fixture
from afpbench.scoring.vocabulary import afp_terms
from afpbench.workers.sweeps.fixture_map import CAPACITY, FixtureFacts, facts_of
from afpbench.workers.sweeps.prepared_cache import PreparedCache, Recalled, Report
from afpbench.workers.sweeps.two_processes import may_fork, run_beside_a_child

log = logging.getLogger(__name__)

# Below this many fixtures a fork (a few milliseconds, and a copy of touched pages) is not worth it.
SPLIT_FROM_FIXTURES = 200

Gate = Callable[[Fixture], Report]


def fixture_gate(instructions: InstructionSet, judge_prompt: str) -> Gate:
    """The validity gate of one fixture against the prompts of every condition, as stored."""
    terms = afp_terms([instructions.text("C"), instructions.text("D")])

    def gate(fx: Fixture) -> Report:
        prompts: dict[str, RenderedPrompt] = {c: render(c, fx, instructions.text(c)) for c in CONDITIONS}
        report = check_fixture(fx, prompts, terms, judge_prompt)
        return {"passed": report.passed, "failures": [{"check": f.check, "detail": f.detail} for f in report.failures]}

    return gate


def gate_key(instructions: InstructionSet, judge_prompt: str) -> str:
    """What `fixture_gate(instructions, judge_prompt)` depends on besides the fixture and the code, as one
    key (the prepared-fixture cache keeps reports under it)."""
    texts = {c: instructions.text(c) for c in CONDITIONS}
    return json_sha256({"instructions": texts, "judge_prompt": judge_prompt})


def _split(items: int) -> bool:
    return items >= SPLIT_FROM_FIXTURES and may_fork()


def gate_all(fixtures: Sequence[Fixture], gate: Gate) -> dict[str, Report]:
    """`gate` of every (already parsed) fixture, by fixture id in the given order."""
    if not _split(len(fixtures)):
        return {fx.id: gate(fx) for fx in fixtures}
    half = len(fixtures) // 2
    mine, theirs = run_beside_a_child(lambda: {fx.id: gate(fx) for fx in fixtures[:half]},
                                      lambda: {fx.id: gate(fx) for fx in fixtures[half:]}, "validity gate")
    if not isinstance(theirs, dict) or list(theirs) != [fx.id for fx in fixtures[half:]]:
        if theirs is not None:
            log.warning("validity gate: incomplete reports from the helper process; gating its fixtures here")
        theirs = {fx.id: gate(fx) for fx in fixtures[half:]}
    return mine | theirs


@dataclass
class PreparedFixtures:
    facts: list[FixtureFacts]  # one a file, in file order
    # By file index: the first `keep` parsed fixtures that `only` keeps, in file order (the others are
    # dropped once gated: a sweep's workers parse a fixture when its cell needs it, fixture_map.py).
    parsed: dict[int, Fixture]
    # The gate's reports, by fixture id in file order, of the fixtures `only` keeps (all without it).
    # None when no gate was given, or when it raised: validity_reports then gates as it always has (and
    # meets the same exception at the same point of sweep creation).
    reports: dict[str, Report] | None
    # By file index: each parsed fixture's form (its JSON), spooled, for the sweep's rows and the cache.
    forms: ParsedForms = field(default_factory=ParsedForms)


def _nothing_yet(gate: Gate | None, forms: ParsedForms | None = None) -> PreparedFixtures:
    return PreparedFixtures([], {}, None if gate is None else {}, forms if forms is not None else ParsedForms())


def prepare_fixtures(files: Sequence[FixtureFile], gate: Gate | None, only: Collection[str] | None,
                     cache: PreparedCache | None = None, gate_id: str | None = None,
                     keep: int = CAPACITY) -> PreparedFixtures:
    """Parse every file in order (a bad file raises its FixtureError, the first in file order) and gate
    each fixture that `only` keeps; at most `keep` parsed fixtures are returned. With a cache, what it
    holds for these texts (and, with `gate_id` naming `gate`, for this gate) is taken from it, and the
    rest computed here and written to it."""
    kept = set(only) if only else None
    if cache is None:
        return _parse_and_gate(files, gate, kept, keep)
    gate_id = gate_id if gate is not None else None  # reports are kept only for a given gate (gate_key)
    recalled = cache.recall(files, gate_id, kept, keep)
    new_at = [i for i in range(len(files)) if i not in recalled.facts]
    # A bad file raises here: never cached.
    fresh = _parse_and_gate(subset(files, new_at), gate, kept, keep)
    new_forms = fresh.forms.moved(new_at)
    facts_at = recalled.facts | dict(zip(new_at, fresh.facts, strict=True))
    facts = [facts_at[i] for i in range(len(files))]
    parsed = recalled.parsed | {new_at[j]: fx for j, fx in fresh.parsed.items()}
    wanted = [i for i in range(len(files)) if kept is None or facts[i].id in kept]
    reports, new_reports = _reports(files, facts, wanted, gate, recalled, set(new_at), fresh.reports)
    cache.keep(recalled, new_forms, facts, gate_id, new_reports)
    return PreparedFixtures(facts, _first(parsed, keep), reports, recalled.forms.joined(new_forms))


def _first(parsed: dict[int, Fixture], keep: int) -> dict[int, Fixture]:
    """The first `keep` parsed fixtures by file index (each one kept is one `only` keeps: _prepare, recall)."""
    return {i: parsed[i] for i in sorted(parsed)[:keep]}


def _reports(files: Sequence[FixtureFile], facts: list[FixtureFacts], wanted: list[int], gate: Gate | None,
             recalled: Recalled, new: set[int],
             fresh: dict[str, Report] | None) -> tuple[dict | None, dict[int, Report]]:
    """The reports of the wanted fixtures in file order (None as in PreparedFixtures), and those of them
    computed now, by index, for the cache: recalled ones, fresh ones, and a gate of recalled fixtures
    whose report the cache did not hold (another instruction set or judge prompt), parsed again from
    their texts (on two processes when there are many) rather than held from the cache."""
    if gate is None or fresh is None:
        return None, {}
    ungated = [i for i in wanted if i not in new and i not in recalled.reports]
    try:
        regated = _parse_and_gate(subset(files, ungated), gate, None, 0).reports
    except Exception:  # as in _prepare: validity_reports gates again and raises it where it always did
        return None, {}
    if regated is None:
        return None, {}
    computed = {i: fresh[facts[i].id] for i in wanted if i in new} | {i: regated[facts[i].id] for i in ungated}
    every = recalled.reports | computed
    return {facts[i].id: every[i] for i in wanted}, computed


def _parse_and_gate(files: Sequence[FixtureFile], gate: Gate | None, kept: set[str] | None,
                    keep: int) -> PreparedFixtures:
    """prepare_fixtures without a cache: on two processes when there are enough files and it is safe."""
    if not _split(len(files)):
        return _prepare(_nothing_yet(gate), files, gate, kept, keep)
    half = len(files) // 2
    # The child keeps parsed fixtures only where this process's share may fall short of `keep`.
    theirs_keep = keep if kept is not None else max(0, keep - half)
    # Made before the fork: the child spools its forms to its file, and only their positions come back.
    child_forms = ParsedForms()
    mine, theirs = run_beside_a_child(
        lambda: _prepare(_nothing_yet(gate), files[:half], gate, kept, keep),
        lambda: _child_share(files[half:], gate, kept, theirs_keep, half, child_forms), "fixture parse and gate")
    if _trusted(theirs, len(files) - half, half, gate, kept):
        theirs.forms = child_forms.take_back(theirs.forms)
    else:
        if theirs is not None:
            log.warning("fixture parse and gate: incomplete result from the helper process; doing its share here")
        theirs = _nothing_yet(gate)
    # What the child left undone, here: after a bad file the child stops, and this parse raises its error.
    _prepare(theirs, files[half + len(theirs.facts):], gate, kept, theirs_keep, half)
    both = None if mine.reports is None or theirs.reports is None else mine.reports | theirs.reports
    return PreparedFixtures(mine.facts + theirs.facts, _first(mine.parsed | theirs.parsed, keep), both,
                            mine.forms.joined(theirs.forms))


def _prepare(into: PreparedFixtures, files: Sequence[FixtureFile], gate: Gate | None, kept: set[str] | None,
             keep: int, offset: int = 0) -> PreparedFixtures:
    """Parse `files` onto `into` (a bad file raises; those before it stay added), gating the kept ones.
    `offset`: the file index of `into`'s first fixture."""
    for file in files:
        fx = parse_fixture(file)
        at = offset + len(into.facts)
        into.facts.append(facts_of(fx))
        into.forms.add(at, fx.model_dump_json().encode())
        if kept is not None and fx.id not in kept:
            continue
        if len(into.parsed) < keep:
            into.parsed[at] = fx
        if gate is None or into.reports is None:
            continue
        try:
            into.reports[fx.id] = gate(fx)
        except Exception:  # not an input error: leave it to validity_reports, which raises it where it always did
            into.reports = None
    return into


def _child_share(files: Sequence[FixtureFile], gate: Gate | None, kept: set[str] | None, keep: int,
                 offset: int, forms: ParsedForms) -> PreparedFixtures:
    done = _nothing_yet(gate, forms)
    try:
        _prepare(done, files, gate, kept, keep, offset)
    except FixtureError:
        pass  # stop at the bad file: the parent parses it again and raises exactly what one process raises
    return done


def _trusted(theirs: object, files: int, offset: int, gate: Gate | None, kept: set[str] | None) -> bool:
    """The child's result has the right form: at most `files` facts, parsed fixtures and forms at indices
    among them, and (if it has reports) one for each kept fixture, in order."""
    if not isinstance(theirs, PreparedFixtures) or not isinstance(theirs.facts, list):
        return False
    if len(theirs.facts) > files or not all(isinstance(f, FixtureFacts) for f in theirs.facts):
        return False
    indices = range(offset, offset + len(theirs.facts))
    if not isinstance(theirs.parsed, dict) or not isinstance(theirs.forms, ParsedForms):
        return False
    if not all(i in indices and isinstance(fx, Fixture) and fx.id == theirs.facts[i - offset].id
               for i, fx in theirs.parsed.items()):
        return False
    if not all(i in indices for i in theirs.forms.indices()):
        return False
    if theirs.reports is None:
        return True  # no gate, or the child's gate raised (then so would ours: validity_reports gates)
    expected = [f.id for f in theirs.facts if kept is None or f.id in kept]
    return gate is not None and isinstance(theirs.reports, dict) and list(theirs.reports) == expected
