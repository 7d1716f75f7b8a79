"""The amygdala over Redis Streams (SPEC §11), effects part: the consumer and the tick's publisher.

**Consumer** (:class:`AmygdalaConsumer`, behind ``brain amygdala``): one consumer group
(``amygdala_group``) over the streams of ``amygdala_streams`` (comma list; empty: the brain's
own ``amygdala_stream``). Per batch of messages: validate (:func:`brain.core.amygdala.parse_event`),
update the active alarms, write ``amygdala/<alarm>.md``, ``brain-feed/amygdala-active.md`` and
``.brain/amygdala-state.json`` (each atomically, in that order), and only then ``XACK``. A
consumer killed anywhere leaves its messages pending; the next start reads its own pending
messages first and ``XAUTOCLAIM`` s those another consumer left idle. Processing is idempotent,
so a message handled twice leaves one alarm file. One consumer per vault (an ``flock`` on
``.brain/amygdala.lock``).

**Publisher** (:func:`publish_signal_changes`, called by the tick): diffs the open critical /
nuclear signals against ``.brain/amygdala-published.json`` and adds one message per state
change to ``amygdala_stream``.

``redis`` is imported lazily: nothing here costs anything on the hook's start-up path.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brain.core import amygdala as core
from brain.core.amygdala import Alarm, AlarmChange, IgnoredEvent, PublishedSignal, SignalEvent
from brain.io.atomic import atomic_write, confined
from brain.settings import Settings

if TYPE_CHECKING:
    from redis import Redis

__all__ = [
    "AmygdalaConsumer",
    "AmygdalaError",
    "AmygdalaLocked",
    "AmygdalaUnavailable",
    "ConsumeReport",
    "PublishReport",
    "PublishedSignal",
    "SentEvent",
    "SignalEvent",
    "consumer_streams",
    "publish_signal_changes",
]

ALARM_STATE_FILE = ".brain/amygdala-state.json"
#: How long an alarm write waits for a running tick to release the vault lock.
LOCK_WAIT_SECONDS = 120.0
PUBLISHED_STATE_FILE = ".brain/amygdala-published.json"
LOCK_FILE = ".brain/amygdala.lock"

#: Messages pending (delivered, never acknowledged) for this long are reclaimed from the
#: consumer that took them. Proposed setting: ``amygdala_reclaim_idle_seconds`` (60).
RECLAIM_MIN_IDLE_MS = 60_000
#: How often the continuous consumer looks for abandoned messages.
RECLAIM_EVERY_SECONDS = 30.0
#: XREADGROUP BLOCK timeout: also the longest a SIGTERM waits for the loop to notice it.
BLOCK_MS = 1_000
BATCH_COUNT = 100
RECONNECT_MIN_SECONDS = 0.5
RECONNECT_MAX_SECONDS = 30.0
#: The tick's stream is trimmed (approximately) to this many messages.
STREAM_MAXLEN = 10_000
CONNECT_TIMEOUT_SECONDS = 3.0


class AmygdalaError(Exception):
    """The consumer cannot run (configuration, lock, Redis)."""


class AmygdalaUnavailable(AmygdalaError):
    """Redis could not be reached."""


class AmygdalaLocked(AmygdalaError):
    """Another consumer holds the vault's amygdala lock."""


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def consumer_streams(settings: Settings) -> list[str]:
    """The streams the consumer reads: ``amygdala_streams`` (comma list) or ``amygdala_stream``."""
    names: list[str] = []
    for part in (settings.amygdala_streams or "").split(","):
        name = part.strip()
        if name and name not in names:
            names.append(name)
    return names or [settings.amygdala_stream]


def _connect(url: str, *, socket_timeout: float) -> Redis:
    """A client that fails fast: our own loops decide about retries (a retried XADD could duplicate)."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    try:
        return redis.Redis.from_url(
            url,
            socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
            socket_timeout=socket_timeout,
            retry=Retry(NoBackoff(), 0),
        )
    except ValueError as exc:
        raise AmygdalaUnavailable(f"bad Redis URL: {exc}") from None


def _transient_errors() -> tuple[type[Exception], ...]:
    """Errors that mean "Redis is away" (retry); a disk error is not one of them (it propagates)."""
    import redis.exceptions as rex

    return (rex.ConnectionError, rex.TimeoutError)


def _read_json(path: Path) -> tuple[object, str | None]:
    """The JSON in ``path`` (None when missing), and a problem when it could not be read."""
    try:
        return json.loads(path.read_bytes()), None
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as exc:
        return None, f"{path.name} unreadable ({exc}); starting from an empty state"


def _json_bytes(data: object) -> bytes:
    return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


@contextlib.contextmanager
def _consumer_lock(vault: Path) -> Iterator[None]:
    path = confined(vault, LOCK_FILE)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 512, 0).decode("utf-8", "replace").strip() or "unknown"
            raise AmygdalaLocked(f"another amygdala consumer holds {path} ({holder})") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}".encode(), 0)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


# --- the consumer's files ----------------------------------------------------------------


class AlarmStore:
    """The files the consumer owns: ``amygdala/<alarm>.md``, the active feed file, its state.

    Writes go in the order alarm files → feed file → state file, each atomic, so a crash
    leaves either the old or the new version of each, and re-processing repairs the rest.
    """

    def __init__(self, vault: Path, feed_dir: Path, *, clear_minutes: int, ttl_seconds: int):
        self.vault = vault
        self.feed_dir = feed_dir
        self.clear_minutes = clear_minutes
        self.ttl_seconds = ttl_seconds

    @property
    def state_path(self) -> Path:
        return confined(self.vault, ALARM_STATE_FILE)

    @property
    def feed_path(self) -> Path:
        try:  # the usual case, <vault>/brain-feed: confined to the vault
            inside = self.feed_dir.relative_to(self.vault)
        except ValueError:  # a feed folder elsewhere (--brain-feed): confined to that folder
            self.feed_dir.mkdir(parents=True, exist_ok=True)
            return confined(self.feed_dir, core.ACTIVE_FEED_NAME)
        return confined(self.vault, (inside / core.ACTIVE_FEED_NAME).as_posix())

    def load(self) -> tuple[dict[str, Alarm], str | None]:
        data, problem = _read_json(self.state_path)
        return core.alarms_from_json(data), problem

    def commit(self, before: core.Alarms, after: core.Alarms, *, repair: bool = False) -> list[str]:
        """Bring the files from ``before`` to ``after``; ``repair`` rewrites every active alarm.

        The vault files go through the tick's transaction (lock, journal, atomic, confined),
        waiting for a running tick to finish; a feed folder outside the vault is written as before.
        """
        from brain.core.plan import DeleteFile, Plan, WriteFile
        from brain.core.timeutil import wall_clock
        from brain.io.transaction import transaction

        plan = Plan()
        for alarm_id, alarm in sorted(after.items()):
            if repair or before.get(alarm_id) != alarm:
                text = core.render_alarm_file(alarm, clear_minutes=self.clear_minutes)
                plan.add(WriteFile(alarm.path, text.encode("utf-8"), owned=True, reason="alarm"))
        for alarm_id in sorted(set(before) - set(after)):
            plan.add(DeleteFile(core.alarm_path(alarm_id), owned=True, reason="alarm cleared"))
        feed = core.render_active_feed(after, ttl_seconds=self.ttl_seconds)
        try:
            feed_rel: str | None = (self.feed_dir.relative_to(self.vault) / core.ACTIVE_FEED_NAME).as_posix()
        except ValueError:
            feed_rel = None
        if feed_rel is not None:
            plan.add(DeleteFile(feed_rel, owned=True) if feed is None
                     else WriteFile(feed_rel, feed.encode("utf-8"), owned=True, reason="alarm feed"))
        touched: list[str] = []
        if plan:
            stamp = wall_clock()
            with transaction(self.vault, "amygdala", f"{stamp:%Y%m%dT%H%M%S%f}Z-amygdala", stamp, recover=False,
                             wait_seconds=LOCK_WAIT_SECONDS) as tx:
                result = tx.apply(plan)
            for problem in result.problems:
                raise OSError(f"{problem.path}: {problem.message}")
            touched = [core.ACTIVE_FEED_NAME if path == feed_rel else path for path in result.written + result.deleted]
        if feed_rel is None:
            if feed is None:
                with contextlib.suppress(FileNotFoundError):
                    self.feed_path.unlink()
                    touched.append(core.ACTIVE_FEED_NAME)
            elif self._put(self.feed_path, feed.encode("utf-8")):
                touched.append(core.ACTIVE_FEED_NAME)
        self._put(self.state_path, _json_bytes(core.alarms_to_json(after)))
        return touched

    @staticmethod
    def _put(path: Path, data: bytes) -> bool:
        """Write ``data`` unless the file already holds exactly it; True when written."""
        try:
            if path.read_bytes() == data:
                return False
        except FileNotFoundError:
            pass
        atomic_write(path, data)
        return True


# --- the consumer ------------------------------------------------------------------------


@dataclass
class ConsumeReport:
    processed: int = 0
    raised: int = 0
    updated: int = 0
    cleared: int = 0
    ignored: int = 0
    own_events: int = 0
    reclaimed: int = 0
    reconnects: int = 0
    problems: list[str] = field(default_factory=list)
    active: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _entries(response: Any) -> list[tuple[str, list[tuple[Any, Any]]]]:
    """XREADGROUP's answer as ``[(stream, [(id, fields)])]``.

    RESP2 gives ``[[stream, [entries]]]``; RESP3 (``?protocol=3`` in the URL) gives
    ``{stream: [[entries]]}``.
    """
    if not response:
        return []
    if isinstance(response, Mapping):
        return [(core.field_text(s), list(ms[0]) if ms else []) for s, ms in response.items()]
    return [(core.field_text(s), list(ms or [])) for s, ms in response]


class AmygdalaConsumer:
    """Reads the amygdala streams and keeps ``amygdala/`` and ``amygdala-active.md`` current.

    ``now`` is the clock (injected: ``--now`` and the tests); ``stop()`` (from a signal handler
    or another thread) ends :meth:`run_continuous` after the batch in hand is written and
    acknowledged.
    """

    def __init__(
        self,
        settings: Settings,
        vault: Path,
        *,
        now: Callable[[], datetime],
        reclaim_idle_ms: int | None = None,
        block_ms: int = BLOCK_MS,
        max_backoff: float = RECONNECT_MAX_SECONDS,
        log: Callable[[str], None] = _stderr,
    ):
        if not settings.redis_url:
            raise AmygdalaError("no Redis URL (use --redis-url URL or set BRAIN_REDIS_URL)")
        self.url = settings.redis_url
        self.vault = vault
        self.streams = consumer_streams(settings)
        self.group = settings.amygdala_group
        self.consumer = settings.amygdala_consumer or socket.gethostname()
        self.clear_after = timedelta(minutes=settings.amygdala_clear_minutes)
        if reclaim_idle_ms is None:
            # Until the setting exists, fall back to the module default (see RECLAIM_MIN_IDLE_MS).
            seconds = getattr(settings, "amygdala_reclaim_idle_seconds", None)
            reclaim_idle_ms = int(seconds * 1000) if isinstance(seconds, int | float) else RECLAIM_MIN_IDLE_MS
        self.reclaim_idle_ms = reclaim_idle_ms
        self.block_ms = block_ms
        self.max_backoff = max_backoff
        self.now = now
        self.log = log
        self.store = AlarmStore(
            vault,
            settings.feed_dir,
            clear_minutes=settings.amygdala_clear_minutes,
            ttl_seconds=settings.feed_ttl_seconds,
        )
        self.alarms: dict[str, Alarm] = {}
        self.report = ConsumeReport()
        self._stop = threading.Event()

    # -- control --------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask the loop to end; safe from a signal handler (it only sets a flag)."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def run_once(self) -> ConsumeReport:
        """Process what is there (own pending, reclaimable, new), clear silent alarms, return."""
        with _consumer_lock(self.vault):
            self._load()
            client = _connect(self.url, socket_timeout=10.0)
            try:
                self._ensure_groups(client)
                self._drain_own_pending(client)
                self._reclaim(client)
                while not self.stopping and self._read_new(client, block_ms=None):
                    pass
            except _transient_errors() as exc:
                self._expire()
                raise AmygdalaUnavailable(f"cannot reach Redis: {exc}") from None
            finally:
                client.close()
            self._expire()
        return self._finish()

    def run_continuous(self) -> ConsumeReport:
        """Loop until :meth:`stop`; reconnect with bounded exponential backoff when Redis goes away."""
        import redis.exceptions as rex

        retryable: tuple[type[Exception], ...] = (*_transient_errors(), rex.ResponseError)
        with _consumer_lock(self.vault):
            self._load()
            self.log(f"amygdala: consuming {', '.join(self.streams)} as {self.group}/{self.consumer}")
            delay = RECONNECT_MIN_SECONDS
            while not self.stopping:
                client = _connect(self.url, socket_timeout=self.block_ms / 1000 + 10.0)
                try:
                    self._ensure_groups(client)
                    if self.report.reconnects:
                        self.log("amygdala: reconnected to Redis")
                    delay = RECONNECT_MIN_SECONDS
                    self._drain_own_pending(client)
                    self._reclaim(client)
                    last_reclaim = time.monotonic()
                    while not self.stopping:
                        self._read_new(client, block_ms=self.block_ms)
                        self._expire()
                        if time.monotonic() - last_reclaim >= RECLAIM_EVERY_SECONDS:
                            self._reclaim(client)
                            last_reclaim = time.monotonic()
                except retryable as exc:
                    if isinstance(exc, rex.ResponseError) and "NOGROUP" not in str(exc):
                        raise
                    # NOGROUP: the stream or group vanished (a Redis restarted without persistence).
                    self.report.reconnects += 1
                    self.log(f"amygdala: Redis unavailable ({exc}); retrying in {delay:.1f}s")
                    self._expire()  # silence still clears alarms while Redis is away
                    self._stop.wait(delay)
                    delay = min(delay * 2, self.max_backoff)
                finally:
                    client.close()
            self.log("amygdala: stopped")
        return self._finish()

    # -- steps ----------------------------------------------------------------------------

    def _load(self) -> None:
        self.alarms, problem = self.store.load()
        if problem:
            self._problem(problem)
        # Repair: an alarm file or the feed file lost while we were down is written again.
        self.store.commit(self.alarms, self.alarms, repair=True)

    def _finish(self) -> ConsumeReport:
        self.report.active = sorted(self.alarms)
        return self.report

    def _problem(self, message: str) -> None:
        self.report.problems.append(message)
        self.log(f"amygdala: {message}")

    def _ensure_groups(self, client: Redis) -> None:
        import redis.exceptions as rex

        for stream in self.streams:
            try:
                client.xgroup_create(stream, self.group, id="0", mkstream=True)
            except rex.ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise

    def _drain_own_pending(self, client: Redis) -> None:
        """Messages delivered to this consumer name before it died, never acknowledged."""
        for stream in self.streams:
            while not self.stopping:
                batches = _entries(client.xreadgroup(self.group, self.consumer, {stream: "0"}, count=BATCH_COUNT))
                messages = [m for _, ms in batches for m in ms]
                if not messages:
                    break
                self.report.reclaimed += len(messages)
                self._process(client, stream, messages)

    def _reclaim(self, client: Redis) -> None:
        """``XAUTOCLAIM`` messages another consumer left pending for ``reclaim_idle_ms``."""
        for stream in self.streams:
            start: Any = "0-0"
            for _ in range(10_000):  # bounded: the cursor always advances
                if self.stopping:
                    return
                answer = client.xautoclaim(
                    stream, self.group, self.consumer, self.reclaim_idle_ms, start_id=start, count=BATCH_COUNT
                )
                start, messages = answer[0], list(answer[1])
                if messages:
                    self.report.reclaimed += len(messages)
                    self._process(client, stream, messages)
                if core.field_text(start) == "0-0":
                    break

    def _read_new(self, client: Redis, *, block_ms: int | None) -> int:
        answer = client.xreadgroup(
            self.group, self.consumer, {stream: ">" for stream in self.streams}, count=BATCH_COUNT, block=block_ms
        )
        count = 0
        for stream, messages in _entries(answer):
            if messages:
                self._process(client, stream, messages)
                count += len(messages)
        return count

    def _process(self, client: Redis, stream: str, messages: Sequence[tuple[Any, Any]]) -> None:
        """Apply a batch, write its effect to disk, and only then acknowledge it."""
        now = self.now()
        before = self.alarms
        after: dict[str, Alarm] = dict(before)
        for raw_id, fields in messages:
            message_id = core.field_text(raw_id)
            parsed = core.parse_event(fields, stream=stream, message_id=message_id)
            self.report.processed += 1
            if isinstance(parsed, IgnoredEvent):
                self._ignored(parsed)
                continue
            after, change = core.apply_event(after, parsed, now)
            if change is not None:
                self._changed(change, stream, message_id)
        self.store.commit(before, after)
        self.alarms = after
        client.xack(stream, self.group, *[raw_id for raw_id, _ in messages])

    def _expire(self) -> None:
        after, cleared = core.expire_silent(self.alarms, self.now(), self.clear_after)
        if not cleared:
            return
        self.store.commit(self.alarms, after)
        self.alarms = after
        for change in cleared:
            self._changed(change, "", "")

    def _ignored(self, event: IgnoredEvent) -> None:
        if event.own:
            self.report.own_events += 1
            return
        self.report.ignored += 1
        self.log(f"amygdala: ignored {event.stream} {event.message_id}: {event.reason}")

    def _changed(self, change: AlarmChange, stream: str, message_id: str) -> None:
        setattr(self.report, change.kind, getattr(self.report, change.kind) + 1)
        where = f" ({stream} {message_id})" if message_id else ""
        self.log(f"amygdala: {change.kind} {change.alarm.alarm_id}: {change.reason}{where}")


# --- the publisher (used by the tick) ----------------------------------------------------


@dataclass(frozen=True)
class SentEvent:
    event: SignalEvent
    message_id: str


@dataclass(frozen=True)
class PublishReport:
    """What :func:`publish_signal_changes` did; ``error`` set means the tick reports a problem."""

    stream: str
    sent: tuple[SentEvent, ...] = ()
    unsent: tuple[SignalEvent, ...] = ()  # planned but not sent (dry run, or Redis failed)
    error: str | None = None
    warning: str | None = None
    skipped: str | None = None
    dry_run: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None

    def as_dict(self) -> dict[str, Any]:
        def event(e: SignalEvent) -> dict[str, str]:
            return {"event": e.event, "severity": e.severity, "source": e.source, "arc": e.arc}

        out: dict[str, Any] = {
            "stream": self.stream,
            "sent": [{**event(s.event), "id": s.message_id} for s in self.sent],
            "unsent": [event(e) for e in self.unsent],
        }
        for key in ("error", "warning", "skipped"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        if self.dry_run:
            out["dry_run"] = True
        return out


def publish_signal_changes(
    settings: Settings,
    vault: Path,
    signals: Sequence[PublishedSignal],
    tick_id: str,
    now: datetime,
    *,
    dry_run: bool = False,
    client: Redis | None = None,
) -> PublishReport:
    """Publish each raised, escalated or cleared critical / nuclear signal once (SPEC §11).

    The tick calls it once, after its writes, with every **open** ``critical`` / ``nuclear``
    signal of the vault (and, optionally, those it cleared in this tick, with severity
    ``resolved`` and the clearing reason as text)::

        from brain.io.amygdala import PublishedSignal, publish_signal_changes

        report = publish_signal_changes(
            settings, vault,
            [PublishedSignal(arc=cluster_id, source=source, severity=severity, text=redacted_text), ...],
            tick_id, now, dry_run=dry_run,
        )
        if report.error:
            problems.append(report.error)      # the tick still succeeds
        phases["amygdala"] = report.as_dict()

    The set is diffed against ``.brain/amygdala-published.json``
    (:func:`brain.core.amygdala.plan_signal_steps`); each change is one ``XADD`` to
    ``amygdala_stream`` with the fields ``v, event, severity, source, arc, text, tick_id, ts``,
    and the state file is updated right after each successful ``XADD``. When Redis fails,
    the changes not sent stay out of the state file, so the next tick sends them. Texts must
    already be redacted (SPEC §10). ``redis_url`` unset: nothing happens. ``dry_run``: the
    plan is returned as ``unsent``; no ``XADD``, no state write. ``client`` is for tests.
    """
    stream = settings.amygdala_stream
    if client is None and not settings.redis_url:
        return PublishReport(stream, skipped="BRAIN_REDIS_URL is not set")
    state_path = confined(vault, PUBLISHED_STATE_FILE)
    data, warning = _read_json(state_path)
    state = core.published_from_json(data)
    steps = core.plan_signal_steps(state, signals)
    planned = tuple(step.event for step in steps if step.event is not None)
    if dry_run:
        return PublishReport(stream, unsent=planned, warning=warning, dry_run=True)
    if not steps:
        return PublishReport(stream, warning=warning)

    import redis.exceptions as rex

    sent: list[SentEvent] = []
    own_client = client is None
    done = 0
    try:
        if client is None:
            assert settings.redis_url is not None
            client = _connect(settings.redis_url, socket_timeout=5.0)
        for step in steps:
            if step.event is not None:
                fields: dict[Any, Any] = step.event.fields(tick_id=tick_id, ts=now)
                message_id = client.xadd(stream, fields, maxlen=STREAM_MAXLEN, approximate=True)
                sent.append(SentEvent(step.event, core.field_text(message_id)))
            if step.after is None:
                state.pop(step.key, None)
            else:
                state[step.key] = step.after
            # Right after the XADD: a crash later in this loop never sends this change again.
            atomic_write(state_path, _json_bytes(core.published_to_json(state)))
            done += 1
    except (rex.RedisError, AmygdalaUnavailable) as exc:
        unsent = tuple(step.event for step in steps[done:] if step.event is not None)
        return PublishReport(
            stream, sent=tuple(sent), unsent=unsent, warning=warning, error=f"amygdala: cannot publish to Redis: {exc}"
        )
    finally:
        if own_client and client is not None:
            client.close()
    return PublishReport(stream, sent=tuple(sent), warning=warning)
