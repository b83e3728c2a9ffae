"""Every results table, defined once: its columns, read from the typed summary (workers/results/summary.py).

The terminal, the report (md, html, json), the viewer and the export bundle render these definitions
(workers/results/table_spec.py says how); none keeps a column list of its own.

To add a column: add a `Column` to the table's `columns` below: key, header, how to read the value from
the row, how to write it (a `Format` of table_spec.py), and for the 80-column terminal a short head
(`legend=True` spells it out under the table) or `wide=True` to leave it out there. To add a table:
define a `Table` here (the judge-reliability tables: reliability_tables.py) and list it in REPORT_TABLES
(the report, its JSON and the export's CSV files),
TERMINAL_TABLES (the end-of-run summary: it reads only the parts in summary.RunSummary) or on a viewer
page (api/viewer/pages_sweeps.py places its sections).
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import NamedTuple

from afpbench.scoring.balance import BalanceTest, ExclusionShare
from afpbench.scoring.measures import MEANS, ConditionScores
from afpbench.scoring.rates import EXCLUDED, LackingGroup, RateBlock
from afpbench.workers.results.batch_listing import BatchState
from afpbench.workers.results.reliability_tables import RELIABILITY_TABLES
from afpbench.workers.results.summary import (
    Comparison,
    FixtureConditionRow,
    ModelConditionRow,
    PairedComparison,
    SweepSummary,
    UnpairedComparison,
)
from afpbench.workers.results.table_spec import (
    CONDITION,
    COUNT,
    COUNT_AND_SHARE,
    DIFFERENCE,
    DIFFERENCE_INTERVAL,
    DIFFERENCE_SIZE,
    FLAG,
    FRACTION,
    LABEL,
    MEAN_SCORE,
    MEAN_TOKENS,
    MODEL,
    P_VALUE,
    RATE,
    RATE_INTERVAL,
    TEXT,
    USD,
    Column,
    Format,
    Table,
)
from afpbench.workers.results.trail_tables import HUMAN_DECISIONS, RERUNS, WRITTEN_TOOL_CALLS

# Short heads of the states counted beside a rate (spelled out in the terminal's legend).
EXCLUDED_ABBREVIATIONS = {"PROVIDER_BLOCK": "PB", "INFRA_ERROR": "IE", "INVALID_TEST": "IT",
                          "GRADER_DISPUTE": "GD", "unfinished": "UF"}

# Shared by every table whose rows have them.


# ---------------------------------------------------------------- pass rates


def _excluded(state: str) -> Callable[[RateBlock], int]:
    return lambda r: r.excluded[state]


def _share(state: str) -> Callable[[ExclusionShare], float | None]:
    return lambda r: r.share_by_state[state]


def _rate_columns(failures: bool) -> tuple[Column[RateBlock], ...]:
    """PASS/n, the rate PASS/(PASS+FAIL), its exact interval, [the failure reading], and beside them every
    excluded state and the unfinished cells."""
    reading = (Column[RateBlock]("failures", "failures", attrgetter("failures"), TEXT, wide=True),) if failures else ()
    return (
        Column[RateBlock]("pass_n", "pass/n", lambda r: (r.passed, r.n), FRACTION, short="PASS/n"),
        Column[RateBlock]("pass_rate", "pass rate", attrgetter("pass_rate"), RATE, short="rate"),
        Column[RateBlock]("pass_rate_ci95", "95% CI (exact)", attrgetter("pass_rate_ci95"), RATE_INTERVAL,
                          short="95% CI"),
        *reading,
        *(Column[RateBlock](state, state, _excluded(state), COUNT, short=EXCLUDED_ABBREVIATIONS[state], legend=True)
          for state in EXCLUDED),
        Column[RateBlock]("unfinished", "unfinished", attrgetter("unfinished"), COUNT, short="UF", legend=True),
        Column[RateBlock]("not_run", "not run (budget)", attrgetter("not_run"), COUNT, wide=True),
    )


RATES = Table[ModelConditionRow](
    "rates", "Pass rate by model and condition",
    (MODEL, CONDITION, *_rate_columns(failures=True)),
    attrgetter("by_model_condition"),
    "pass rate = MODEL_PASS / (MODEL_PASS + MODEL_FAIL) with its exact (Clopper-Pearson) 95% interval; every "
    "other state is counted beside it")


def _fixture(r: FixtureConditionRow) -> str:
    return f"{r.fixture_id}@{r.fixture_version}" + (" (high risk)" if r.high_risk else "")


FIXTURE_RATES = Table[FixtureConditionRow](
    "fixture_rates", "Pass rate by fixture and condition (all models)",
    (Column("fixture", "fixture", _fixture), CONDITION, *_rate_columns(failures=False)),
    attrgetter("by_fixture_condition"))


# ---------------------------------------------------------------- paired comparisons


def _paired(read: Callable[[PairedComparison], object]) -> Callable[[Comparison], object]:
    return lambda c: read(c) if isinstance(c, PairedComparison) else None


COMPARISONS = Table[Comparison](
    "comparisons", "Paired comparisons (same model, fixture and repeat): first minus second",
    (MODEL,
     Column("comparison", "comparison", attrgetter("comparison"), LABEL, short="pair"),
     Column("n_pairs", "pairs", lambda c: c.n_pairs if isinstance(c, PairedComparison | UnpairedComparison)
            else None, COUNT),
     Column("difference", "difference", _paired(attrgetter("difference")), DIFFERENCE, short="diff"),
     Column("difference_ci95", "95% CI (Newcombe)", _paired(attrgetter("difference_ci95")), DIFFERENCE_INTERVAL,
            short="CI-N", legend=True),
     Column("p_value", "p (exact McNemar)", _paired(attrgetter("p_value")), P_VALUE, short="p-McN", legend=True),
     Column("clustered_ci95", "95% CI (fixture-clustered)", _paired(attrgetter("clustered_ci95")),
            DIFFERENCE_INTERVAL, short="CI-F", legend=True),
     Column("holm_p_value", "p (Holm-adjusted)", _paired(attrgetter("holm_p_value")), P_VALUE, short="p-Holm",
            legend=True),
     Column("min_detectable_difference", "minimum detectable difference",
            _paired(attrgetter("min_detectable_difference")), DIFFERENCE_SIZE, short="MDD", legend=True),
     Column("status", "status", attrgetter("status"), LABEL, wide=True),
     Column("power_reading", "reading against the MDD", _paired(lambda c: c.power_reading.text), TEXT, wide=True),
     Column("reading", "reading", attrgetter("reading"), TEXT, wide=True)),
    lambda s: sorted(s.comparisons, key=attrgetter("model")),  # stable: each model's comparisons together
    "difference in pass rate, first condition minus second, in percentage points, with Newcombe's paired 95% "
    "interval and the exact McNemar test (pairs pooled), and the fixture-clustered 95% interval (CR2 standard "
    "error, t on Bell-McCaffrey degrees of freedom: a claim about fixtures in general); the Holm adjustment "
    "runs over each model's comparisons; the minimum detectable difference is what this sweep's pairs find "
    "with 80% power, and an interval that includes zero is read against it (UNDERPOWERED, never "
    "'no difference')")


# ---------------------------------------------------------------- scores, fatal failures, tokens


DIMENSIONS = Table[ConditionScores](
    "dimensions", "Mean rubric score by condition (scored cells)",
    (CONDITION, *(Column[ConditionScores](d, d, attrgetter(d), MEAN_SCORE) for d in MEANS),
     Column("n", "n", attrgetter("n_scored"), COUNT)),
    lambda s: s.dimensions.by_condition, "each dimension 0-2, total 0-8")


class FatalLine(NamedTuple):
    condition: str
    criterion: str
    cells: int


def _fatal_lines(s: SweepSummary) -> list[FatalLine]:
    fatal = s.fatal_by_criterion
    lines = [FatalLine(c, k, n) for c, per in fatal.by_condition.items() for k, n in per.items()]
    return lines + [FatalLine(c, "(no fatal: below the pass rule)", n) for c, n in fatal.fail_without_fatal.items()]


FATAL = Table[FatalLine](
    "fatal", "Fatal failures by criterion",
    (CONDITION, Column("criterion", "criterion", attrgetter("criterion")),
     Column("count", "count", attrgetter("cells"), COUNT)),
    _fatal_lines)


class TokenLine(NamedTuple):
    condition: str  # "model / condition" for a model's own row
    mean_output_tokens: float | None
    n: int


def _token_lines(s: SweepSummary) -> list[TokenLine]:
    tokens = s.output_tokens
    return ([TokenLine(r.condition, r.mean_output_tokens, r.n) for r in tokens.by_condition]
            + [TokenLine(f"{r.model} / {r.condition}", r.mean_output_tokens, r.n) for r in tokens.by_model_condition])


TOKENS = Table[TokenLine](
    "output_tokens", "Mean output tokens of the scored answer",
    (Column("condition", "condition", attrgetter("condition")),
     Column("mean_output_tokens", "mean output tokens", attrgetter("mean_output_tokens"), MEAN_TOKENS),
     Column("n", "n", attrgetter("n"), COUNT)),
    _token_lines, "shows whether a condition only adds length")


# ---------------------------------------------------------------- cost, high-risk readiness


class CostLine(NamedTuple):
    model: str
    attempts: int | str
    input: int | str
    output: int | str
    cached: int | str
    reasoning: int | str
    usd: float | None


def _cost_lines(s: SweepSummary) -> list[CostLine]:
    lines = [CostLine(f"{role}{r.model}", r.attempts, r.tokens.input, r.tokens.output, r.tokens.cached,
                      r.tokens.reasoning, r.usd)
             for role, rows in (("", s.cost.by_model), ("judge ", s.cost.by_judge)) for r in rows]
    totals = (("whole sweep", s.cost.sweep_usd), ("plan's estimate", s.cost.estimate_usd),
              ("budget" + (" (reached)" if s.budget.reached else ""), s.budget.usd) if s.budget else ("", None))
    return lines + [CostLine(name, "", "", "", "", "", usd) for name, usd in totals if name]


COST = Table[CostLine](
    "cost", "Cost",
    (MODEL, *(Column[CostLine](k, k, attrgetter(k), COUNT) for k in ("attempts", "input", "output", "cached",
                                                                    "reasoning")),
     Column("usd", "USD", attrgetter("usd"), USD)),
    _cost_lines, lambda s: s.cost.rule)


def _high_risk_note(s: SweepSummary) -> str:
    hr = s.high_risk
    return ("every high-risk fixture has the required finished repeats" if hr.ready else
            f"{hr.lacking_count} model x fixture x condition groups lack {hr.required_repeats} repeats")


HIGH_RISK = Table[LackingGroup](
    "high_risk", "High-risk fixtures",
    (MODEL, Column("fixture", "fixture", attrgetter("fixture")), CONDITION,
     Column("finished_repeats", "finished repeats", attrgetter("finished_repeats"), COUNT)),
    lambda s: s.high_risk.lacking, _high_risk_note)


# ---------------------------------------------------------------- excluded cells and their balance


EXCLUSION_SHARES = Table[ExclusionShare](
    "exclusion_shares", "Exclusion balance: excluded share of finished cells by model and condition",
    (MODEL, CONDITION, Column("finished", "finished", attrgetter("finished"), COUNT),
     Column("scored", "scored", attrgetter("scored"), COUNT),
     Column("excluded", "excluded", lambda r: (r.excluded, r.excluded_share), COUNT_AND_SHARE),
     *(Column[ExclusionShare](state, state, _share(state), RATE, short=EXCLUDED_ABBREVIATIONS[state], legend=True)
       for state in EXCLUDED)),
    lambda s: s.exclusion_balance.shares,
    "a state outside PASS/(PASS+FAIL) that depends on the condition biases the pass-rate comparison")

EXCLUSION_TESTS = Table[BalanceTest](
    "exclusion_tests", "Exclusion balance: comparisons",
    (MODEL, Column("comparison", "comparison", attrgetter("comparison"), LABEL),
     Column("first_excluded", "first excluded", lambda t: (t.first_excluded, t.first_excluded + t.first_scored),
            FRACTION),
     Column("second_excluded", "second excluded", lambda t: (t.second_excluded, t.second_excluded + t.second_scored),
            FRACTION),
     Column("p_value", "p (Fisher exact)", attrgetter("p_value"), P_VALUE),
     Column("flag", "flag", attrgetter("flagged"), FLAG)),
    lambda s: s.exclusion_balance.comparisons, lambda s: s.exclusion_balance.test)


# ---------------------------------------------------------------- the batch lane (live, not the summary)
BATCHES = Table[BatchState](
    "batches", "Provider batches",
    (Column("id", "batch", attrgetter("id"), COUNT),
     MODEL,
     Column("status", "status", attrgetter("status"), LABEL),
     Column("provider_status", "provider's status", attrgetter("provider_status"), LABEL, short="says",
            legend=True),
     Column("entries", "entries", attrgetter("entries"), COUNT, short="n"),
     Column("recorded", "recorded", attrgetter("recorded"), COUNT, short="rec", legend=True),
     Column("answered", "answered", attrgetter("answered"), COUNT, short="ans", legend=True),
     Column("expires_at", "expires", attrgetter("expires_at"), Format("{:%Y-%m-%d %H:%M} UTC".format, numeric=False)),
     Column("provider_batch_id", "provider's batch id", attrgetter("provider_batch_id"), TEXT, wide=True),
     Column("error", "last error", attrgetter("error"), TEXT, wide=True)),
    lambda batches: batches,  # rows: the sweep's BatchState list (batch_listing.py), given as it is
    "status: created, submitting (sent, answer not in: the provider is asked before any new try), submitted, "
    "ended, failed; an entry not answered is recorded with its cause and sent again sync")

# ---------------------------------------------------------------- where each table is shown

REPORT_TABLES = (RATES, FIXTURE_RATES, COMPARISONS, DIMENSIONS, FATAL, TOKENS, COST, HIGH_RISK,
                 EXCLUSION_SHARES, EXCLUSION_TESTS, HUMAN_DECISIONS, WRITTEN_TOOL_CALLS, RERUNS,
                 *RELIABILITY_TABLES)
TERMINAL_TABLES = (RATES, COMPARISONS)  # the parts of summary.RunSummary
