"""Judge calibration: run a judge over the simulator's canned responses, whose gold scores are declared,
and report agreement: exact match per dimension and Cohen's kappa on pass/fail (scoring/agreement.py, which
also gives its interval and both base rates).

The judge's endpoint is checked first with the same preflight as `run` (an unreachable judge, a refused
key or an unknown model stops here). A call that fails later is counted apart from an answer that
cannot be parsed: the first says nothing about the judge's quality, so a report with failed calls (or
with no usable judgement at all) could not judge, and the CLI exits 3."""

from __future__ import annotations

from dataclasses import dataclass

from afpbench.fixtures.loader import load_fixtures
from afpbench.reference.loader import load_judge_prompt
from afpbench.reference.protocol_facts import DIMENSIONS
from afpbench.scoring.agreement import Kappa, cohens_kappa
from afpbench.scoring.judge import Judgement, build_judge_messages
from afpbench.scoring.rules import PassRule
from afpbench.scoring.states import ResultState
from afpbench.workers.grading.calibration_set import verdict_of
from afpbench.workers.grading.judges import judge_call, judgement_response, read_call
from afpbench.workers.sim.canned import load_canned
from afpbench.workers.sweeps.endpoints import preflight_model
from afpbench.workers.sweeps.spec import ModelSpec


@dataclass
class CalibrationReport:
    judge: str
    simulated: bool
    items: int
    unparseable: int  # the judge answered, but not with a usable judgement
    exact_by_dimension: dict[str, float]
    pass_fail_agreement: float | None
    kappa: float | None
    rows: list[dict]
    failed_calls: int = 0  # no answer at all (unreachable, refused, rate-limited, 5xx)
    agreement: Kappa | None = None  # kappa with its interval and both base rates (gold first, judge second)

    @property
    def judged(self) -> int:
        return self.items - self.unparseable - self.failed_calls

    def could_not_judge(self) -> str | None:
        """Why this report does not measure the judge, or None when it does."""
        if self.failed_calls:
            first = next((r["error"] for r in self.rows if r.get("call_failed")), "")
            return f"judge {self.judge}: {self.failed_calls} of {self.items} calls failed ({first[:160]})"
        if self.items and not self.judged:
            return f"judge {self.judge}: none of {self.items} answers was a usable judgement"
        if not self.items:
            return f"judge {self.judge}: no canned response with gold scores to judge"
        return None


def calibrate(
    judge: ModelSpec,
    fixtures_dir: str | None = None,
    judge_prompt_path: str | None = None,
    check_endpoint: bool = True,
) -> CalibrationReport:
    if check_endpoint:
        preflight_model(judge)
    fixtures = {fx.id: fx for fx in load_fixtures(fixtures_dir)}
    canned = load_canned(fixtures_dir)
    prompt = load_judge_prompt(judge_prompt_path)
    rule = PassRule()
    rows: list[dict] = []
    unparseable = failed_calls = 0
    for fixture_id, responses in sorted(canned.items()):
        fixture = fixtures.get(fixture_id)
        if fixture is None:
            continue
        for response in responses:
            messages = build_judge_messages(fixture, response.text, prompt, [])
            call = judge_call(judge, messages, f"calibrate|{response.id}", judgement_response(fixture))
            parsed = read_call(call, fixture, response.text)
            if parsed is None:
                failed_calls += 1
                rows.append({"response": response.id, "error": call.error or "no answer", "call_failed": True})
                continue
            if not isinstance(parsed, Judgement):
                unparseable += 1
                rows.append({"response": response.id, "error": getattr(parsed, "reason", "unparseable")})
                continue
            judged_pass = verdict_of(parsed, fixture, rule) == ResultState.MODEL_PASS  # as the scorer reads one
            rows.append(
                {
                    "response": response.id,
                    "gold": response.gold.scores,
                    "judge": parsed.scores,
                    "gold_pass": response.gold.state == "MODEL_PASS",
                    "judge_pass": judged_pass,
                    "gold_fatal": response.gold.fatal.value if response.gold.fatal else None,
                    "judge_fatal": parsed.flagged(),
                }
            )
    scored = [r for r in rows if "judge" in r]
    exact: dict[str, float] = {
        d: (sum(r["gold"][d] == r["judge"][d] for r in scored) / len(scored)) if scored else 0.0
        for d in DIMENSIONS
    }
    pairs = [(r["gold_pass"], r["judge_pass"]) for r in scored]
    agreement = sum(a == b for a, b in pairs) / len(pairs) if pairs else None
    kappa = cohens_kappa(pairs)
    return CalibrationReport(
        judge.display, judge.simulated, len(rows), unparseable, exact, agreement, kappa.kappa, rows,
        failed_calls, kappa,
    )
