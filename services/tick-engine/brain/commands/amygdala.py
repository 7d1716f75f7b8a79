"""``brain amygdala``: the Redis Streams consumer (SPEC §11); a thin layer over brain.io.amygdala."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import typer

from brain.commands._common import (
    EXIT_LOCKED,
    BrainError,
    NowOpt,
    UsageError,
    VaultOpt,
    require_vault,
    resolve_now,
    run,
    settings_from,
)

HELP = """Consume alarms from Redis Streams into amygdala/ and brain-feed/amygdala-active.md.

Reads the streams of BRAIN_AMYGDALA_STREAMS (default: the brain's own stream) with a consumer
group, writes one amygdala/<alarm>.md per active alarm, and clears an alarm on signal.cleared or
after BRAIN_AMYGDALA_CLEAR_MINUTES of silence. Any producer's event raises one when its severity is
critical or nuclear (node.down severity=critical), or, without a severity, when its name and text
say so (down, outage, data loss...). The brain's own tick events never raise an alarm.
See docs/amygdala.md for the event format.

--once processes what is waiting (including messages a crashed consumer left pending), prints a
JSON summary on stdout and exits; --continuous (the default) runs until SIGTERM or Ctrl-C.

Example:

    brain amygdala --vault ~/vault --redis-url redis://localhost:6379/0 --once
"""


def register(app: typer.Typer) -> None:
    @app.command("amygdala", help=HELP)
    def amygdala(
        vault: Path | None = VaultOpt,
        redis_url: str | None = typer.Option(
            None, "--redis-url", help="Redis URL, e.g. redis://host:6379/0 [env: BRAIN_REDIS_URL]."
        ),
        once: bool = typer.Option(False, "--once", help="Process what is waiting, then exit."),
        continuous: bool = typer.Option(False, "--continuous", help="Run until SIGTERM / SIGINT (the default)."),
        now: str | None = NowOpt,
    ) -> None:
        def body() -> int:
            if once and continuous:
                raise UsageError("choose one of --once and --continuous")
            settings = settings_from(vault=vault, redis_url=redis_url, now=now)
            vault_path = require_vault(settings)
            if not settings.redis_url:
                raise UsageError("no Redis URL", "use --redis-url URL or set BRAIN_REDIS_URL")
            fixed = resolve_now(settings) if settings.now else None

            from brain.commands._common import log
            from brain.core.timeutil import wall_clock
            from brain.io.amygdala import AmygdalaConsumer, AmygdalaError, AmygdalaLocked

            consumer = AmygdalaConsumer(
                settings, vault_path, now=(lambda: fixed) if fixed is not None else wall_clock, log=log
            )
            try:
                if once:
                    import json

                    report = consumer.run_once()
                    typer.echo(json.dumps(report.as_dict(), sort_keys=True))
                else:
                    with _stop_on_signals(consumer.stop):
                        consumer.run_continuous()
            except AmygdalaLocked as exc:
                raise BrainError("amygdala consumer", str(exc), exit_code=EXIT_LOCKED) from None
            except AmygdalaError as exc:
                raise BrainError("amygdala consumer", str(exc)) from None
            return 0

        run(body)


@contextlib.contextmanager
def _stop_on_signals(stop: Callable[[], None]) -> Iterator[None]:
    """SIGTERM / SIGINT ask the consumer to stop after the batch in hand (no partial writes)."""
    import signal

    def handler(signum: int, frame: object) -> None:
        stop()

    saved = {signum: signal.signal(signum, handler) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for signum, previous in saved.items():
            signal.signal(signum, previous)
