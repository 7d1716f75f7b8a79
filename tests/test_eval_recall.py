"""How ``brain eval feed`` credits prompt-time recall, on a tiny hand-made log with known answers.

One session, three prompts:

    prompt 0  "look at the nightly billing job"          -> reads jobs/ledger.py (needed in turn 0)
    prompt 1  "ledger_sync.py hangs with LedgerLockTimeout" (typed: ledger_sync.py, LedgerLockTimeout)
              -> reads jobs/ledger_sync.py, runs `uv run pytest`
    prompt 2  "ok, now the export"                       -> reads jobs/invoice_export.py

Recall shown at prompt 1 names ledger.py (needed before prompt 1: not credited), ledger_sync.py
and LedgerLockTimeout (typed in prompt 1: an echo, not credited), `uv run pytest` (needed after
prompt 1, not typed: credited) and invoice_export.py (needed in a later turn: credited).
"""

from __future__ import annotations

from pathlib import Path

from brain.evaluation import metrics as m
from brain.evaluation.needs import SessionNeeds, locate_claude, read_needs
from tests.eval_logs import SessionLog

SID = "abababab-abab-4bab-8bab-abababababab"
CWD = "/work/billing"
RECALL_AT_1 = ("Brain recall: notes from earlier sessions that match this prompt\n"
               "- [[arc-1]] Nightly job: files: `jobs/ledger.py`, `jobs/ledger_sync.py`, `jobs/invoice_export.py`; "
               "commands: `uv run pytest`; errors: `LedgerLockTimeout`")


def _needs(tmp_path: Path) -> SessionNeeds:
    (SessionLog(SID, CWD, "2026-03-01T10:00")
     .prompt("look at the nightly billing job")
     .tool("Read", {"file_path": f"{CWD}/jobs/ledger.py"})
     .prompt("ledger_sync.py hangs with LedgerLockTimeout")
     .tool("Read", {"file_path": f"{CWD}/jobs/ledger_sync.py"})
     .tool("Bash", {"command": "uv run pytest -q"}, "Traceback\nLedgerLockTimeout: lock held", error=True)
     .prompt("ok, now the export")
     .tool("Read", {"file_path": f"{CWD}/jobs/invoice_export.py"})
     .write(tmp_path))
    return read_needs(locate_claude(tmp_path)[SID], CWD)


def test_items_know_the_turn_that_first_needed_them_and_prompts_their_typed_keys(tmp_path: Path) -> None:
    needs = _needs(tmp_path)
    turn = {i.key: i.first_turn for i in needs.headline()}
    assert turn == {"ledger.py": 0, "ledger_sync.py": 1, "ledgerlocktimeout": 1, "uv run pytest": 1,
                    "invoice_export.py": 2}
    assert needs.prompt_keys == (frozenset(), frozenset({"ledger_sync.py", "ledgerlocktimeout"}), frozenset())


def test_recall_is_credited_only_for_later_needs_the_prompt_did_not_name(tmp_path: Path) -> None:
    needs = _needs(tmp_path)
    items = needs.headline()
    credit = m.recall_credit([(1, RECALL_AT_1)], items, needs.prompt_keys)
    assert {key for _, key in credit} == {"uv run pytest", "invoice_export.py"}
    # The same text shown at prompt 0 names nothing typed there: everything of turn 0 or later counts.
    assert {key for _, key in m.recall_credit([(0, RECALL_AT_1)], items, needs.prompt_keys)} == {
        "ledger.py", "ledger_sync.py", "ledgerlocktimeout", "uv run pytest", "invoice_export.py"}
    # Shown at prompt 2, only the export file is still ahead.
    assert {key for _, key in m.recall_credit([(2, RECALL_AT_1)], items, needs.prompt_keys)} == {"invoice_export.py"}


def test_brain_plus_recall_scores_the_boot_feed_and_the_credited_recall(tmp_path: Path) -> None:
    needs = _needs(tmp_path)
    items = needs.headline()
    known = frozenset(i.key for i in items)  # all knowable, as if an earlier session had them all
    boot = "# billing: where we left off\n- Last session: files in play: `jobs/ledger.py`\n"
    alone = m.score_feed(boot, items, known, "billing")
    both = m.score_feed(boot, items, known, "billing", recall=[(1, RECALL_AT_1)], prompt_keys=needs.prompt_keys)
    assert alone.knowable == m.Ratio(1, 5)
    assert both.knowable == m.Ratio(3, 5)  # ledger.py from the feed; pytest and the export from recall
    assert set(both.hits) == {"jobs/ledger.py", "uv run pytest", "jobs/invoice_export.py"}
    # Plain text matching would have credited the echoes too: that is what the rule takes out.
    naive = m.score_feed(boot + "\n\n" + RECALL_AT_1, items, known, "billing")
    assert naive.knowable == m.Ratio(5, 5)
    assert both.tokens == naive.tokens  # the recall's tokens count like the feed's
    assert both.lines == naive.lines and both.useful_lines == alone.useful_lines + 1
