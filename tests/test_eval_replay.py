"""The replay of ``brain eval feed``: profiles from the Helm chart, targets, the leak rule, and a
run over the hand-made log set with the real product commands."""

from __future__ import annotations

import json
import os
import re
from datetime import timedelta
from pathlib import Path

import pytest

from brain.evaluation import baselines as bl
from brain.evaluation.evaluate import BRAIN, EvalRequest, Evaluation, evaluate
from brain.evaluation.needs import locate_claude, read_needs
from brain.evaluation.replay import (
    BrainRunner,
    LogSources,
    ReplayError,
    Schedule,
    VaultBuilder,
    default_helm_values,
    format_instant,
    ideal_profile,
    parse_instant,
    product_env,
    production_profile,
    read_universe,
    select_targets,
)
from brain.evaluation.report import as_json, human
from tests.eval_logs import S1, S2, S3, S4, S5, write_logs


def test_schedules_give_the_last_run_at_or_before_an_instant() -> None:
    daily = Schedule.parse("7 4 * * *")
    assert format_instant(daily.last_at_or_before(parse_instant("2026-01-03T03:00:00Z"))) == "2026-01-02T04:07:00Z"
    assert format_instant(daily.last_at_or_before(parse_instant("2026-01-03T04:07:00Z"))) == "2026-01-03T04:07:00Z"
    every6 = Schedule.parse("7 */6 * * *")
    assert every6.hours == (0, 6, 12, 18)
    assert format_instant(every6.last_at_or_before(parse_instant("2026-01-03T05:00:00Z"))) == "2026-01-03T00:07:00Z"
    assert format_instant(every6.first_after(parse_instant("2026-01-03T18:07:00Z"))) == "2026-01-04T00:07:00Z"
    quarter = Schedule.parse("*/15 * * * *")
    assert quarter.minutes == (0, 15, 30, 45) and quarter.hours == tuple(range(24))
    assert format_instant(quarter.last_at_or_before(parse_instant("2026-01-03T05:14:59Z"))) == "2026-01-03T05:00:00Z"
    assert format_instant(quarter.first_after(parse_instant("2026-01-03T23:45:00Z"))) == "2026-01-04T00:00:00Z"
    for bad in ("7 4 * * 1", "*/0 * * * *", "61 * * * *", "x 4 * * *"):
        with pytest.raises(ReplayError):
            Schedule.parse(bad)


def test_production_profile_is_read_from_the_chart_values(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(
        "env:\n  BRAIN_FEED_TOKEN_BUDGET: '1500'\n  BRAIN_LLM_API_KEY: nope\n"
        "extract:\n  schedule: '7 */2 * * *'\n  since: 3h\n  agent: all\n  codexDir: /shared/.codex/sessions\n"
        "  extraArgs: ['--min-turns', '2']\n"
    )
    profile = production_profile(values, codex_available=True)
    assert (profile.agent, profile.min_turns, profile.window) == ("all", 2, timedelta(hours=3))
    assert profile.schedule is not None and profile.schedule.hours == tuple(range(0, 24, 2))
    assert dict(profile.env) == {"BRAIN_FEED_TOKEN_BUDGET": "1500"}  # secrets never reach a command
    # Without Codex logs given to the eval, "all" is Claude Code only.
    assert production_profile(values, codex_available=False).agent == "claude-code"


def test_production_profile_defaults_to_the_settings_min_turns(tmp_path: Path) -> None:
    from brain.settings import Settings

    values = tmp_path / "values.yaml"
    values.write_text("extract:\n  schedule: '7 4 * * *'\n  since: 26h\n  agent: claude-code\n  codexDir: ''\n")
    profile = production_profile(values, codex_available=True)
    assert (profile.agent, profile.min_turns) == ("claude-code", Settings().min_turns)


def test_the_shipped_chart_parses() -> None:
    values = default_helm_values()
    assert values is not None
    profile = production_profile(values, codex_available=True)
    assert profile.schedule is not None and profile.window is not None


def test_a_scheduled_window_that_misses_a_session_hides_it(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text("extract:\n  schedule: '0 0 * * *'\n  since: 1h\n  agent: claude-code\n")
    profile = production_profile(values, codex_available=False)
    from brain.evaluation.replay import Session

    def ended(at: str) -> Session:
        return Session.from_entry({"session_id": "x", "start": "2026-01-01T00:00:00Z", "end": at})

    assert profile.covers(ended("2026-01-01T23:30:00Z"))  # inside the 1 h window of the midnight run
    assert not profile.covers(ended("2026-01-01T12:00:00Z"))  # no run's window saw it


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, BrainRunner, Path]:
    root = tmp_path_factory.mktemp("eval-tiny")
    projects = root / "projects"
    write_logs(projects)
    work = root / "work"
    return projects, BrainRunner(product_env(os.environ, work)), work


def test_targets_follow_warmup_and_need_an_earlier_ended_session(tiny: tuple[Path, BrainRunner, Path]) -> None:
    projects, run, _ = tiny
    universe = read_universe(run, LogSources(projects, None))
    assert [s.id for s in universe] == [S1, S3, S2, S5, S4]
    assert [s.id for s in select_targets(universe, warmup=2)] == [S2, S5, S4]
    assert [s.id for s in select_targets(universe, warmup=0)] == [S3, S2, S5, S4]  # S1: nothing ended before it
    assert [s.id for s in select_targets(universe, warmup=2, excluded={S5})] == [S2, S4]


def test_the_extractions_warnings_reach_the_eval(tiny: tuple[Path, BrainRunner, Path], tmp_path: Path) -> None:
    projects, run, _ = tiny
    (projects / "linked").symlink_to(tmp_path, target_is_directory=True)  # not followed: said, not skipped silently
    warnings: list[str] = []
    universe = read_universe(run, LogSources(projects, None), warnings)
    assert [s.id for s in universe] == [S1, S3, S2, S5, S4]
    assert warnings == [f"extract: {projects / 'linked'}: a symbolic link, not followed (copy the logs in to read them)"]


def test_a_session_running_at_the_cutoff_stays_out_of_the_vault(tiny: tuple[Path, BrainRunner, Path]) -> None:
    projects, run, work = tiny
    sources = LogSources(projects, None)
    universe = read_universe(run, sources)
    cutoff = next(s for s in universe if s.id == S4).start
    # `brain extract --until C` alone lets S5 in: it overlaps C and is still running.
    raw = json.loads(run(["extract", *sources.extract_args("claude-code"), "--since", "2026-01-01T00:00:00Z",
                          "--until", format_instant(cutoff), "--now", format_instant(cutoff), "--min-turns", "1"]))
    assert S5 in {s["session_id"] for s in raw["sessions"]}
    builder = VaultBuilder(run, sources, ideal_profile(), work / "leak-vault")
    builder.extract(cutoff, universe)
    assert [s.id for s in builder.snapshot()] == [S1, S3, S2]
    written = "\n".join(p.read_text(errors="replace") for p in (work / "leak-vault").rglob("*.md"))
    assert S3[:8] in written and S5[:8] not in written


@pytest.fixture(scope="module")
def evaluation(tiny: tuple[Path, BrainRunner, Path]) -> Evaluation:
    projects, run, work = tiny
    request = EvalRequest(LogSources(projects, None), ideal_profile())
    return evaluate(request, run, work / "eval")


def test_the_replay_scores_the_hand_made_targets(evaluation: Evaluation) -> None:
    targets = {t.session.id: t for t in evaluation.targets}
    assert list(targets) == [S2, S5, S4]
    assert targets[S2].knowable == {"converter.py", "parse_header"}
    assert targets[S5].knowable == {"mix phx.server", "phx.server"}
    assert targets[S4].knowable == {"mix phx.server", "phx.server", "undefinedfunctionerror"}
    assert [t.history for t in evaluation.targets] == [2, 3, 3]  # S4's vault: S1, S3, S2 (not the running S5)
    for target in evaluation.targets:
        assert target.scores[bl.EMPTY].r_kn == 0.0
        assert target.scores[bl.ORACLE].r_kn == 1.0
        assert target.scores[BRAIN].lucky == ()  # the vault held only earlier sessions
    # The digest carries prompts and files, not errors: S4's UndefinedFunctionError is missed.
    assert [t.scores[bl.RECENT_DIGEST].r_kn for t in evaluation.targets] == [1.0, 1.0, pytest.approx(2 / 3)]
    assert evaluation.aggregates[bl.EMPTY].r_kn_project == 0.0
    assert evaluation.aggregates[bl.ORACLE].r_kn_project == 1.0


def test_the_report_has_every_feed_and_the_verdict(evaluation: Evaluation) -> None:
    text = human(evaluation)
    for name in ("brain", "brain+recall", *bl.BASELINES):
        assert f"\n{name} " in text
    assert "Verdict: " in text
    assert "Targets (FEED-METRIC" in text and "R_kn per project >= 0.50: " in text
    data = json.loads(as_json(evaluation))
    assert [c["met"] for c in data["metric_targets"]][-1] is None  # the production profile takes a second run
    assert len(data["metric_targets"]) == 6
    assert [t["session_id"] for t in data["targets"]] == [S2, S5, S4]
    assert set(data["aggregate"]) == {"brain", "brain+recall", *bl.BASELINES}
    assert data["recall_gain"]["verdict"] in ("better", "worse", "indistinguishable")
    for target in evaluation.targets:  # recall only adds to the boot feed: it can never score lower
        assert (target.scores["brain+recall"].r_kn or 0.0) >= (target.scores["brain"].r_kn or 0.0)
        assert target.feeds["brain+recall"].startswith(target.feeds["brain"])
    assert set(data["comparisons"]) == set(bl.BASELINES)
    assert data["aggregate"]["oracle"]["r_kn_project"] == 1.0
    assert data["projects"]["alpha"]["targets"] == 1 and data["projects"]["beta"]["targets"] == 2
    assert data["projects"]["beta"]["r_kn"]["recent-digest"] == pytest.approx((1 + 2 / 3) / 2, abs=1e-4)
    assert "\nPer project" in text
    assert as_json(evaluation) == as_json(evaluation)


def test_feeds_and_blind_judge_packets_are_written(evaluation: Evaluation, tmp_path: Path) -> None:
    from brain.evaluation.judge import write_feeds, write_judge_packets

    write_feeds(evaluation, tmp_path / "feeds")
    assert (tmp_path / "feeds" / S4 / "oracle.md").read_text() == evaluation.targets[-1].feeds[bl.ORACLE]
    write_judge_packets(evaluation, tmp_path / "judge")
    packets = [json.loads(line) for line in (tmp_path / "judge" / "judge.jsonl").read_text().splitlines()]
    key = {k["packet"]: k["feed"] for k in map(json.loads, (tmp_path / "judge" / "judge-key.jsonl").read_text().splitlines())}
    assert packets and {p["packet"] for p in packets} == set(key)
    assert "empty" not in key.values()  # nothing to judge
    for packet in packets:
        assert key[packet["packet"]] not in packet["prompt"].split("## Injected context")[0]  # blind


# --- prompt-time recall replayed at every human prompt ---------------------------------------------

GAMMA = "66666666-6666-4666-8666-666666666666"
DELTA1 = "77777777-7777-4777-8777-777777777777"
DELTA2 = "88888888-8888-4888-8888-888888888888"
OPENING = "good morning, let us look at delta today"


def _write_recall_logs(projects: Path) -> None:
    """Gamma hit ZorblatQuotaError in zorblat_export.py; later, a delta session names it only at its
    second prompt. Delta's boot feed is about delta (it cannot carry gamma's item); only recall at
    that prompt can bring it back. Five unrelated epsilon sessions make the index big enough for
    BM25 to rate a rare word."""
    from tests.eval_logs import SessionLog

    for i, topic in enumerate(["billing cron", "login page", "cache warmup", "pdf renderer", "mail queue"]):
        (SessionLog(f"9999999{i}-9999-4999-8999-99999999999{i}", "/work/epsilon", f"2026-01-2{i}T10:00")
         .prompt(f"work on the {topic}").tool("Read", {"file_path": f"/work/epsilon/{topic.replace(' ', '_')}.py"})
         .at("10:10").prompt("done").write(projects))
    failure = "Traceback (most recent call last):\nZorblatQuotaError: quota exceeded"
    (SessionLog(GAMMA, "/work/gamma", "2026-02-01T10:00")
     .prompt("the quarterly export zorblat_export.py dies with ZorblatQuotaError")
     .tool("Bash", {"command": "python tools/zorblat_export.py --all"}, failure, error=True)
     .at("10:20").prompt("ok, done for today").write(projects))
    (SessionLog(DELTA1, "/work/delta", "2026-02-02T09:00").prompt("tidy the delta readme")
     .tool("Read", {"file_path": "/work/delta/README.md"}).at("09:10").prompt("thanks").write(projects))
    (SessionLog(DELTA2, "/work/delta", "2026-02-03T09:00").prompt(OPENING)
     .tool("Read", {"file_path": "/work/delta/README.md"})
     .prompt("the zorblat_export.py script fails again with ZorblatQuotaError")
     .tool("Bash", {"command": "python tools/zorblat_export.py --all"}, failure, error=True)
     .at("09:30").prompt("fine").write(projects))


def test_recall_at_a_later_prompt_brings_back_what_the_boot_feed_could_not(tmp_path: Path) -> None:
    projects = tmp_path / "projects"
    _write_recall_logs(projects)
    work = tmp_path / "work"
    run = BrainRunner(product_env(os.environ, work))
    evaluation = evaluate(EvalRequest(LogSources(projects, None), ideal_profile(), warmup=0), run, work / "eval")
    target = next(t for t in evaluation.targets if t.session.id == DELTA2)
    assert target.knowable == {"zorblat_export.py", "python zorblat_export.py", "zorblatquotaerror"}
    boot, with_recall = target.feeds[BRAIN], target.feeds["brain+recall"]
    assert "zorblat" not in boot.lower()  # delta's feed is about delta
    assert with_recall.startswith(boot)
    recalled = with_recall[len(boot):]
    assert "ZorblatQuotaError" in recalled  # recalled at the second prompt, which names it
    assert target.scores[BRAIN].r_kn == 0.0
    # The file and the error are typed in that very prompt: showing them back is an echo, not
    # memory. The command the arc ran is what recall brought that the prompt did not say.
    assert "python zorblat_export.py" in recalled  # in the arc's open error, as the extractor wrote it
    assert target.scores["brain+recall"].hits == ("python zorblat_export.py",)
    # One hook session over all prompts: an arc recalled at one prompt is not shown again at the next.
    links = re.findall(r"\[\[([^\]]+)\]\]", recalled)
    assert links and len(links) == len(set(links))
    assert evaluation.recall_gain is not None and evaluation.recall_gain.mean_project is not None
    assert evaluation.recall_gain.mean_project > 0.0
    # The prompts are replayed, never printed.
    assert OPENING not in human(evaluation) and OPENING not in as_json(evaluation)
    # Deterministic: replayed again on the same vault, recall starts from an empty hook state.
    builder = VaultBuilder(run, LogSources(projects, None), ideal_profile(), work / "eval" / "vault")
    prompts = read_needs(locate_claude(projects)[DELTA2]).prompts
    assert with_recall == "\n\n".join((boot, builder.recall(target.session, target.session.start, prompts)))


# --- a session that ended after the last extraction: the SessionEnd hook hands it on -------------

ZETA = "/work/zeta"
Z1 = "9a9a9a9a-9999-4999-8999-999999999991"
Z2 = "9b9b9b9b-9999-4999-8999-999999999992"


def test_production_hands_on_the_session_that_ended_after_the_last_extraction(tmp_path: Path) -> None:
    """Extraction runs every 5 min: Z1 ends at 10:02 and Z2 starts at 10:03, so the 10:00 run
    never saw Z1. Its SessionEnd hook (replayed at 10:02) leaves what Z1 did for Z2's session
    start; the ideal profile (C = T) had Z1 in the vault anyway."""
    from tests.eval_logs import SessionLog

    projects = tmp_path / "projects"
    first = (SessionLog(Z1, ZETA, "2026-03-02T09:58").prompt("deploy the zorblat service with zorbctl")
             .tool("Bash", {"command": "zorbctl deploy --env staging"}, "ZorbQuotaError: quota exceeded", error=True)
             .tool("Edit", {"file_path": f"{ZETA}/deploy/quota_limits.yaml", "old_string": "1", "new_string": "2"})
             .at("10:02").prompt("stop here for now"))
    second = (SessionLog(Z2, ZETA, "2026-03-02T10:03").prompt("carry on with the deploy")
              .tool("Read", {"file_path": f"{ZETA}/deploy/quota_limits.yaml"})
              .tool("Bash", {"command": "zorbctl deploy --env staging"}).at("10:20").prompt("done"))
    first.write(projects)
    second.write(projects)
    values = tmp_path / "values.yaml"
    values.write_text("extract:\n  schedule: '*/5 * * * *'\n  since: 26h\n  agent: claude-code\n  minTurns: 1\n")
    run = BrainRunner(product_env(os.environ, tmp_path / "work"))
    sources = LogSources(projects, None)
    production = evaluate(EvalRequest(sources, production_profile(values, codex_available=False), warmup=0),
                          run, tmp_path / "work" / "production")
    [target] = production.targets
    # The 10:00 extraction saw nothing ended; Z1 came by its SessionEnd hook, and the baselines get
    # it too (the same information Brain had).
    assert target.session.id == Z2 and target.history == 1
    assert "files: deploy/quota_limits.yaml" in target.feeds[bl.RECENT_DIGEST]
    feed = target.feeds[BRAIN]
    assert feed.startswith("# `zeta`: its sessions are not in the feed yet; the one that just ended follows\n\n"
                           "# A session here ended 1 min ago (not in the feed below yet)")
    assert "`zorbctl deploy`" in feed and "quota_limits.yaml" in feed and "stopped at: \"stop here for now\"" in feed
    assert target.scores[BRAIN].r_kn == 1.0
    ideal = evaluate(EvalRequest(sources, ideal_profile(), warmup=0), run, tmp_path / "work" / "ideal")
    [target] = ideal.targets
    assert target.history == 1 and "A session here ended" not in target.feeds[BRAIN]  # the vault has it
    assert target.scores[BRAIN].r_kn == 1.0
