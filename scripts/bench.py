"""`make bench`: synthetic vaults of 1 000, 10 000 and 50 000 arcs, ticked at the real cadence.

Each arc carries what one written by ``brain cluster`` does (its cwd and branch, up to 40 files, 30
commands, errors, identifiers, the last prompt and state), so the feed's per-file work is measured.

For each size: a cold tick (no parse cache), a tick at the same instant, then 2 h, 24 h and
7 days later on the unchanged vault (the CronJob runs every 2 h), and one tick after 1 % of the
arcs were edited; then ``brain hook session-start`` in a known project's folder, as the agent
runs it. Every figure is printed next to the machine's own baseline (listing and stat-ing the
same files, the floor no tick can beat) and as a ratio to it, so runs on
different machines compare. Each tick runs in a fresh child process, so peak RSS is that of
the measured work. Beside the wall time, each tick's CPU time (its process's, plus its forked
children's): on a shared machine the wall time of one tick swings by a fifth from run to run,
its CPU time much less, so a change too small to see in the first shows in the second. The floor
is measured again just before each tick, and the ratio to it printed in brackets: the machine's
speed drifts over the minutes a run takes, and that ratio compares the tick with the floor of the
same minute.

``--reference COMMAND`` also times another implementation's tick (the one Brain set out to beat)
beside Brain's, each as a whole process on its own copy of each freshly generated vault: a cold
tick, then a second one on the vault it left, in turns, and prints Brain's time as a ratio to it.
The ratio holds across machines where absolute seconds do not.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

NOW = "2026-11-21T12:00:00Z"
BODY = textwrap.dedent("""\
    # {title}

    ## Ignition
    > Make the {topic} pipeline stop dropping events under load.

    ## Timeline
    - 2026-11-{day:02d} 09:12 — 14 turns, {tools} tool calls (Bash, Edit, Read)
    - 2026-11-{day:02d} 11:40 — 6 turns, 22 tool calls (Edit, Bash)

    ## Lessons
    <!-- @lesson -->
    Back-pressure beats retries for {topic}; measure before tuning.
    <!-- @/lesson -->

    ## Resolution
    Shipped behind a flag; the {topic} error rate fell from 2% to 0.1%.
    {extra}
    ## Edges
    <!-- @edge type=related target={edge} --> [[{edge}]]

    ## Source sessions
    - {session}
    """)
TOPICS = ["ingest", "auth", "billing", "search", "feed", "scheduler", "cache", "gateway", "etl", "vault"]
#: What a real arc's frontmatter carries besides its standing (CLUSTERS.md): the latest session's
#: cwd and branch, up to 60 files, 30 commands, errors, identifiers, the last prompt and state.
FOLDERS = ["src", "src/api", "src/core", "src/core/models", "src/workers", "tests", "tests/unit", "docs",
           "scripts", "deploy/helm", "web/components", "web/pages"]
COMMANDS = ["pytest", "pytest tests/unit", "git status", "git diff", "git log", "git commit", "make test", "make lint",
            "ruff check", "mypy", "npm test", "npm run build", "docker compose up", "kubectl get pods", "helm template",
            "uv run", "python -m {topic}", "curl", "rg", "ls", "cat", "sed", "gh pr create", "gh run view",
            "terraform plan", "go test", "cargo build", "jq", "psql", "redis-cli"]
ERRORS = ["AssertionError", "KeyError", "TimeoutError", "ECONNREFUSED", "ModuleNotFoundError", "TS2345", "ValueError"]


def _work(rng: random.Random, topic: str) -> str:
    """The frontmatter lines of where an arc's work stands, as ``brain cluster`` writes them."""
    home = f"/home/dev/work/{topic}"
    files = sorted({f"{rng.choice(FOLDERS)}/{topic}_{rng.randint(0, 40)}.py" for _ in range(rng.randint(3, 40))})
    if rng.random() < 0.2:  # a file of the project next door
        files.append(f"/home/dev/work/{rng.choice(TOPICS)}/src/shared_{rng.randint(0, 9)}.py")
    commands = rng.sample(COMMANDS, rng.randint(2, 30))
    errors = rng.sample(ERRORS, rng.randint(0, 3))
    lines = [f"cwd: {home}", f"branch: {rng.choice(['main', f'fix/{topic}-{rng.randint(1, 99)}', ''])!r}",
             "files:", *(f"- {f}" for f in files), "commands:", *(f"- {c.format(topic=topic)}" for c in commands),
             "open_errors:", *(f"- '{e}: {topic} step {rng.randint(1, 9)} failed'" for e in errors[:1]),
             "errors_met:", *(f"- {e}" for e in errors), "identifiers:",
             *(f"- {topic}_{word}" for word in rng.sample(["retry", "budget", "queue", "token", "shard", "lease"], 3)),
             f"last_prompt: run the {topic} tests again and fix what fails",
             f"last_state: 'The {topic} tests pass; the retry budget is now read from settings.'"]
    return "\n".join(lines) + "\n"


def generate(vault: Path, count: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    for rel in ("clusters", "frontal-lobe/conscious", "frontal-lobe/unconscious", "left/projects", "right/ideas",
                "pineal", "amygdala", "brain-feed", ".brain"):
        (vault / rel).mkdir(parents=True, exist_ok=True)
    ids = [f"2026-{1 + i % 11:02d}-{1 + i % 28:02d}-{TOPICS[i % 10]}-work-{i:05d}-{i * 7919 % 16**12:012x}"
           for i in range(count)]
    for i, cid in enumerate(ids):
        month, day = 1 + i % 11, 1 + i % 28
        recent = rng.random() < 0.03
        # Minutes spread like real session ends, so per-arc heat boundaries are spread over the day too.
        hour, minute = rng.randint(0, 23), rng.randint(0, 59)
        last = (f"2026-11-21T0{rng.randint(0, 9)}:{minute:02d}:00Z" if recent
                else f"2026-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:00Z")
        tools = rng.choice([3, 40, 120, 260, 1400])
        extra = ""
        roll = rng.random()
        if roll < 0.02:
            extra = f"<!-- @signal severity={rng.choice(['warning', 'critical'])} source={TOPICS[i % 10]}-{i} -->\n" \
                    f"{TOPICS[i % 10]} error budget burning.\n<!-- @/signal -->\n"
        elif roll < 0.03:
            extra = "<!-- @inject target=all -->\nPrefer small PRs this week.\n<!-- @/inject -->\n"
        sessions = [f"{i:08x}-{k:04x}-4000-8000-{rng.getrandbits(48):012x}" for k in range(rng.randint(1, 4))]
        front = (
            f"---\ncluster_id: {cid}\ntitle: {TOPICS[i % 10].title()} work {i}\nregion: "
            f"{'left-hemisphere' if i % 3 else 'right-hemisphere'}\nstatus: {'active' if recent else 'complete'}\n"
            f"heat: 0\ncreated: '2026-{month:02d}-{day:02d}T09:00:00Z'\nlast_active: '{last}'\nproject: {TOPICS[i % 10]}\n"
            f"agents:\n- claude-code\nsource_sessions:\n" + "".join(f"- {s}\n" for s in sessions)
            + f"activity:\n  sessions: {len(sessions)}\n  user_turns: 20\n  tool_calls: {tools}\n  errors: 1\n"
            f"  joy: {i % 2}\n  compactions: 0\nsynthesized: false\n" + _work(rng, TOPICS[i % 10]) + "---\n"
        )
        body = BODY.format(title=f"{TOPICS[i % 10].title()} work {i}", topic=TOPICS[i % 10], day=day, tools=tools,
                           extra=extra, edge=ids[(i + 1) % count], session=sessions[0])
        folder = vault / "clusters" / f"2026-{month:02d}-{day:02d}"
        folder.mkdir(exist_ok=True)
        (folder / f"{cid}.md").write_text(front + body, encoding="utf-8")
    # A cold tick meets an existing vault (no parse cache), not files written a second ago.
    old = time.time() - 3600
    for path in vault.rglob("*.md"):
        os.utime(path, (old, old))


CHILD = r"""
import json, resource, sys, time
from pathlib import Path
mode, vault = sys.argv[1], Path(sys.argv[2])
t0 = time.perf_counter()
if mode == "floor":
    from brain.io.vault import walk
    best = None
    for _ in range(3):
        t = time.perf_counter(); files = walk(vault); d = time.perf_counter() - t
        best = d if best is None else min(best, d)
    out = {"seconds": best, "files": len(files)}
else:
    from brain.settings import Settings
    from brain.core.timeutil import require_instant
    from brain.pipeline.tick import run_tick
    s = Settings(vault=vault)
    before = resource.getrusage(resource.RUSAGE_SELF)
    t = time.perf_counter()
    # As in the CronJob's `brain tick`, whose process leaves as soon as the report is out.
    report = run_tick(s, require_instant(sys.argv[3]), no_ai=True, dry_run=False, process_ends=True)
    d = time.perf_counter() - t
    after, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    out = {"seconds": d, "exit": report.exit_code, "phases": {k: v.get("ms") for k, v in report.phases.items()},
           "keeper": report.phases["keeper"], "changes": len(report.result.written) + len(report.result.moved),
           # CPU time, the tick's and its forked children's: steadier than wall time on a shared machine
           "cpu_s": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
           "children_cpu_s": children.ru_utime + children.ru_stime}
out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
# A cold tick forks children (brain/io/background.py): the largest one's peak, reported beside the tick's.
out["children_peak_rss_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps(out))
"""


def child(mode: str, vault: Path, *args: str) -> dict:
    # The CronJob's tick comes two hours after the last one, long after the kernel wrote back
    # what that one left in the page cache: flushed here, outside the measured child, so a
    # tick's durable writes (fsync, syncfs) pay for its own data, not the previous tick's.
    os.sync()
    result = subprocess.run([sys.executable, "-c", CHILD, mode, str(vault), *args], capture_output=True, text=True,
                            check=False)
    if result.returncode != 0:
        raise SystemExit(f"bench child failed: {result.stderr}")
    data: dict = json.loads(result.stdout)
    return data


def hook_wall(vault: Path, runs: int = 9) -> dict:
    """``brain hook session-start`` as Claude Code runs it (a subprocess, hook input on stdin) in a
    known project's folder: median and worst wall time, and whether it injected that project's feed."""
    env = {**os.environ, "BRAIN_VAULT": str(vault)}
    payload = json.dumps({"session_id": "bench", "cwd": "/home/dev/src/ingest", "source": "startup"})
    # The command the agents' hook settings name (docs/agents-wiring.md): the installed `brain` script.
    script = Path(sys.executable).with_name("brain")
    command = [str(script)] if script.is_file() else [sys.executable, "-m", "brain"]
    times, bare, project = [], [], False
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run([*command, "hook", "session-start", "--format", "text"],
                              input=payload, capture_output=True, text=True, env=env, check=False)
        times.append(time.perf_counter() - start)
        project = project or "# ingest" in done.stdout
        start = time.perf_counter()  # the hook's floor: this machine starting the interpreter and exiting
        subprocess.run([sys.executable, "-c", "pass"], capture_output=True, check=False)
        bare.append(time.perf_counter() - start)
    times.sort()
    bare.sort()
    return {"p50_s": times[len(times) // 2], "max_s": times[-1], "python_p50_s": bare[len(bare) // 2],
            "project_feed": project}


def cli_wall(vault: Path, now: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "brain", "tick", "--vault", str(vault), "--no-ai", "--now", now],
                   capture_output=True, check=True)
    return time.perf_counter() - start


#: (label, the --now of each tick). Each tick comes on the vault the one before it left. The
#: CronJob's tick is timed three times, 2 h apart, and reported by its median: one run of it on
#: this shared machine ranged from 0.36 to 0.55 s on the same 10 000 arcs.
CADENCE = (
    ("cold", (NOW,)),
    ("same instant", (NOW,)),
    ("+2 h", ("2026-11-21T14:00:00Z", "2026-11-21T16:00:00Z", "2026-11-21T18:00:00Z")),
    ("+24 h", ("2026-11-22T18:00:00Z",)),
    ("+7 d", ("2026-11-29T18:00:00Z",)),
)
CHANGED_AT = "2026-11-29T20:00:00Z"
#: The CronJob's tick as the CronJob runs it (a ``brain tick`` process: interpreter, imports, the
#: tick, exit), 2 h apart after the 1 % tick: the median of three.
CLI_TICKS = ("2026-11-29T22:00:00Z", "2026-11-30T00:00:00Z", "2026-11-30T02:00:00Z")


def floored_tick(vault: Path, now: str) -> dict:
    """A tick at ``now``, with the floor measured again just before it on the same files: the
    ratio to that floor (``floor_now_s``) holds the machine as it was at that minute, where the
    floor measured on the fresh vault may come from a faster or a slower one."""
    floor_now = child("floor", vault)["seconds"]
    return {**child("tick", vault, now), "floor_now_s": floor_now}


def touch_one_percent(vault: Path, seed: int = 11) -> int:
    """Append an operator line to 1 % of the arcs (as a day of real edits would)."""
    rng = random.Random(seed)
    arcs = sorted(p for p in vault.rglob("*.md") if ".brain" not in p.parts and "brain-feed" not in p.parts
                  and not p.name.startswith("_"))
    chosen = rng.sample(arcs, max(1, len(arcs) // 100))
    for path in chosen:
        with path.open("a", encoding="utf-8") as handle:
            handle.write("\nOperator note: checked again today.\n")
    return len(chosen)


def changed_tick(vault: Path, samples: int = 3) -> dict:
    """The tick after 1 % of the arcs changed, timed ``samples`` times from the same files (the
    vault is copied back in place between runs, sizes and mtimes kept, so every run is the same
    quiet tick) and reported by its median; the vault is left as the last run left it."""
    backup = vault.with_name(vault.name + "-before-change")
    shutil.copytree(vault, backup, symlinks=True)
    runs = []
    for sample in range(samples):
        if sample:
            shutil.rmtree(vault)
            shutil.copytree(backup, vault, symlinks=True)
        changed = touch_one_percent(vault)
        runs.append(floored_tick(vault, CHANGED_AT))
    shutil.rmtree(backup)
    median = sorted(runs, key=lambda run: run["seconds"])[len(runs) // 2]
    return {"label": f"1 % changed ({changed})", **median, "samples": sorted(run["seconds"] for run in runs)}


def process_wall(command: list[str]) -> float:
    """The wall time of ``command`` as a fresh process, after the bench's ``sync`` (:func:`child`)."""
    os.sync()
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench: {' '.join(command)} failed: {done.stderr[-2000:]}")
    return time.perf_counter() - start


def against_reference(vault: Path, template: str, rounds: int = 3) -> dict:
    """Brain's tick and another implementation's (``template``: its command line, ``{vault}`` for
    the vault) on copies of the freshly generated ``vault``, each as a whole process, in turns: a
    cold tick, then a second one on the vault it left. The other has no ``--now``: it runs on the
    wall clock, so Brain's ticks here run at the instant this comparison started (it decides what
    ages, graduates and cools), not at the bench's fixed one. Medians of ``rounds``."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    brain = [sys.executable, "-m", "brain", "tick", "--no-ai", "--now", now, "--vault"]
    runs: dict[str, list[float]] = {"reference cold": [], "brain cold": [], "reference again": [], "brain again": []}
    for _ in range(rounds):
        for who in ("reference", "brain"):
            copy = vault.with_name(f"{vault.name}-{who}")
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(vault, copy, symlinks=True)
            command = (shlex.split(template.replace("{vault}", str(copy))) if who == "reference"
                       else [*brain, str(copy)])
            runs[f"{who} cold"].append(process_wall(command))
            runs[f"{who} again"].append(process_wall(command))
            shutil.rmtree(copy)
    return {label: sorted(times)[len(times) // 2] for label, times in runs.items()} | {"now": now, "rounds": rounds}


def bench_vault(count: int, work: Path, reference: str | None = None) -> dict:
    vault = work / f"vault-{count}"
    if vault.exists():
        shutil.rmtree(vault)
    t = time.perf_counter()
    generate(vault, count)
    generated = time.perf_counter() - t
    compared = against_reference(vault, reference) if reference else None
    floor = child("floor", vault)
    ticks = []
    for label, instants in CADENCE:
        runs = sorted((floored_tick(vault, now) for now in instants), key=lambda run: run["seconds"])
        ticks.append({"label": label, **runs[len(runs) // 2], "samples": [run["seconds"] for run in runs]})
    ticks.append(changed_tick(vault))
    wall = cli_wall(vault, CHANGED_AT)
    cron = sorted(cli_wall(vault, now) for now in CLI_TICKS)
    return {"arcs": count, "generate_s": generated, "floor": floor, "ticks": ticks, "cli_wall_s": wall,
            "cli_2h_s": cron[len(cron) // 2], "cli_2h_samples": cron, "hook": hook_wall(vault),
            "reference": compared}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--keep", type=Path, default=None, help="keep the generated vaults in this folder")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--vaults-only", action="store_true", help="skip the extraction and AI benches")
    parser.add_argument("--reference", metavar="COMMAND",
                        help="another tick's command line, {vault} for the vault: timed cold and again beside "
                             "Brain's on copies of each generated vault (e.g. 'python brain_tick.py --vault {vault} "
                             "--brain-feed {vault}/brain-feed --no-ai')")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="brain-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        for size in (int(x) for x in args.sizes.split(",")):
            results.append(bench_vault(size, work, args.reference))
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    extras = []
    for name in () if args.vaults_only else ("brain.bench_extract", "brain.bench_ai", "brain.bench_search"):
        try:
            module = __import__(name, fromlist=["run"])
        except ModuleNotFoundError:
            continue
        extras.append(module.run())
    if args.json:
        print(json.dumps({"vaults": results, "extras": extras}, indent=2))
        return
    print(f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}")
    print(f"{'arcs':>6} {'tick':<22} {'s':>8} {'x floor':>9} {'cpu s':>12} {'peak RSS':>9} {'parsed':>7} "
          f"{'changes':>8}  phases ms")
    for r in results:
        floor_s = r["floor"]["seconds"]
        print(f"{r['arcs']:>6} {'floor (list + stat)':<22} {floor_s:>8.3f} {1:>8.1f}x {'':>12} "
              f"{r['floor']['peak_rss_mb']:>7.0f}MB")
        for tick in r["ticks"]:
            keeper = tick["keeper"]
            samples = tick.get("samples", [])
            spread = f" (median of {'/'.join(f'{x:.3f}' for x in samples)})" if len(samples) > 1 else ""
            if tick.get("floor_now_s"):  # the floor measured just before this very run
                spread += f" [{tick['seconds'] / tick['floor_now_s']:.1f}x the floor then, {tick['floor_now_s']:.3f} s]"
            # the tick's own CPU time, + its children's when it forked
            cpu = f"{tick['cpu_s']:.3f}" + (f"+{tick['children_cpu_s']:.2f}" if tick["children_cpu_s"] else "")
            print(f"{'':>6} {tick['label']:<22} {tick['seconds']:>8.3f} {tick['seconds'] / floor_s:>8.1f}x {cpu:>12} "
                  f"{tick['peak_rss_mb']:>7.0f}MB {keeper.get('parsed', 0):>7} {tick['changes']:>8}  "
                  + " ".join(f"{k}={v}" for k, v in tick["phases"].items() if v is not None) + spread
                  + (f"; forked children peak at {tick['children_peak_rss_mb']:.0f}MB"
                     if tick.get("children_peak_rss_mb") else ""))
        print(f"{'':>6} {'CLI wall (same instant)':<22} {r['cli_wall_s']:>8.3f}")
        print(f"{'':>6} {'CLI wall (+2 h)':<22} {r['cli_2h_s']:>8.3f} {r['cli_2h_s'] / floor_s:>8.1f}x  "
              f"brain tick as the CronJob runs it (median of {'/'.join(f'{x:.3f}' for x in r['cli_2h_samples'])})")
        compared = r["reference"]
        if compared:
            for when in ("cold", "again"):
                ours, theirs = compared[f"brain {when}"], compared[f"reference {when}"]
                print(f"{'':>6} {f'vs reference, {when}':<22} {ours:>8.3f} {ours / theirs:>8.2f}x  the reference "
                      f"{theirs:.3f} s; both as processes at {compared['now']}, median of {compared['rounds']}")
        hook = r["hook"]
        print(f"{'':>6} {'hook session-start':<22} {hook['p50_s']:>8.3f}  p50 of 9 subprocess runs, worst "
              f"{hook['max_s']:.3f} s, {'the project feed' if hook['project_feed'] else 'NO project feed'}; "
              f"python -c pass {hook['python_p50_s']:.3f} s")
    for extra in extras:
        for line in extra.get("lines", []):
            print(line)


if __name__ == "__main__":
    main()
