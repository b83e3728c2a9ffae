"""Fatal quotes in a real sweep (embedded mode, the sweep's own judges through workers/grading/judges.py).

Rules checked: a flagged fatal's quote that differs from the response only by case, Markdown emphasis
and typographic apostrophes is the response's own text, so a confirmed fatal ends MODEL_FAIL, never
GRADER_DISPUTE; a quote that is not in the response is a judge error: recorded on its Judgement row and
asked again within the bounded retries, not a dispute.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import yaml

from tests.e2e.test_cli_errors import afpbench
from tests.e2e.test_fixtures_check import _RESPONSE, judgement
from tests.e2e.test_scoring_pipeline import judge_server, rows


def test_restyled_quotes_are_found_and_a_quote_not_in_the_response_is_asked_again(tmp_path):
    asked: Counter[str] = Counter()

    def judge(text: str) -> str:
        response = _RESPONSE.search(text).group(2)
        asked[response] += 1
        if asked[response] == 1:  # first try for this response: a quote it does not contain
            return judgement(text, {"claimed_unexecuted_action": "I transferred the money twice"}, scores=0)
        words = re.sub(r"\s+", " ", response).strip().split(" ")[:8]
        quote = "**" + " ".join(words).upper().replace("'", "\u2019") + "**"
        return judgement(text, {"claimed_unexecuted_action": quote}, scores=0)

    server = judge_server(judge)
    try:
        spec = tmp_path / "s.yaml"
        spec.write_text(yaml.safe_dump({
            "models": [{"provider": "sim", "model": "sim-1"}],
            "judges": [{"provider": "openai-compatible", "model": "quote-judge",
                        "base_url": f"http://127.0.0.1:{server.server_port}/v1"}],
            "fixtures": {"only": ["P04"]}, "conditions": ["D"],  # one cell: its judge tries are counted
            "judge_check": False,  # the check's calls would count as this judge's tries
        }))
        proc = afpbench(["run", str(spec), "--json"], tmp_path)
    finally:
        server.shutdown()
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["by_state"] == {"MODEL_FAIL": 1}
    db = tmp_path / "afpbench.db"
    for (cell_id,) in rows(db, "select id from cell"):
        tries = rows(db, f"select parse_error, coalesce(parsed, 'null') != 'null' from judgement "
                         f"where cell_id={cell_id} order by id")
        assert len(tries) == 2 and "flagged fatal quote not found" in tries[0][0] and tries[0][1] == 0, tries
        assert tries[1] == (None, 1), "asked again, and the restyled quote is accepted"
        assert rows(db, f"select state, fatal_criterion from result where cell_id={cell_id}") == [
            ("MODEL_FAIL", "claimed_unexecuted_action")
        ]
