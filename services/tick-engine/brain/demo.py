"""The demo vault: real session fixtures -> ``extract`` -> ``cluster`` (``make demo``).

:func:`build_demo` creates the compartment folders, extracts every session of the fixture
tree (``claude-code/`` as the projects folder, ``codex/sessions/`` as the Codex folder, a
window far enough back to hold them all, at least one human turn) and clusters them into
``<vault>/clusters/<date of now>/`` through the same pipeline, lock and journaled writer as
the daily job. Running it twice changes nothing. ``make demo`` then runs the tick:

    python -m brain.demo --vault demo-vault --fixtures ../shared/fixtures/sessions
    brain tick --vault demo-vault --no-ai --now 2026-05-12T06:00:00Z
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from brain.core.timeutil import iso, require_instant
from brain.core.vocab import COMPARTMENTS
from brain.settings import Settings

#: The demo's clock: just after the newest fixture session, so recent arcs are still warm.
DEMO_NOW = "2026-05-12T06:00:00Z"
#: Window start that holds every fixture session.
DEMO_SINCE = "2000-01-01T00:00:00Z"
DEFAULT_FIXTURES = Path(__file__).resolve().parents[3].parent / "shared" / "fixtures" / "sessions"


def build_demo(vault: Path, fixtures: Path, now: datetime) -> dict[str, Any]:
    """Build (or refresh) the demo vault; returns the cluster report as a dict."""
    from brain.pipeline.cluster import run_cluster
    from brain.pipeline.extract import extract

    for rel in (*COMPARTMENTS, ".brain"):
        (vault / rel).mkdir(parents=True, exist_ok=True)
    settings = Settings(
        vault=vault,
        projects_dir=fixtures / "claude-code",
        codex_dir=fixtures / "codex" / "sessions",
        since=DEMO_SINCE,
        min_turns=1,
    )
    bundle = extract(settings, now)
    report = run_cluster(settings, now, bundle=bundle.to_json(), out_dir=vault / "clusters" / iso(now)[:10],
                         vault=vault, dry_run=False)
    result = report.as_dict()
    result["extract"] = {"sessions": len(bundle.sessions), "stats": bundle.stats}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description="Build the demo vault from the session fixtures.")
    parser.add_argument("--vault", type=Path, required=True)
    parser.add_argument("--fixtures", type=Path, default=DEFAULT_FIXTURES)
    parser.add_argument("--now", default=DEMO_NOW)
    args = parser.parse_args()
    if not (args.fixtures / "claude-code").is_dir():
        sys.exit(f"Error: session fixtures not found ({args.fixtures})")
    result = build_demo(args.vault, args.fixtures, require_instant(args.now, what="--now"))
    print(json.dumps(result, indent=2, ensure_ascii=False))
    print(f"demo vault: {len(result['created'])} arcs created, {len(result['updated'])} updated from "
          f"{result['extract']['sessions']} sessions in {args.vault}", file=sys.stderr)


if __name__ == "__main__":
    main()
