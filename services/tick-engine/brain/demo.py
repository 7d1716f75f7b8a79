"""The demo (``make demo``): real session fixtures -> ``brain extract | brain cluster`` -> tick -> feed.

Everything runs through the ``brain`` command a user runs, with its defaults (every agent,
``--min-turns 1``): ``brain init``, ``brain extract … | brain cluster …`` as a real pipe,
``brain tick --no-ai``, then ``brain hook session-start --format text`` for a session starting
in one fixture project. What is printed is a short summary of the vault and the feed that
session would be given, not the JSON reports.

The clock is pinned (``--now``, default just after the newest fixture session) so the demo is
reproducible; the summary says so, because a tick run later without ``--now`` ages every arc
to today's date.

    python -m brain.demo --vault demo-vault --fixtures ../shared/fixtures/sessions
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from brain.core import frontmatter
from brain.core.timeutil import iso, require_instant

#: The demo's clock: just after the newest fixture session, so recent arcs are still warm.
DEMO_NOW = "2026-05-12T06:00:00Z"
#: Window start that holds every fixture session.
DEMO_SINCE = "2000-01-01T00:00:00Z"
#: The project whose feed the demo shows (claude-code-log: two arcs, lessons, a decision).
DEMO_CWD = "/Users/dain/workspace/claude-code-log"
DEFAULT_FIXTURES = Path(__file__).resolve().parents[3].parent / "shared" / "fixtures" / "sessions"


class DemoError(RuntimeError):
    """A step of the demo failed; the message names the command."""


def _brain() -> list[str]:
    return [sys.executable, "-m", "brain"]


def _env() -> dict[str, str]:
    # The demo must not pick up the user's own vault, logs or LLM from the environment.
    return {k: v for k, v in os.environ.items() if not k.startswith("BRAIN_")}


def _run(args: list[str], *, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*_brain(), *args], input=stdin, capture_output=True, text=True, env=_env(), check=False)
    if done.returncode != 0:
        raise DemoError(f"brain {' '.join(args[:2])} exited {done.returncode}: {done.stderr.strip()[-400:]}")
    return done


def build(vault: Path, fixtures: Path, now: str) -> dict[str, Any]:
    """``brain init``, ``brain extract | brain cluster`` and ``brain tick --no-ai``; what they reported."""
    _run(["init", "--vault", str(vault)])
    extract_cmd = [*_brain(), "extract", "--projects-dir", str(fixtures / "claude-code"),
                   "--codex-dir", str(fixtures / "codex" / "sessions"), "--since", DEMO_SINCE, "--now", now]
    cluster_cmd = [*_brain(), "cluster", "--out-dir", str(vault / "clusters" / now[:10]), "--vault", str(vault),
                   "--now", now]
    with subprocess.Popen(extract_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env()) as producer:
        assert producer.stdout is not None
        consumer = subprocess.run(cluster_cmd, stdin=producer.stdout, capture_output=True, text=True, env=_env(),
                                  check=False)
        producer.stdout.close()
        extract_log = producer.stderr.read().decode("utf-8", "replace") if producer.stderr else ""
        producer.wait()
    if producer.returncode != 0 or consumer.returncode != 0:
        raise DemoError(f"brain extract | brain cluster failed: {(extract_log + consumer.stderr).strip()[-400:]}")
    tick = _run(["tick", "--vault", str(vault), "--no-ai", "--now", now, "--json"])
    return {
        "extract": extract_log.strip().splitlines()[-1:] or [""],
        "cluster": json.loads(consumer.stdout),
        "tick": json.loads(tick.stdout) if tick.stdout.strip().startswith("{") else {},
    }


def feed_for(vault: Path, cwd: str, now: str) -> str:
    """What ``brain hook session-start --format text`` gives a session starting in ``cwd``."""
    hook_input = json.dumps({"session_id": "demo", "cwd": cwd, "source": "startup"})
    done = _run(["hook", "session-start", "--brain-feed", str(vault / "brain-feed"), "--format", "text",
                 "--now", now, "--cwd", cwd], stdin=hook_input)
    return done.stdout.strip()


def arcs(vault: Path) -> list[dict[str, Any]]:
    """The frontmatter of every arc in the vault, with its body's lesson and decision counts."""
    found: list[dict[str, Any]] = []
    for path in sorted(vault.rglob("*.md")):
        if any(part.startswith(".") for part in path.relative_to(vault).parts) or "brain-feed" in path.parts:
            continue
        document = frontmatter.split(path.read_text(encoding="utf-8"))
        if document.frontmatter is None:
            continue
        meta = frontmatter.load(document.frontmatter)
        if "cluster_id" in meta:
            meta["_lessons"] = document.body.count("<!-- @lesson ")
            meta["_decisions"] = document.body.count("<!-- @decision ")
            meta["_folder"] = path.parent.relative_to(vault).as_posix()
            found.append(meta)
    return found


def summary(vault: Path, report: dict[str, Any], now: str, cwd: str) -> str:
    cluster = report["cluster"]
    found = arcs(vault)
    sessions = sum(len(item.get("sessions", [])) for item in cluster.get("created", []))
    lines = [
        f"Demo vault: {vault}/  (open it in Obsidian)",
        f"  brain extract  → {report['extract'][0].removeprefix('extract: ')}",
        f"  brain cluster  → {len(cluster.get('created', []))} arcs from {sessions} sessions in "
        f"{cluster.get('out_dir', '')}/",
        f"  brain tick --no-ai → feed in {vault}/brain-feed/",
        "",
        "Arcs by project (title · sessions · lessons / decisions · open errors):",
    ]
    by_project: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for meta in found:
        by_project[str(meta.get("project") or "unknown")].append(meta)
    for project in sorted(by_project):
        for meta in sorted(by_project[project], key=lambda m: str(m.get("last_active", "")), reverse=True):
            raw = meta.get("activity")
            activity: dict[str, Any] = raw if isinstance(raw, dict) else {}
            errors = len(meta.get("open_errors") or [])
            scripted = " · scripted" if meta.get("headless") else ""
            lines.append(f"  {project[:24]:<24} {str(meta.get('title', ''))[:60]:<60} · "
                         f"{activity.get('sessions', 0)} · {meta['_lessons']}/{meta['_decisions']} · {errors}{scripted}")
    lines += [
        "",
        f"The clock is pinned at {now} (just after the newest fixture session): every command",
        "above ran with --now. A tick run later without --now ages these arcs to today's date and",
        "graduates them; run `make demo` again, or pass --now, to see the feed as it was.",
        "",
        f"The feed a session starting in {cwd} is given (brain hook session-start --format text):",
        "─" * 78,
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description="Build the demo vault from the session fixtures and show its feed.")
    parser.add_argument("--vault", type=Path, required=True)
    parser.add_argument("--fixtures", type=Path, default=DEFAULT_FIXTURES)
    parser.add_argument("--now", default=DEMO_NOW)
    parser.add_argument("--cwd", default=DEMO_CWD, help="The project folder whose session-start feed is shown.")
    args = parser.parse_args()
    if not (args.fixtures / "claude-code").is_dir():
        sys.exit(f"Error: session fixtures not found ({args.fixtures})")
    now = iso(require_instant(args.now, what="--now"))
    try:
        report = build(args.vault, args.fixtures.resolve(), now)
        print(summary(args.vault, report, now, args.cwd))
        print(feed_for(args.vault, args.cwd, now) or "(the hook printed nothing: no feed for this project yet)")
    except DemoError as exc:
        sys.exit(f"Error: {exc}")


if __name__ == "__main__":
    main()
