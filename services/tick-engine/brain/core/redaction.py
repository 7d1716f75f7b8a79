"""Secret redaction (SPEC §10): everything that leaves a session log passes through here.

:func:`redact` replaces credentials with ``[REDACTED]``. It runs on every bundle string,
arc stub, prompt and feed file, so it is built for speed: a handful of compiled patterns,
each anchored on a literal (``sk-``, ``ghp_``, ``://``, ``secret``, ``KEY`` ...) so the
regex engine skips ahead with a fast literal search, and each guarded by a substring
pre-check so text without any trigger costs a few ``in`` tests. Replacement keeps the
non-secret context (``password=``, ``Authorization: Bearer``, ``postgres://user:``) and
swaps only the secret itself.

What it covers (gitleaks-style, see ``reference/session-formats.md`` §5): private-key
blocks; Anthropic, OpenAI, GitHub, GitLab, Slack (tokens and webhooks), Discord webhooks,
AWS (access key ids, and the secret next to ``aws_secret_access_key``), Google (API keys,
OAuth tokens and client secrets), Stripe, Hugging Face, npm, PyPI, DigitalOcean, Shopify,
SendGrid and Telegram bot tokens; JWTs; bearer / basic ``Authorization`` values; passwords
in URL userinfo (the whole ``user:password``, reserved characters such as ``@`` included); ``--password x`` style flags; and ``KEY=value`` / ``key: value`` /
``"key": "value"`` assignments whose key names a secret (``password``, ``passwd``,
``token``, ``secret``, ``api_key``, ``apiKey``, ``private_key``, ``access_key``,
``client_secret``, and upper-case ``*_SECRET``, ``*_TOKEN``, ``*_KEY``, ``*_PASS*``,
``*_PAT``, ``*_PWD`` environment names).

Placeholders are left alone, so redaction is idempotent and never rewrites text that
sanitised fixtures already carry: ``[REDACTED]``, ``REDACTED_API_KEY``,
``[REDACTED_SIGNATURE]``, ``[REDACTED_TEXT len=… sha=…]``, ``${VAR}``, ``$VAR``,
``<your-key>``, ``os.environ[...]``, ``xxxx``, ``****``, plain numbers (``max_tokens=4096``)
and type names (``password: string``). Pure: no I/O.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from brain.core.text import repair_surrogates


class _Lazy:
    """A pattern compiled on first use. A process redacts text holding few of the needles
    (:func:`needles`), and compiling every pattern up front cost each ``brain`` process 20 ms."""

    __slots__ = ("_compiled", "flags", "pattern")

    def __init__(self, pattern: str, flags: int = 0):
        self.pattern, self.flags = pattern, flags
        self._compiled: re.Pattern[str] | None = None

    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self.pattern, self.flags)
        return self._compiled

    def sub(self, repl: Callable[[re.Match[str]], str], text: str) -> str:
        return self.compiled().sub(repl, text)

    def match(self, text: str) -> re.Match[str] | None:
        return self.compiled().match(text)

    def search(self, text: str) -> re.Match[str] | None:
        return self.compiled().search(text)

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        return self.compiled().finditer(text)

REDACTED = "[REDACTED]"

_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")

# Values that are placeholders, references, types or counts, never secrets.
_PLACEHOLDER = _Lazy(
    r"""^(?:
        .*REDACTED.*                                  # REDACTED_API_KEY, [REDACTED], redacted://...
      | \$.* | %\(.* | \{\{.* | <.*> | \[.*\]         # $VAR, ${VAR}, %(x)s, {{ x }}, <your-key>, [x]
      | [xX*•.\#_-]{3,} | (?:x{3,}|X{3,})[-_A-Za-z0-9]*   # xxxx, ****, xxx-your-key
      | (?:your|example|dummy|fake|sample|placeholder)[-_][-_a-zA-Z0-9]* | changeme | change-me
      | true|false|null|none|nil|undefined|required|optional|string|str|bytes|number|int|integer|bool|boolean
      | secret|secrets|password|token|hidden|masked|env|self|this|options?|config|settings|value
      | (?:process\.env|os\.environ|os\.getenv|getenv|env|ENV|config|settings|self|this|options?|props|args)\b.*
      | -?[0-9]+(?:\.[0-9]+)?                         # counts: max_tokens=4096
    )$""",
    re.IGNORECASE | re.VERBOSE,
)

# The name of an assignment whose value is a secret (checked on the whole identifier).
_SECRET_NAME = _Lazy(
    r"secret|token|passw(?:or)?d|passphrase|api[_-]?key|private[_-]?key|access[_-]?key|account[_-]?key"
    r"|auth[_-]?key|session[_-]?key|signing[_-]?key|encryption[_-]?key|master[_-]?key|^pwd$|^pass$",
    re.IGNORECASE,
)
_SECRET_ENV_NAME = _Lazy(
    r"^[A-Z][A-Z0-9_]*_(?:KEY|PASS|PASSWD|PASSWORD|PWD|SECRET|TOKEN|PAT|CREDENTIALS?)(?:_[A-Z0-9]+)?$"
)
# Token-ish names that are never secrets even though they contain a secret word.
_NOT_SECRET_NAME = _Lazy(
    r"tokeni[sz]e|tokens$|tokens?_?(?:count|limit|usage|budget|type|ids?)$|token_?type|keyboard"
    r"|^keys?_?(?:path|file|id|name|type|count)$",
    re.IGNORECASE,
)


def _is_placeholder(value: str) -> bool:
    return len(value) < 4 or bool(_PLACEHOLDER.match(value))


# Names that hold a secret only sometimes (`key`, `auth`, `hmac`, `hmac`): their value is
# redacted when it looks random (long, letters and digits mixed, many distinct characters).
_LOOSE_SECRET_NAME = _Lazy(r"(?:^|[_.-])(?:key|auth|hmac|creds?|credentials?)$", re.IGNORECASE)


def _looks_random(value: str) -> bool:
    if len(value) < 16 or any(ch.isspace() for ch in value):
        return False
    if "\\" in value or value.count("-") > 3:  # escapes, or words-and-versions like a CI cache key
        return False
    has_digit = any(ch.isdigit() for ch in value)
    has_alpha = any(ch.isalpha() for ch in value)
    return has_digit and has_alpha and len(set(value)) >= min(len(value) // 2, 12)


@dataclass(frozen=True)
class _Pass:
    """One pattern (compiled on first use); every pattern starts with a literal so the engine
    skips ahead fast."""

    name: str
    pattern: _Lazy
    handler: Callable[[re.Match[str]], str]


def _glued(match: re.Match[str], back: int = 0) -> bool:
    """True when the match (extended ``back`` characters to the left) continues a longer word.

    ``_`` and ``-`` do not glue: ``mcp__ghp_…`` and ``my-sk-…`` still hold a token.
    """
    start = match.start() - back
    return start > 0 and match.string[start - 1].isalnum()


def _whole(match: re.Match[str]) -> str:
    """Replace the whole match, unless it is glued to a longer word or already a placeholder."""
    if _glued(match) or "REDACTED" in match.group(0).upper():
        return match.group(0)
    return REDACTED


def _openai(match: re.Match[str]) -> str:
    """``sk-…`` keys always carry digits; ``sk-some-long-kebab-name`` is a slug, not a key."""
    if not any(ch.isdigit() for ch in match.group(0)):
        return match.group(0)
    return _whole(match)


def _value(group: str, *, lead: str = "") -> Callable[[re.Match[str]], str]:
    """Replace only ``group`` of the match; ``lead`` lists the letters allowed just before it."""

    def handler(match: re.Match[str]) -> str:
        if lead:
            start = match.start()
            if start == 0 or match.string[start - 1] not in lead or _glued(match, 1):
                return match.group(0)
        return _swap(match, group)

    return handler


def _swap(match: re.Match[str], group: str) -> str:
    value = match.group(group)
    if value is None or _is_placeholder(value):
        return match.group(0)
    begin, end = match.span(group)
    offset = match.start()
    text = match.group(0)
    return text[: begin - offset] + REDACTED + text[end - offset :]


_VALUE_GROUPS = ("as_dq", "as_sq", "as_bare")


def _assignment(match: re.Match[str]) -> str:
    """``<name><sep><value>``: redact the value when the whole name (read back) is secret-ish."""
    string, start = match.string, match.start()
    head = start
    while head > 0 and start - head < 80 and string[head - 1] in _KEY_CHARS:
        head -= 1
    name = string[head : match.end("as_tail")].strip(".-_")
    group = next((g for g in _VALUE_GROUPS if match.group(g) is not None), None)
    if group is None:
        return match.group(0)
    loose = _LOOSE_SECRET_NAME.search(name) is not None and _looks_random(match.group(group))
    if not loose and (
        _NOT_SECRET_NAME.search(name) or not (_SECRET_NAME.search(name) or _SECRET_ENV_NAME.match(name))
    ):
        # Not a secret name, but its value may still hold one (`cmd: "mysql --password=x"`).
        begin, end = match.span(group)
        offset = match.start()
        text = match.group(0)
        return text[: begin - offset] + _redact_assignments(text[begin - offset : end - offset]) + text[end - offset :]
    if group == "as_bare" and string[match.end() : match.end() + 1] == "(":
        return match.group(0)  # `token = readToken()`: code, not a value
    return _swap(match, group)


def _userinfo(match: re.Match[str]) -> str:
    """``user:password`` of a URL: the whole userinfo goes, unless the password is a placeholder."""
    password = match.group("url_val").split(":", 1)[1]
    if _is_placeholder(password) or "REDACTED" in password.upper():
        return match.group(0)
    begin, end = match.span("url_val")
    return match.string[match.start() : begin] + REDACTED + match.string[end : match.end()]


def _telegram(match: re.Match[str]) -> str:
    """``<8-10 digit bot id>:<35-char secret>``: the match starts at the colon."""
    string, start = match.string, match.start()
    digits = start
    while digits > 0 and start - digits <= 10 and string[digits - 1].isdigit():
        digits -= 1
    count = start - digits
    glued = digits > 0 and string[digits - 1] in _WORD_CHARS and string[max(0, digits - 3) : digits] != "bot"
    if not 8 <= count <= 10 or glued:
        return match.group(0)
    return ":" + REDACTED


_B = r"[A-Za-z0-9_-]"
_TOKEN_PATTERNS = (
    rf"sk-{_B}{{20,}}",  # Anthropic (sk-ant-api03-, sk-ant-oat01-) and OpenAI (sk-, sk-proj-, sk-svcacct-)
    r"gh[pousr]_[A-Za-z0-9]{30,}",
    r"github_pat_[A-Za-z0-9_]{22,}",
    rf"gl(?:pat|dt|rt|ptt|cbt|oas|soat|ft|imt|agent)-{_B}{{20,}}",
    # Slack, every token family: xox<letter>- (bot, user, app, config, refresh: xoxe.xoxp-), xapp- (app-level).
    r"x(?:ox[a-z]|app)(?:\.xox[a-z])?-[A-Za-z0-9-]{10,}",
    r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{10,}",
    rf"https://discord(?:app)?\.com/api/webhooks/[0-9]+/{_B}{{20,}}",
    # An access key id, with the secret that follows it in a credentials CSV or `aws configure` output.
    r"AKIA[0-9A-Z]{16}(?![A-Z0-9])(?:[\s,;:|\"']{1,5}[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+]))?",
    r"ASIA[0-9A-Z]{16}(?![A-Z0-9])(?:[\s,;:|\"']{1,5}[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+]))?",
    r"AIza[0-9A-Za-z_-]{35}",
    rf"ya29\.{_B}{{20,}}",
    rf"GOCSPX-{_B}{{20,}}",
    r"sk_(?:live|test)_[0-9A-Za-z]{10,}",
    r"rk_(?:live|test)_[0-9A-Za-z]{10,}",
    r"pk_(?:live|test)_[0-9A-Za-z]{10,}",
    r"whsec_[A-Za-z0-9+/=]{20,}",
    r"hf_[A-Za-z0-9]{30,}",
    r"npm_[A-Za-z0-9]{36}",
    r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{20,}",
    r"do[opr]_v1_[a-f0-9]{64}",
    # More providers whose keys carry a fixed prefix (gitleaks classes): Groq, xAI, Replicate, Perplexity,
    # Linear, Notion, Atlassian, Databricks, HashiCorp Vault / Terraform Cloud, Doppler, Pulumi, Postman,
    # Sentry, Grafana, New Relic, Docker Hub, Supabase, Figma, Tailscale, 1Password, Mailgun, Square, age.
    r"gsk_[A-Za-z0-9]{20,}",
    r"xai-[A-Za-z0-9]{20,}",
    r"r8_[A-Za-z0-9]{20,}",
    r"pplx-[A-Za-z0-9]{20,}",
    r"lin_(?:api|oauth)_[A-Za-z0-9]{20,}",
    r"secret_[A-Za-z0-9]{40,}",
    r"ntn_[A-Za-z0-9]{40,}",
    r"ATATT[A-Za-z0-9_=-]{20,}",
    r"dapi[a-f0-9]{32}(?:-[0-9])?",
    r"hv[sbr]\.[A-Za-z0-9_-]{20,}",
    r"atlasv1\.[A-Za-z0-9_=-]{40,}",  # Terraform Cloud: <14-char id>.atlasv1.<secret>
    r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{30,}",
    r"pul-[a-f0-9]{40}",
    r"PMAK-[A-Za-z0-9]{20,}-[A-Za-z0-9]{20,}",
    r"sntry[su]_[A-Za-z0-9+/=_-]{30,}",
    r"gl(?:sa|c)_[A-Za-z0-9+/=_-]{30,}",
    r"NRAK-[A-Z0-9]{20,}",
    r"dckr_pat_[A-Za-z0-9_-]{20,}",
    r"sbp_[a-f0-9]{40}",
    r"figd_[A-Za-z0-9_-]{30,}",
    r"tskey-[a-z]+-[A-Za-z0-9_-]{16,}",
    r"ops_[A-Za-z0-9_-]{40,}",
    r"key-[a-f0-9]{32}(?![a-f0-9])",
    r"sq0(?:atp|csp)-[A-Za-z0-9_-]{20,}",
    r"AGE-SECRET-KEY-1[0-9A-Z]{50,}",
    r"shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}",
    r"SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}",
    # JWT: header.payload.signature; the header is always base64url of '{"'.
    rf"eyJ{_B}{{5,}}\.{_B}{{5,}}\.{_B}*",
)
_PEM = (
    r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    r"(?:[\s\S]{0,20000}?-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|(?:[A-Za-z0-9+/=\s]|\\n|\\r)*)"
)
_AWS_TAIL = r"(?P<aws_sep>[\"']?\s{0,5}[:=]?\s{0,5}[\"']?)(?P<aws_val>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"
_AUTH_TAIL = (
    r"[\"']?\s{0,5}[:=]\s{0,5}[\"']?(?:[A-Za-z][A-Za-z0-9_-]{1,30}\s{1,5}(?=[A-Za-z0-9_\-.~+/=:%\[\]]{8}))?"
    r"(?P<auth_val>[A-Za-z0-9_\-.~+/=:%\[\]]{8,})"
)
_BEARER_TAIL = r"\s{1,5}(?P<bearer_val>[A-Za-z0-9_\-.~+/=]{16,})"
_ASSIGN_TAIL = (
    r"(?P<as_tail>[A-Za-z0-9_.-]{0,30}?)[\"']?\s{0,5}(?::=|=>|:|=)\s{0,5}"
    r"(?:\"(?P<as_dq>[^\"\n\\]{1,400})\"|'(?P<as_sq>[^'\n]{1,400})'|(?P<as_bare>[^\s'\"`,;<>(){}\[\]]{1,400}+)(?![ \t]{0,5}(?:=|:\s)))"
)
# Anchors of secret-ish names; the rest of the name is read back from the text.
_ASSIGN_ANCHORS = ("ecret", "ECRET", "oken", "OKEN", "assw", "assphrase", "PASS", "ey", "EY", "PWD", "PAT", "REDENTIAL",
                   # the rarer names share one pass (an alternation of literals) to keep redaction fast
                   "(?:auth|Auth|AUTH|pass|Pass|pwd|Pwd|redential|hmac|HMAC|reds|REDS)")
# Token counters (`input_tokens: 12`, `tokenizer:`, `token_count=`) are the common case; skip them in the engine.
_ANCHOR_GUARD = {
    "oken": r"(?!s(?![A-Za-z])|s_|izer|_?(?:count|type|Count|Type|usage|Usage|limit|Limit)(?![A-Za-z]))",
    "OKEN": r"(?!S(?![A-Za-z])|S_|_?(?:COUNT|TYPE|USAGE|LIMIT)(?![A-Za-z]))",
}
_ASSIGN_PASSES = tuple(
    _Pass("assign", _Lazy((anchor if anchor.startswith("(") else re.escape(anchor)) + _ANCHOR_GUARD.get(anchor, "")
                               + _ASSIGN_TAIL), _assignment)
    for anchor in _ASSIGN_ANCHORS
)


def _redact_assignments(text: str) -> str:
    for step in _ASSIGN_PASSES:
        text = step.pattern.sub(step.handler, text)
    return text


_PASSES: tuple[_Pass, ...] = (
    _Pass("pem", _Lazy(_PEM), _whole),
    _Pass("openai", _Lazy(_TOKEN_PATTERNS[0]), _openai),
    *(_Pass("token", _Lazy(rx), _whole) for rx in _TOKEN_PATTERNS[1:]),
    _Pass("telegram", _Lazy(r":[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])"), _telegram),
    _Pass("aws", _Lazy(r"ecret(?:_access_key|AccessKey|_key)" + _AWS_TAIL), _value("aws_val")),
    _Pass("aws", _Lazy(r"ECRET(?:_ACCESS_KEY|_KEY)" + _AWS_TAIL), _value("aws_val")),
    _Pass("auth", _Lazy(r"uthorization" + _AUTH_TAIL), _value("auth_val", lead="Aa")),
    _Pass("auth", _Lazy(r"UTHORIZATION" + _AUTH_TAIL), _value("auth_val", lead="A")),
    _Pass("cookie", _Lazy(r"ookie[\"']?\s{0,5}:\s{0,5}[\"']?(?P<ck_val>[^\s\"'][^\r\n\"']{7,})"),
          _value("ck_val", lead="Cc")),
    _Pass("bearer", _Lazy(r"earer" + _BEARER_TAIL), _value("bearer_val", lead="Bb")),
    _Pass("bearer", _Lazy(r"EARER" + _BEARER_TAIL), _value("bearer_val", lead="B")),
    # URL userinfo: everything up to the last "@" before the host, so a password holding "@", ":", "#", "?"
    # or other reserved characters goes whole (user name included: it is often a token too).
    _Pass("url", _Lazy(r"://(?P<url_val>[^\s/:@'\"<>]{0,100}:[^\s/'\"<>]{1,200})@(?=[^\s/@'\"<>]+)"),
          _userinfo),
    _Pass(
        "flag",
        _Lazy(
            r"--(?:password|passwd|token|api-key|apikey|secret|client-secret|access-key|auth-token)[ =]"
            r"(?P<fl_val>[^\s'\"`-][^\s'\"`]{3,400})"
        ),
        _value("fl_val"),
    ),
    *_ASSIGN_PASSES,
)

_META = frozenset(".^$*+?{}[]\\|()")


def _top_level_alternation(source: str) -> bool:
    depth, index, in_class = 0, 0, False
    while index < len(source):
        ch = source[index]
        if ch == "\\":
            index += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
            if source[index + 1 : index + 2] == "]":  # a "]" first in a class is a literal
                index += 1
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            return True
        index += 1
    return False


def needles(pattern: _Lazy) -> tuple[str, ...]:
    """Strings one of which every match of ``pattern`` starts with (empty: none known).

    The literal the pattern is anchored on (``sk-``, ``ecret``, ``://``), or each alternative of
    a leading group of plain words (``(?:auth|pass|…)``). A text holding none of them cannot
    match, so the pass is skipped: a substring test instead of a regex walk over the text.
    """
    source = pattern.pattern
    if pattern.flags & (re.IGNORECASE | re.VERBOSE) or _top_level_alternation(source):
        return ()
    if source.startswith("(?:"):
        end = source.find(")")
        words = source[3:end].split("|") if end > 0 else []
        if words and all(w.isascii() and w.isalnum() for w in words) and source[end + 1 : end + 2] not in ("?", "*", "{"):
            return tuple(words)
        return ()
    prefix: list[str] = []
    index = 0
    while index < len(source):
        ch = source[index]
        if ch == "\\":
            escaped = source[index + 1 : index + 2]
            if not escaped or escaped.isalnum():
                break  # \s, \d, \b, \1: a class or an anchor, not a literal
            literal, width = escaped, 2
        elif ch in _META:
            break
        else:
            literal, width = ch, 1
        if source[index + width : index + width + 1] in ("?", "*", "{"):
            break  # an optional character is not required
        prefix.append(literal)
        index += width
    return ("".join(prefix),) if prefix else ()


#: Old name of :func:`brain.core.text.repair_surrogates`, kept for the session readers that import it
#: from here; the one untrusted-text cleaner is :func:`brain.core.text.clean_text`.
clean_text = repair_surrogates


#: Each pass with the needles that must be in a text for it to match (see :func:`needles`).
_GUARDED = tuple((step, needles(step.pattern)) for step in _PASSES)


def redact(text: str) -> str:
    """``text`` with every recognised secret replaced by ``[REDACTED]`` (idempotent)."""
    if not text:
        return text
    text = repair_surrogates(text)
    for step, guard in _GUARDED:
        for needle in guard:  # a loop, not any(): this runs for every pass of every text redacted
            if needle in text:
                break
        else:
            if guard:
                continue
        text = step.pattern.sub(step.handler, text)
    return text


#: Strings up to this long go through :func:`redact_recurring`'s memo.
RECURRING_CHARS = 400


@functools.lru_cache(maxsize=8192)
def _redact_memo(text: str) -> str:
    return redact(text)


def redact_recurring(text: str) -> str:
    """:func:`redact` for the short strings a feed build renders again and again (a cwd for each
    of a project's arcs, a file or command for every arc and project that lists it): each one
    redacted once per process. Same result as :func:`redact` (it is pure)."""
    return _redact_memo(text) if len(text) <= RECURRING_CHARS else redact(text)


def redact_obj(value: Any) -> Any:
    """A JSON-like value with every string (keys included) redacted; other values unchanged."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(k) if isinstance(k, str) else k: redact_obj(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_obj(v) for v in value]
    return value
