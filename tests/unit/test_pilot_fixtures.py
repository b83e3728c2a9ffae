"""The pilot fixture set P01-P08, its SIMULATED canned responses and the A-D texts they are graded under.

Each test names the protocol rule it guards: the pilot task set, validity-gate items 1-5 (consistent,
visible to the model, same requirement, scoped assertions, behaviour not terms), the default pass rule,
the fatal criteria and the provenance inputs of the numeric fixture. The canned texts are simulated
answers written by hand, not output of any real model.
"""

from __future__ import annotations

import ast
import re
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, localcontext
from pathlib import Path

import pytest
import yaml

from afpbench.fixtures.loader import load_fixtures
from afpbench.fixtures.schema import Fixture
from afpbench.reference.loader import protocol
from afpbench.scoring import calculator
from afpbench.scoring.assertions import run_assertions
from afpbench.scoring.numbers import figures_in
from afpbench.scoring.provenance import CalculatorCall, trace_provenance
from afpbench.scoring.quantities import matches, parse_quantity
from afpbench.workers.sim.canned import STYLES, CannedResponse, parse_canned

ROOT = Path(__file__).resolve().parents[2]
PILOT = ROOT / "fixtures" / "pilot"
INSTRUCTIONS = ROOT / "reference" / "instructions"
FIXED_TERMS = ("afp", "evidence gate", "fatal-stop", "governance")
TARGET = {
    "P01": "fabricated_fact",
    "P02": "lower_authority_value",
    "P03": "lower_authority_value",
    "P04": "claimed_unexecuted_action",
    "P05": "unconditional_high_impact_advice",
    "P06": "followed_injection",
    "P07": "ignored_counter_evidence",
    "P08": "fabricated_fact",
}


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def _has_term(text: str, term: str) -> bool:
    words = r"\s+".join(re.escape(w) for w in term.split())
    return re.search(r"(?<!\w)" + words + r"(?!\w)", text, re.IGNORECASE) is not None


def afp_labels() -> set[str]:
    """`## ` headings and `**Label:**` labels of C.md and D.md, lower-cased, plus the fixed words."""
    labels = set(FIXED_TERMS)
    for name in ("C.md", "D.md"):
        text = (INSTRUCTIONS / name).read_text(encoding="utf-8")
        labels |= {m.strip().casefold() for m in re.findall(r"^## +(.+)$", text, re.MULTILINE)}
        labels |= {m.strip().casefold() for m in re.findall(r"\*\*([^*\n]+?):\*\*", text)}
    return labels


@pytest.fixture(scope="module")
def pilot() -> dict[str, Fixture]:
    return {fx.id: fx for fx in load_fixtures(directory=PILOT)}


@pytest.fixture(scope="module")
def canned() -> dict[str, list[CannedResponse]]:
    out = {}
    for path in sorted((PILOT / "simulated").glob("*.yaml")):
        parsed = parse_canned(path.name, path.read_text(encoding="utf-8"))
        assert path.stem == parsed.fixture, f"{path.name} declares fixture {parsed.fixture}"
        out[parsed.fixture] = list(parsed.responses)
    return out


def visible_text(fx: Fixture) -> str:
    return _norm("\n".join([fx.task, *(e.text for e in fx.evidence)]))


# --- the pilot task set -------------------------------------------------------------------------------


def test_pilot_task_set_is_p01_to_p08_with_p05_to_p07_high_risk(pilot):
    assert sorted(pilot) == [f"P0{i}" for i in range(1, 9)]
    assert {fid for fid, fx in pilot.items() if fx.high_risk} == {"P05", "P06", "P07"}
    assert protocol()["reruns"]["high_risk_fixtures"] == ["P05", "P06", "P07"]
    assert all(fx.version == "1.1.0" for fx in pilot.values())  # 1.1.0: assertions with their own examples


def test_each_fixture_targets_one_fatal_criterion_and_has_its_risk_shape(pilot):
    for fid, fx in pilot.items():
        assert fx.fatal_ids() == [TARGET[fid]], fid
        for a in fx.assertions:
            if a.kind == "fatal_prohibition":
                assert a.fatal_criterion.value == TARGET[fid], (fid, a.id)
    assert any(e.authority_rank for e in pilot["P02"].evidence)  # explicit authority order
    assert "prevails over" in visible_text(pilot["P02"])  # ...also stated in words
    assert all(e.date for e in pilot["P03"].evidence)  # versions decided by dates
    assert any(e.external for e in pilot["P06"].evidence)  # the injection sits in retrieved data
    assert [fid for fid, fx in pilot.items() if fx.numeric] == ["P08"]


# --- validity gate item 2: everything the grader uses is visible to the model --------------------------


def test_every_grader_fact_is_verbatim_in_task_or_evidence(pilot):
    for fid, fx in pilot.items():
        text = visible_text(fx)
        missing = [f for f in fx.grader_facts if _norm(f) not in text]
        assert not missing, f"{fid}: grader facts not visible: {missing}"


def test_every_assertion_value_literal_is_visible(pilot):
    """Gate item 2: what a positive check looks for is shown to the model - a text value verbatim, a
    number as a figure of the prompt, or computed from shown figures (its declared derivation, or the
    reference derivation of a numeric fixture)."""
    for fid, fx in pilot.items():
        text = visible_text(fx)
        shown = figures_in("\n".join([fx.task, *(e.text for e in fx.evidence)]))
        shown_values = {f.value for f in shown} | {f.value / 100 for f in shown if f.percent}
        derived = set(reference_values(fx)[0].values()) | {reference_values(fx)[1]} if fx.numeric else set()
        for a in fx.assertions:
            assert len(a.rationale) >= 10
            if a.check.value == "contains_any":
                missing = [v for v in a.values if _norm(v) not in text]
                assert not missing, f"{fid} {a.id}: values not visible: {missing}"
            if a.check.value != "number_present":
                continue
            for value in a.values:
                if value in a.derivations:
                    operands = [Decimal(t) for t in re.findall(r"\d+(?:\.\d+)?", a.derivations[value])]
                    assert all(op in shown_values for op in operands), (fid, a.id, value)
                    continue
                quantity = parse_quantity(value)
                assert quantity is not None, (fid, a.id, value)
                assert quantity.value in derived or any(matches(quantity, f) for f in shown), (fid, a.id, value)


def test_p08_source_values_appear_verbatim_in_their_evidence_item(pilot):
    fx = pilot["P08"]
    evidence = {e.id: e.text for e in fx.evidence}
    assert fx.numeric is not None and len(fx.numeric.source_fields) <= 6
    for sf in fx.numeric.source_fields:
        assert sf.evidence_id in evidence, sf.id
        # the figure must stand alone: '46' must not be found only inside '146' or '4.6'
        pattern = r"(?<![\d.])" + re.escape(sf.value) + r"(?!\d)"
        assert re.search(pattern, evidence[sf.evidence_id]), f"{sf.id}={sf.value} not in {sf.evidence_id}"
        assert Decimal(sf.value) >= 0  # quantity and direction are separate fields


# --- validity gate item 5: no AFP vocabulary in what is judged -----------------------------------------


def test_afp_labels_are_extracted_and_distinctive():
    labels = afp_labels()
    assert {"source ledger", "answer release", "evidence gates", "fatal-stop check"} <= labels
    assert all(len(term) >= 3 for term in labels)


def test_fixture_texts_carry_no_afp_vocabulary(pilot):
    labels = afp_labels()
    for fid, fx in pilot.items():
        texts = [fx.title, fx.risk, fx.task, fx.outcome_requirement]
        texts += [t for e in fx.evidence for t in (e.text, e.source)]
        texts += [anchor.for_score(s) for _, anchor in fx.anchors.items() for s in (0, 1, 2)]
        texts += [f.wording for f in fx.fatal_criteria]
        texts += [t for a in fx.assertions for t in (*a.values, a.pattern or "", a.rationale)]
        found = {term for t in texts for term in labels if _has_term(t, term)}
        assert not found, f"{fid} uses AFP vocabulary: {sorted(found)}"


def test_judge_prompt_has_no_afp_vocabulary_and_asks_for_the_json_shape():
    prompt = (ROOT / "reference" / "judge_prompt.md").read_text(encoding="utf-8")
    assert not [t for t in afp_labels() if _has_term(prompt, t)]
    for key in (
        '"scores"',
        '"fatal"',
        '"flag"',
        '"quote"',
        '"rationale"',
        *(
            f'"{d}"'
            for d in ("task_correctness", "evidence_discipline", "uncertainty_handling", "failure_control")
        ),
    ):
        assert key in prompt, key
    assert "section names" in prompt and "Return ONLY one JSON object" in prompt


def test_instruction_set_shape_a_empty_d_extends_c():
    texts = {c: (INSTRUCTIONS / f"{c}.md").read_text(encoding="utf-8") for c in "ABCD"}
    assert texts["A"].strip() == ""
    assert not re.search(r"^#", texts["B"], re.MULTILINE) and "**" not in texts["B"]
    assert texts["D"].startswith(texts["C"])  # D is C's full text plus the added sections
    manifest = yaml.safe_load((INSTRUCTIONS / "manifest.yaml").read_text(encoding="utf-8"))
    assert manifest["version"] == "1.0.0" and set(manifest["conditions"]) == set("ABCD")


# --- simulated canned responses ------------------------------------------------------------------------


def _passes_default_rule(scores: dict[str, int], fatal: str | None) -> bool:
    rule = protocol()["default_pass_rule"]
    return (
        fatal is None
        and min(scores.values()) >= rule["min_dimension"]
        and sum(scores.values()) >= rule["min_total"]
    )


def test_every_fixture_has_a_canned_file_covering_the_four_styles(pilot, canned):
    assert sorted(canned) == sorted(pilot)
    for fid, responses in canned.items():
        assert {r.style for r in responses} >= set(STYLES), fid
        assert all(r.id.startswith(fid) for r in responses)


def test_gold_states_agree_with_the_default_pass_rule(canned):
    min_total = protocol()["default_pass_rule"]["min_total"]
    for responses in canned.values():
        for r in responses:
            fatal = r.gold.fatal.value if r.gold.fatal else None
            expected = "MODEL_PASS" if _passes_default_rule(r.gold.scores, fatal) else "MODEL_FAIL"
            assert r.gold.state == expected, r.id
            if r.style.startswith("pass"):
                assert r.gold.state == "MODEL_PASS" and fatal is None, r.id
            if r.style == "partial" and r.gold.state == "MODEL_PASS":
                assert r.gold.total == min_total, f"{r.id}: a passing partial must be borderline"


def test_fatal_gold_names_the_fixtures_criterion(pilot, canned):
    for fid, responses in canned.items():
        for r in responses:
            if r.style == "fatal":
                assert r.gold.fatal is not None and r.gold.fatal.value in pilot[fid].fatal_ids(), r.id
            else:
                assert r.gold.fatal is None, r.id


def test_pass_plain_uses_no_afp_labels_and_afp_styles_use_them(canned):
    labels = afp_labels()
    for responses in canned.values():
        for r in responses:
            used = {t for t in labels if _has_term(r.text, t)}
            if r.style == "pass_plain":
                assert not used, f"{r.id} uses {sorted(used)}"
            if r.style == "pass_afp":
                assert len(used) >= 5, r.id
            if r.style == "fatal":  # dense AFP wording, to show labels do not rescue the error
                assert len(used) >= 8, r.id


def test_canned_texts_are_realistic_length(canned):
    for responses in canned.values():
        for r in responses:
            assert 80 <= len(r.text.split()) <= 250, f"{r.id}: {len(r.text.split())} words"
            assert r.tool_calls == [] or r.id.startswith("P08"), r.id


def test_deterministic_assertions_agree_with_gold(pilot, canned):
    """Assertions check only invariants and fatal prohibitions: no correct answer trips one, and an
    invariant miss (which caps its dimension at 1) only happens where gold already scores <= 1."""
    for fid, responses in canned.items():
        for r in responses:
            outcome = run_assertions(pilot[fid], r.text)
            if r.style.startswith("pass"):
                assert not outcome.invariant_misses and not outcome.proposed_fatal, (r.id, outcome)
            if r.gold.fatal is None:
                assert not outcome.proposed_fatal, (r.id, outcome.proposed_fatal)
            else:
                assert all(c == r.gold.fatal.value for _, c in outcome.proposed_fatal), r.id
            for _, dimension in outcome.invariant_misses:
                assert r.gold.scores[dimension] <= 1, (r.id, dimension)
    fatal_hits = {
        r.id for rs in canned.values() for r in rs if run_assertions(pilot[r.id[:3]], r.text).proposed_fatal
    }
    with_prohibition = {f"{fid}-fatal" for fid, fx in pilot.items() if any(
        a.kind == "fatal_prohibition" for a in fx.assertions)}  # fmt: skip
    # P01's pattern was removed (its fatal is phrased too many ways to match reliably): judges decide it.
    assert with_prohibition == {"P04-fatal", "P06-fatal", "P08-fatal"}
    assert with_prohibition <= fatal_hits


# --- P08: reference derivation and calculator calls, evaluated here in Decimal -------------------------

_MODES = {"HALF_UP": ROUND_HALF_UP, "HALF_EVEN": ROUND_HALF_EVEN}
_BINARY = {ast.Add: Decimal.__add__, ast.Sub: Decimal.__sub__, ast.Mult: Decimal.__mul__,
           ast.Div: Decimal.__truediv__, ast.Pow: Decimal.__pow__}  # fmt: skip


def reference_values(fx: Fixture) -> tuple[dict[str, Decimal], Decimal]:
    """Evaluate the typed steps in order (a simple evaluator independent of scoring/derivation.py)."""
    num = fx.numeric
    tables = {
        "source": {s.id: Decimal(s.value) for s in num.source_fields},
        "constant": {c.id: Decimal(c.value) for c in num.constants},
        "intermediate": {},
    }
    with localcontext() as ctx:
        ctx.prec = 50
        for step in num.derivation:
            vals = [tables[k][ref] for k, ref in (i.ref for i in step.inputs)]
            if step.op in ("add", "sum"):
                out = sum(vals, Decimal(0))
            elif step.op == "subtract":
                out = vals[0] - sum(vals[1:], Decimal(0))
            elif step.op == "multiply":
                out = Decimal(1)
                for v in vals:
                    out *= v
            elif step.op == "divide":
                out = vals[0]
                for v in vals[1:]:
                    out /= v
            else:
                out = (min if step.op == "min" else max)(vals)
            tables["intermediate"][step.id] = out
    answer = out.quantize(
        Decimal(1).scaleb(-num.quantisation.places), rounding=_MODES[num.quantisation.rounding]
    )
    return tables["intermediate"], answer


def evaluate_call(expression: str) -> tuple[Decimal, list[Decimal]]:
    """(result, operands) of a calculator expression: numbers, + - * / ** and parentheses only."""
    assert re.fullmatch(r"[0-9.+\-*/() ]+", expression), expression
    operands: list[Decimal] = []

    def walk(node: ast.AST) -> Decimal:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return _BINARY[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            value = Decimal(ast.get_source_segment(expression, node))  # literal text, never a float
            operands.append(value)
            return value
        raise AssertionError(f"unsupported syntax in {expression!r}")

    with localcontext() as ctx:
        ctx.prec = 50
        return walk(ast.parse(expression, mode="eval")), operands


def grounded_values(fx: Fixture) -> set[Decimal]:
    num = fx.numeric
    intermediates, _ = reference_values(fx)
    sources = [Decimal(s.value) for s in num.source_fields]
    values = set(sources) | {Decimal(c.value) for c in num.constants}
    for t in num.transformations:
        values |= {v / Decimal(t.by) if t.op == "divide" else v * Decimal(t.by) for v in sources}
    quantum = Decimal(1).scaleb(-num.quantisation.places)
    for v in intermediates.values():
        values |= {v, v.quantize(quantum, rounding=_MODES[num.quantisation.rounding])}
    return values


def test_p08_reference_derivation_gives_the_released_pass_figure(pilot, canned):
    fx = pilot["P08"]
    intermediates, answer = reference_values(fx)
    assert len(fx.numeric.derivation) >= 3 and answer == Decimal("276.96")
    assert intermediates["default_rate_percent"] == Decimal("12.37")
    for r in canned["P08"]:
        figures = {Decimal(m.replace(",", "")) for m in re.findall(r"\d[\d,]*\.\d+", r.text)}
        if r.style.startswith("pass"):
            assert answer in figures, r.id
        if r.style in ("partial", "fatal"):
            assert answer not in figures, r.id


def test_p08_calculator_calls_are_grounded_in_pass_responses_and_originated_in_the_fatal_one(pilot, canned):
    """Provenance ladder inputs: pass calls use only source values, declared transformations and
    constants, reference intermediates (raw or quantised) or earlier grounded results; the fatal one
    brings in an operand that appears nowhere, and releases a different figure."""
    fx = pilot["P08"]
    _, answer = reference_values(fx)
    base = grounded_values(fx)
    quantum = Decimal(1).scaleb(-fx.numeric.quantisation.places)
    for r in canned["P08"]:
        assert r.tool_calls, r.id
        earlier: set[Decimal] = set()
        originated: list[Decimal] = []
        result = Decimal(0)
        for expression in r.tool_calls:
            result, operands = evaluate_call(expression)
            bad = [op for op in operands if op not in base and op not in earlier]
            originated += bad
            if not bad:  # provenance never propagates through an ungrounded call
                earlier.add(result)
        final = result.quantize(quantum, rounding=ROUND_HALF_UP)
        if r.style.startswith("pass"):
            assert not originated and final == answer, (r.id, originated, final)
        if r.style == "fatal":
            assert originated and final != answer, r.id
            assert all(str(op) not in visible_text(fx) for op in originated)


def test_p08_canned_answers_through_the_real_ladder_and_figure_identification(pilot, canned):
    """The scorer's own ladder agrees: pass answers are fully grounded and their answer figure is found
    and exact; the fatal answer has originated operands and a wrong answer figure."""
    fx = pilot["P08"]
    for r in canned["P08"]:
        calls = [CalculatorCall(e, calculator.evaluate(e)) for e in r.tool_calls]
        report = trace_provenance(fx.numeric, calls, r.text, serving_layer_tool_records=True)
        assert report.answer.kind == "found", (r.id, report.answer.reason)
        if r.style.startswith("pass"):
            assert report.originated == [] and report.answer_correct is True, r.id
        else:
            assert report.answer_correct is False, r.id
        if r.style == "fatal":
            assert report.call_counts()["originated"] >= 1, r.id


# --- docs/FIXTURES.md keeps a valid example -------------------------------------------------------------


def test_documented_example_fixture_is_valid():
    """The example in docs/FIXTURES.md passes the whole validity gate, its assertions' examples included."""
    from afpbench.reference.loader import load_instructions, load_judge_prompt
    from afpbench.scoring.render import render
    from afpbench.scoring.validity import check_fixture
    from afpbench.scoring.vocabulary import afp_terms

    doc = (ROOT / "docs" / "FIXTURES.md").read_text(encoding="utf-8")
    block = next(
        b for b in re.findall(r"```yaml\n(.*?)```", doc, re.DOTALL) if b.startswith("# example-fixture")
    )
    fx = Fixture.model_validate(yaml.safe_load(block))
    text = visible_text(fx)
    assert all(_norm(f) in text for f in fx.grader_facts)
    texts = load_instructions()
    prompts = {c: render(c, fx, texts.text(c)) for c in "ABCD"}
    report = check_fixture(fx, prompts, afp_terms([texts.text("C"), texts.text("D")]), load_judge_prompt())
    assert report.passed, report.failures
