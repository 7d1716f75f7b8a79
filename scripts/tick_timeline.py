"""Where one tick's time goes: when each named function started and how long it ran (ms).

    .venv/bin/python scripts/tick_timeline.py VAULT NOW [FUNCTION ...]

Runs ``brain tick --no-ai`` at ``NOW`` on ``VAULT`` (which it changes: tick a copy) in this
process and prints, on stderr, one line per call of each named function as it returns, nested
calls indented, then the tick's wall and CPU time. A function is named by its module and name
(``brain.core.feed.build_feed``); every ``brain`` module that imported it by name sees the timed
one. Without names, the tick's phases (:data:`PHASES`). For a change of a few ms, compare runs
interleaved with the code before it: one tick's wall time varies by a fifth on a shared machine.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PHASES = (
    "brain.pipeline.tick._left_by_last", "brain.io.vault.read_view", "brain.core.keeper.decide",
    "brain.io.vault.found_listing", "brain.pipeline.tick._quiet_view", "brain.io.vault.scan",
    "brain.pipeline.keeper.plan_keeper", "brain.core.feed.build_feed", "brain.io.writer.apply_plan",
    "brain.pipeline.tick._verified", "brain.pipeline.tick._refresh_index", "brain.pipeline.tick._save_state",
)


def timed(function: Callable[..., Any], label: str, started: list[float], depth: list[int]) -> Callable[..., Any]:
    @functools.wraps(function)
    def run(*args: Any, **kwargs: Any) -> Any:
        begin = time.perf_counter()
        depth[0] += 1
        try:
            return function(*args, **kwargs)
        finally:
            depth[0] -= 1
            end = time.perf_counter()
            print(f"{'  ' * depth[0]}{label:<44} start {1000 * (begin - started[0]):8.1f}  ms {1000 * (end - begin):8.1f}",
                  file=sys.stderr)
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("vault", type=Path)
    parser.add_argument("now")
    parser.add_argument("functions", nargs="*", default=list(PHASES))
    args = parser.parse_args()

    from brain.core.timeutil import require_instant
    from brain.pipeline.tick import run_tick
    from brain.settings import Settings

    started, depth = [0.0], [0]
    for spec in args.functions:
        module_name, name = spec.rsplit(".", 1)
        original = getattr(importlib.import_module(module_name), name)
        wrapper = timed(original, f"{module_name.rsplit('.', 1)[-1]}.{name}", started, depth)
        for module in list(sys.modules.values()):
            if getattr(module, "__name__", "").startswith("brain") and getattr(module, name, None) is original:
                setattr(module, name, wrapper)
    settings = Settings(vault=args.vault)
    os.sync()  # as the bench does: the last tick's writes are on disk, not this one's to pay for
    started[0], cpu = time.perf_counter(), time.process_time()
    # As `brain tick` runs it: the process leaves once the report is out (what the bench times).
    report = run_tick(settings, require_instant(args.now), no_ai=True, dry_run=False, process_ends=True)
    print(f"tick {1000 * (time.perf_counter() - started[0]):.1f} ms wall, {1000 * (time.process_time() - cpu):.1f} ms "
          f"CPU; quiet={bool(report.keeper.quiet)}, written={len(report.result.written)}", file=sys.stderr)


if __name__ == "__main__":
    main()
