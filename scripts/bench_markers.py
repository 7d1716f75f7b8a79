"""Marker parsing on pathological notes (issue 12 items 9, 14): seconds per parse.

    .venv/bin/python scripts/bench_markers.py [--sizes 200000,1200000] [--budget 120]

Shapes: thousands of ``<!--`` that never close (with and without ``@``), one unclosed
``<!-- @todo`` before a real signal, backtick runs of growing length, a long attribute list,
and a 5 MB note of pasted logs. A shape whose first parse exceeds ``--budget`` seconds is
reported as such instead of being waited for.
"""

from __future__ import annotations

import argparse
import multiprocessing
import time

from brain.core import markers


def shapes(size: int) -> dict[str, str]:
    unit_plain = "text <!-- never closed\n"
    unit_at = "<!-- @todo priority=1\n"
    runs, width = [], 1
    while sum(len(r) for r in runs) < size:
        runs.append("`" * width + " a ")
        width += 1
    attrs = "<!-- @todo " + " ".join(f"k{i}=v{i}" for i in range(size // 10)) + " -->\nx\n<!-- @/todo -->\n"
    return {
        "unclosed <!--": unit_plain * (size // len(unit_plain)),
        "unclosed <!-- @todo": unit_at * (size // len(unit_at)),
        "unclosed + signal": unit_at * (size // len(unit_at))
        + "<!-- @signal severity=critical source=x -->\nboom\n<!-- @/signal -->\n",
        "backtick runs": "".join(runs) + " <!-- @hot -->",
        "long attribute list": attrs,
        "pasted log": ("2026-05-01T00:00:00Z INFO <!-- request id=42 --> ok `x`\n" * (size // 56)),
    }


def _time(text: str, queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    start = time.perf_counter()
    markers.parse(text)
    queue.put(time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="200000,1200000,5000000")
    parser.add_argument("--budget", type=float, default=60.0)
    args = parser.parse_args()
    for size in (int(s) for s in args.sizes.split(",")):
        for name, text in shapes(size).items():
            queue: multiprocessing.Queue = multiprocessing.Queue()  # type: ignore[type-arg]
            proc = multiprocessing.Process(target=_time, args=(text, queue))
            proc.start()
            proc.join(args.budget)
            if proc.is_alive():
                proc.terminate()
                proc.join()
                shown = f"> {args.budget:.0f} s (stopped)"
            else:
                shown = f"{queue.get():.3f} s"
            print(f"{len(text) / 1e6:6.2f} MB  {name:22s} {shown}", flush=True)


if __name__ == "__main__":
    main()
