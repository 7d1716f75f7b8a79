"""The replay: sessions in time order, the targets, and the feed each target would have received.

The vault for a target is built the way a deployment builds it, by running the product's own
commands as subprocesses (``brain extract``, ``brain cluster``, ``brain tick --no-ai``,
``brain hook session-start``): the measure stays independent of how those commands work inside,
and changes to them are measured as they ship (FEED-METRIC §1).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

EPOCH = "1970-01-01T00:00:00Z"
#: The universe is read as of this instant: every session that exists.
FAR_FUTURE = "2999-12-31T23:59:59Z"
TICK_BEFORE = timedelta(hours=2)
#: Prompt-time recall is replayed at a target's first this-many human prompts (one hook run each).
RECALL_PROMPTS = 10


class ReplayError(Exception):
    """A product command failed or a profile cannot be built."""


def parse_instant(text: str) -> datetime:
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def format_instant(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- sessions as Brain sees them ------------------------------------------------------------


@dataclass(frozen=True)
class Session:
    """One entry of the ``brain extract`` bundle."""

    id: str
    agent: str
    project: str
    cwd: str
    start: datetime
    end: datetime
    user_turns: int
    entry: Mapping[str, Any] = field(compare=False, repr=False)

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any]) -> Session:
        return cls(
            id=str(entry["session_id"]),
            agent=str(entry.get("agent") or ""),
            project=str(entry.get("project") or ""),
            cwd=str(entry.get("cwd") or ""),
            start=parse_instant(str(entry["start"])),
            end=parse_instant(str(entry["end"])),
            user_turns=int(entry.get("user_turns") or 0),
            entry=entry,
        )


def ordered(sessions: Iterable[Session]) -> list[Session]:
    return sorted(sessions, key=lambda s: (s.start, s.id))


# --- running the product ------------------------------------------------------------------------


@dataclass
class BrainRunner:
    """Runs ``python -m brain ARGS`` with a controlled environment."""

    env: Mapping[str, str]
    python: str = sys.executable
    calls: int = 0

    def __call__(self, args: Sequence[str], *, stdin: str | None = None, extra_env: Mapping[str, str] | None = None) -> str:
        env = dict(self.env)
        env.update(extra_env or {})
        self.calls += 1
        done = subprocess.run(
            [self.python, "-m", "brain", *args], input=stdin if stdin is not None else "",
            capture_output=True, text=True, env=env, check=False,
        )
        if done.returncode != 0:
            tail = " ".join(done.stderr.strip().splitlines()[-3:])[:400]
            raise ReplayError(f"`brain {' '.join(args[:2])}` exited {done.returncode}: {tail}")
        return done.stdout


def product_env(base: Mapping[str, str], work: Path) -> dict[str, str]:
    """The environment of every product command: no BRAIN_* of the operator, hook state and every
    agent log folder pointed into ``work`` (a reader of an agent the replay was not given must
    find nothing, not the operator's own logs)."""
    from brain.settings import Settings

    env = {k: v for k, v in base.items() if not k.startswith("BRAIN_")}
    empty = work / "no-logs"
    empty.mkdir(parents=True, exist_ok=True)
    for f in fields(Settings):
        if f.metadata.get("group") == "extract" and f.name.endswith("_dir"):
            env["BRAIN_" + f.name.upper()] = str(empty)
    state = work / "hook-state"
    env["XDG_STATE_HOME"] = str(state)
    env["BRAIN_HOOK_STATE_DIR"] = str(state)
    env["BRAIN_NO_COLOR"] = "1"
    return env


# --- profiles --------------------------------------------------------------------------------------


def _cron_field(text: str, low_bound: int, high_bound: int) -> set[int] | None:
    """The values of one cron field (``*``, ``N``, ``A-B``, ``*/S``, ``A-B/S``, comma lists)."""
    values: set[int] = set()
    for piece in text.split(","):
        step = 1
        if "/" in piece:
            piece, step_text = piece.split("/", 1)
            if not step_text.isdigit() or int(step_text) <= 0:
                return None
            step = int(step_text)
        if piece == "*":
            low, high = low_bound, high_bound
        elif re.fullmatch(r"\d+-\d+", piece):
            low, high = (int(x) for x in piece.split("-"))
        elif piece.isdigit():
            low = high = int(piece)
        else:
            return None
        if not (low_bound <= low <= high <= high_bound):
            return None
        values.update(range(low, high + 1, step))
    return values


@dataclass(frozen=True)
class Schedule:
    """A daily cron schedule: minute and hour fields (``7 4 * * *``, ``7 */2 * * *``,
    ``*/15 * * * *``, lists and ranges); day, month and weekday must be ``*``."""

    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    text: str

    @classmethod
    def parse(cls, text: str) -> Schedule:
        parts = text.split()
        if len(parts) != 5 or parts[2:] != ["*", "*", "*"]:
            raise ReplayError(f"unsupported cron schedule {text!r} (use 'M H * * *', 'M */N * * *' or '*/N * * * *')")
        minutes = _cron_field(parts[0], 0, 59)
        hours = _cron_field(parts[1], 0, 23)
        if not minutes or not hours:
            raise ReplayError(f"unsupported cron schedule {text!r}")
        return cls(tuple(sorted(minutes)), tuple(sorted(hours)), text)

    def _runs(self, day: datetime) -> list[datetime]:
        return [day.replace(hour=h, minute=m) for h in self.hours for m in self.minutes]

    def last_at_or_before(self, instant: datetime) -> datetime:
        day = instant.replace(hour=0, minute=0, second=0, microsecond=0)
        for back in range(0, 3):
            for candidate in reversed(self._runs(day - timedelta(days=back))):
                if candidate <= instant:
                    return candidate
        raise ReplayError(f"schedule {self.text!r} has no run")

    def first_after(self, instant: datetime) -> datetime:
        day = instant.replace(hour=0, minute=0, second=0, microsecond=0)
        for ahead in range(0, 3):
            for candidate in self._runs(day + timedelta(days=ahead)):
                if candidate > instant:
                    return candidate
        raise ReplayError(f"schedule {self.text!r} has no run")


@dataclass(frozen=True)
class Profile:
    """How the vault is fed: which sessions, from which agents, extracted when."""

    name: str
    agent: str  # all | claude-code | codex
    min_turns: int
    #: None: extraction runs at the target's start (cutoff C = T); else the extraction schedule.
    schedule: Schedule | None = None
    #: The extraction window (``--since``) of a scheduled run, e.g. 26 h.
    window: timedelta | None = None
    #: BRAIN_* settings the deployment sets (the chart's ``env:``).
    env: Mapping[str, str] = field(default_factory=dict)
    source: str = ""

    def cutoff(self, start: datetime) -> datetime:
        return start if self.schedule is None else self.schedule.last_at_or_before(start)

    def covers(self, session: Session) -> bool:
        """Did some scheduled run's window see this (ended) session?"""
        if self.schedule is None or self.window is None:
            return True
        return self.schedule.first_after(session.end) - self.window <= session.end

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name, "agent": self.agent, "min_turns": self.min_turns,
            "schedule": self.schedule.text if self.schedule else None,
            "window_hours": self.window.total_seconds() / 3600 if self.window else None,
            "env": dict(sorted(self.env.items())), "source": self.source,
        }


def ideal_profile() -> Profile:
    return Profile("ideal", "all", 1, source="FEED-METRIC §1: C = T, min-turns 1, Claude Code + Codex")


def default_helm_values() -> Path | None:
    """helm/brain-ops/values.yaml of the repository checkout this package runs from."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent / "helm" / "brain-ops" / "values.yaml"
        if candidate.is_file():
            return candidate
    return None


_RELATIVE = re.compile(r"(\d+)\s*([mhdw])")
_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 604800}
#: Chart env entries that must never reach a product command (secrets, wiring of the pod).
_CHART_ENV_SKIP = ("BRAIN_LLM_API_KEY", "BRAIN_REDIS_URL", "BRAIN_VAULT", "BRAIN_SOURCE_PATH", "BRAIN_NOW")


def _flag(args: Sequence[str], name: str) -> str | None:
    value = None
    for index, arg in enumerate(args):
        if arg == name and index + 1 < len(args):
            value = args[index + 1]
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
    return value


def production_profile(values_path: Path, *, codex_available: bool) -> Profile:
    """What the shipped Helm chart does, read from its values file at run time."""
    import yaml

    from brain.settings import Settings

    try:
        values = yaml.safe_load(values_path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ReplayError(f"cannot read the chart values {values_path}: {exc}") from None
    extract = values.get("extract") or {}
    if not isinstance(extract, dict):
        raise ReplayError(f"{values_path}: `extract` is not a mapping")
    if extract.get("enabled") is False:
        raise ReplayError(f"{values_path}: the chart's extraction is disabled; production sees no sessions")
    zone = str(extract.get("timeZone") or "Etc/UTC")
    if zone not in ("UTC", "Etc/UTC", "GMT", "Etc/GMT"):
        raise ReplayError(f"{values_path}: extract.timeZone {zone!r}: only UTC schedules are replayed")
    schedule = Schedule.parse(str(extract.get("schedule") or "7 4 * * *"))
    extra = [str(a) for a in (extract.get("extraArgs") or [])]
    chart_env = values.get("env") or {}
    env = {str(k): str(v) for k, v in chart_env.items()
           if str(k).startswith("BRAIN_") and str(k) not in _CHART_ENV_SKIP} if isinstance(chart_env, dict) else {}
    agent = str(_flag(extra, "--agent") or extract.get("agent") or "claude-code")
    codex_on = bool(extract.get("codexDir")) and codex_available
    if agent == "all":
        agent = "all" if codex_on else "claude-code"
    elif agent == "codex" and not codex_on:
        raise ReplayError(f"{values_path}: the chart extracts Codex only but has no codexDir (or no --codex-dir)")
    min_turns_text = _flag(extra, "--min-turns") or env.get("BRAIN_MIN_TURNS")
    min_turns = int(min_turns_text) if min_turns_text and min_turns_text.isdigit() else Settings().min_turns
    since = str(_flag(extra, "--since") or extract.get("since") or env.get("BRAIN_SINCE") or "26h")
    match = _RELATIVE.fullmatch(since.strip())
    if not match:
        raise ReplayError(f"{values_path}: extraction window {since!r} is not relative (like 26h)")
    window = timedelta(seconds=int(match.group(1)) * _UNITS[match.group(2)])
    return Profile("production", agent, min_turns, schedule, window, env,
                   source=f"{values_path.name}: extract {schedule.text!r} --since {since} --agent {agent} "
                          f"--min-turns {min_turns}")


# --- targets -------------------------------------------------------------------------------------


def select_targets(
    universe: Sequence[Session], *, warmup: int, excluded: Iterable[str] = (), min_turns: int = 0,
) -> list[Session]:
    """Sessions after the first ``warmup`` with at least one session ended before they started."""
    skip = set(excluded)
    chosen = []
    for index, session in enumerate(universe):
        if index < warmup or session.id in skip or session.user_turns < min_turns:
            continue
        if any(other.end < session.start for other in universe if other.id != session.id):
            chosen.append(session)
    return chosen


# --- building the vault ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TargetRun:
    """What one target was given: the sessions Brain had (the filtered bundle, and the sessions
    ended since the cutoff that the SessionEnd hook handed over) and Brain's feed."""

    session: Session
    cutoff: datetime
    history: tuple[Session, ...]
    feed: str
    #: What prompt-time recall added at the session's human prompts: (prompt index, the hook's text).
    recalls: tuple[tuple[int, str], ...] = ()

    @property
    def recall(self) -> str:
        """Every recall block, in prompt order (what the agent saw over the session)."""
        return "\n\n".join(text for _, text in self.recalls)


@dataclass(frozen=True)
class LogSources:
    projects_dir: Path | None
    codex_dir: Path | None

    def extract_args(self, agent: str) -> list[str]:
        args: list[str] = []
        if self.projects_dir is not None:
            args += ["--projects-dir", str(self.projects_dir)]
        if self.codex_dir is not None:
            args += ["--codex-dir", str(self.codex_dir)]
        return [*args, "--agent", agent]

    def agent(self) -> str:
        if self.projects_dir is not None and self.codex_dir is not None:
            return "all"
        return "codex" if self.codex_dir is not None else "claude-code"


def read_universe(run: BrainRunner, sources: LogSources, warnings: list[str] | None = None) -> list[Session]:
    """Every session with a human turn, as ``brain extract --min-turns 1`` lists them; the
    extraction's warnings (a log it could not read, a link it did not follow) go to ``warnings``."""
    out = run(["extract", *sources.extract_args(sources.agent()), "--since", EPOCH, "--until", FAR_FUTURE,
               "--now", FAR_FUTURE, "--min-turns", "1"])
    bundle = _bundle(out)
    if warnings is not None:
        warnings.extend(f"extract: {w}" for w in bundle.get("warnings") or () if isinstance(w, str))
    return ordered(Session.from_entry(e) for e in bundle["sessions"])


def _bundle(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ReplayError(f"`brain extract` printed no JSON bundle: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("sessions"), list):
        raise ReplayError("`brain extract` printed a bundle without sessions")
    return data


@dataclass
class VaultBuilder:
    """One vault and the product commands that feed it, in the order a deployment runs them."""

    run: BrainRunner
    sources: LogSources
    profile: Profile
    root: Path
    clock: datetime | None = None  # the vault's latest "now": time never runs backwards
    extracted_until: datetime | None = None
    history: dict[str, Session] = field(default_factory=dict)
    dirty: bool = False
    #: Claude Code sessions' logs by session id: their SessionEnd hook runs when they end.
    transcripts: Mapping[str, Path] = field(default_factory=dict)
    ended: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.run(["init", "--vault", str(self.root)])

    @property
    def hook_state(self) -> Path:
        """The agent machine's hook state folder, shared by every session of this vault."""
        return self.root.parent / f"{self.root.name}-hook-state" / "machine"

    def end_sessions(self, since: datetime, before: datetime, universe: Sequence[Session]) -> None:
        """``brain hook session-end`` of each Claude Code session that ended in ``[since, before)``,
        in the order they ended, each at its end (what it leaves until a tick has it: the ones
        ended before ``since``, the last extraction, are in the vault already)."""
        for session in sorted(universe, key=lambda s: (s.end, s.id)):
            transcript = self.transcripts.get(session.id)
            if (session.id in self.ended or transcript is None or session.agent != "claude-code"
                    or not since <= session.end < before):
                continue
            self.ended.add(session.id)
            hook_input = {"session_id": session.id, "transcript_path": str(transcript), "cwd": session.cwd,
                          "hook_event_name": "SessionEnd", "reason": "exit"}
            env = {**self.env, "BRAIN_NOW": format_instant(session.end), "BRAIN_HOOK_STATE_DIR": str(self.hook_state)}
            self.run(["hook", "session-end", "--brain-feed", str(self.root / "brain-feed")],
                     stdin=json.dumps(hook_input), extra_env=env)

    @property
    def env(self) -> dict[str, str]:
        return dict(self.profile.env)

    def extract(self, cutoff: datetime, universe: Sequence[Session]) -> None:
        """``brain extract --until C``, sessions still running at C dropped, into ``brain cluster``."""
        if self.extracted_until is not None:
            new = [s for s in universe if self.extracted_until <= s.end < cutoff]
            if cutoff <= self.extracted_until or not new:
                return
        at = format_instant(cutoff)
        text = self.run(["extract", *self.sources.extract_args(self.profile.agent), "--since", EPOCH,
                         "--until", at, "--now", at, "--min-turns", str(self.profile.min_turns)],
                        extra_env=self.env)
        bundle = _bundle(text)
        # The leak rule, by each session's real end (the universe's): a session still running at C
        # is left out, whether `--until` handed it over whole or cut at C.
        real_end = {s.id: s.end for s in universe}
        kept = []
        for entry in bundle["sessions"]:
            session = Session.from_entry(entry)
            end = max(session.end, real_end.get(session.id, session.end))
            if end < cutoff and self.profile.covers(session):
                kept.append(entry)
                self.history[session.id] = session
        self.extracted_until = cutoff
        if not kept:
            return
        bundle["sessions"] = kept
        out_dir = self.root / "clusters" / cutoff.strftime("%Y-%m-%d")
        self.run(["cluster", "--now", at, "--vault", str(self.root), "--out-dir", str(out_dir)],
                 stdin=json.dumps(bundle), extra_env=self.env)
        self.clock = max(self.clock or cutoff, cutoff)
        self.dirty = True

    def tick(self, at: datetime) -> None:
        if self.clock is not None and (at < self.clock or (at == self.clock and not self.dirty)):
            return
        self.run(["tick", "--vault", str(self.root), "--no-ai", "--now", format_instant(at)], extra_env=self.env)
        self.clock = at
        self.dirty = False

    def feed(self, session: Session, at: datetime) -> str:
        hook_input = {"session_id": session.id, "cwd": session.cwd, "source": "startup",
                      "hook_event_name": "SessionStart"}
        transcript = self.transcripts.get(session.id)
        if transcript is not None:
            hook_input["transcript_path"] = str(transcript)
        env = {**self.env, "BRAIN_NOW": format_instant(at), "BRAIN_HOOK_STATE_DIR": str(self.hook_state)}
        return self.run(["hook", "session-start", "--brain-feed", str(self.root / "brain-feed"), "--format", "text"],
                        stdin=json.dumps(hook_input), extra_env=env)

    def recall(self, session: Session, at: datetime, prompts: Sequence[str] = ()) -> str:
        """:meth:`recall_blocks` joined: everything recall showed over the session."""
        return "\n\n".join(text for _, text in self.recall_blocks(session, at, prompts))

    def recall_blocks(self, session: Session, at: datetime, prompts: Sequence[str] = ()) -> tuple[tuple[int, str], ...]:
        """Prompt-time recall over the session's human prompts, in order, as ``brain hook prompt-submit``
        gives it: one hook session for all of them (an item is recalled at most once), at most
        :data:`RECALL_PROMPTS` prompts. (index of the prompt in ``prompts``, what the hook added) for
        each prompt that got something. Without ``prompts``, the bundle's first prompt."""
        if not prompts:
            first = str(session.entry.get("first_prompt") or "")
            prompts = (first,) if first.strip() else ()
        asked = [(k, p) for k, p in enumerate(prompts) if p.strip()][:RECALL_PROMPTS]
        if not asked:
            return ()
        # A state folder of its own, emptied first: a rerun must not inherit what an earlier one recalled.
        state = self.root.parent / f"{self.root.name}-hook-state" / session.id
        shutil.rmtree(state, ignore_errors=True)
        state.mkdir(parents=True)
        env = {**self.env, "BRAIN_NOW": format_instant(at), "BRAIN_VAULT": str(self.root),
               "BRAIN_RECALL_ON_PROMPT": "true", "BRAIN_REFRESH_INTERVAL": "1000000",
               "BRAIN_HOOK_STATE_DIR": str(state)}
        blocks: list[tuple[int, str]] = []
        for index, prompt in asked:
            hook_input = {"session_id": f"eval-{session.id}", "cwd": session.cwd, "prompt": prompt,
                          "hook_event_name": "UserPromptSubmit"}
            out = self.run(["hook", "prompt-submit", "--brain-feed", str(self.root / "brain-feed")],
                           stdin=json.dumps(hook_input), extra_env=env)
            try:
                block = str(json.loads(out)["hookSpecificOutput"]["additionalContext"])
            except (ValueError, KeyError, TypeError):
                continue
            if block.strip():
                blocks.append((index, block))
        return tuple(blocks)

    def snapshot(self) -> tuple[Session, ...]:
        return tuple(ordered(self.history.values()))

    def handed_over(self, since: datetime, before: datetime, universe: Sequence[Session]) -> tuple[Session, ...]:
        """The sessions not in the vault whose SessionEnd hook left them for a session starting at
        ``before`` (:meth:`end_sessions`): Brain had them, so the baselines get them too."""
        return tuple(s for s in universe if s.id in self.ended and s.id not in self.history and since <= s.end < before)


def replay(
    run: BrainRunner, sources: LogSources, profile: Profile, universe: Sequence[Session],
    targets: Sequence[Session], *, mode: str, work: Path, progress: Callable[[int, int], None] | None = None,
    prompts: Mapping[str, Sequence[str]] | None = None, transcripts: Mapping[str, Path] | None = None,
) -> list[TargetRun]:
    """The feed each target would have received (FEED-METRIC §1, step 3), and what prompt-time recall
    adds at each of its human prompts (``prompts`` by session id; else the bundle's first prompt).
    ``transcripts``: Claude Code logs by session id, for the SessionEnd hook of the sessions that
    ended after the last extraction (docs/hooks.md)."""
    runs: list[TargetRun] = []
    builder: VaultBuilder | None = None
    for index, target in enumerate(targets):
        start = target.start
        cutoff = profile.cutoff(start)
        if mode == "fresh" or builder is None:
            builder = VaultBuilder(run, sources, profile, work / (f"vault-{index:04d}" if mode == "fresh" else "vault"),
                                   transcripts=transcripts or {})
        if mode == "fresh":
            builder.extract(cutoff, universe)
            builder.tick(start)
        else:
            events: list[tuple[datetime, int]] = [(cutoff, 0), (start - TICK_BEFORE, 1), (start, 1)]
            for at, what in sorted(events):
                if what == 0:
                    builder.extract(cutoff, universe)
                else:
                    builder.tick(at)
        builder.end_sessions(cutoff, start, universe)
        feed = builder.feed(target, start)
        recalled = builder.recall_blocks(target, start, (prompts or {}).get(target.id, ()))
        history = tuple(ordered((*builder.snapshot(), *builder.handed_over(cutoff, start, universe))))
        runs.append(TargetRun(target, cutoff, history, feed, recalled))
        if progress is not None:
            progress(index + 1, len(targets))
    return runs
