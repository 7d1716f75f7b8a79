"""Secret redaction (SPEC §10): everything that leaves a session log passes through here.

:func:`redact` replaces credentials with ``[REDACTED]``. It runs on every bundle string,
arc stub, prompt and feed file, so it is one compiled pattern scanned once over the text,
with a replacement function that keeps the non-secret context (``password=``,
``Authorization: Bearer``, ``postgres://user:``) and swaps only the secret itself.

What it covers (gitleaks-style, see ``reference/session-formats.md`` §5): private-key
blocks; Anthropic, OpenAI, GitHub, GitLab, Slack (tokens and webhooks), AWS (access key
ids, and the secret next to ``aws_secret_access_key``), Google (API keys, OAuth tokens and
client secrets), Stripe, Hugging Face, npm and Telegram bot tokens; JWTs; bearer / basic
``Authorization`` values; passwords in URL userinfo; and ``KEY=value`` / ``key: value`` /
``"key": "value"`` assignments whose key names a secret (``password``, ``token``,
``api_key``, ``client_secret``, ``*_SECRET``, ``*_TOKEN``, ``*_KEY``, ``*_PASS*`` ...).

Placeholders are left alone, so redaction is idempotent and never rewrites text that
sanitised fixtures already carry: ``[REDACTED]``, ``REDACTED_API_KEY``,
``[REDACTED_SIGNATURE]``, ``[REDACTED_TEXT len=… sha=…]``, ``${VAR}``, ``<your-key>``,
``xxxx``, ``****``. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

REDACTED = "[REDACTED]"

# A secret-ish value in an assignment: no whitespace, quotes or list/markup punctuation.
_BARE = r"[^\s'\"`,;<>(){}\[\]]"
# Names that make an assignment's value a secret. Bounded repetition keeps the scan linear.
_SECRET_WORD = (
    r"(?:secret|token|passw(?:or)?d|passphrase|api[_-]?key|apikey|private[_-]?key|access[_-]?key"
    r"|account[_-]?key|auth[_-]?key|client[_-]?secret|session[_-]?key|signing[_-]?key)"
)
_ASSIGN_KEY = rf"(?i:[A-Za-z0-9_.-]{{0,60}}?{_SECRET_WORD}[A-Za-z0-9_.-]{{0,30}})"
# Upper-case environment names ending in a secret-ish word: STRIPE_KEY, DB_PASS, GH_PAT.
_ENV_KEY = r"[A-Z][A-Z0-9_]{0,60}_(?:KEY|PASS|PASSWD|PASSWORD|PWD|SECRET|TOKEN|PAT|CREDENTIALS?)(?:_[A-Z0-9]{1,20})?"

_PATTERNS: list[tuple[str, str]] = [
    # Whole PEM private-key blocks (also when cut off before the END line).
    (
        "pem",
        r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
        r"(?:[\s\S]{0,20000}?-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|(?:[A-Za-z0-9+/=\s]|\\n|\\r)*)",
    ),
    # Provider tokens with recognisable prefixes.
    ("tok", r"(?<![A-Za-z0-9_-])sk-ant-[A-Za-z0-9_-]{20,}"),
    ("tok", r"(?<![A-Za-z0-9_-])sk-(?:proj-|svcacct-|admin-|None-)?(?=[A-Za-z0-9_-]{0,200}\d)[A-Za-z0-9_-]{20,}"),
    ("tok", r"(?<![A-Za-z0-9_])gh[pousr]_[A-Za-z0-9]{30,}"),
    ("tok", r"(?<![A-Za-z0-9_])github_pat_[A-Za-z0-9_]{22,}"),
    ("tok", r"(?<![A-Za-z0-9_-])gl(?:pat|dt|rt|ptt|cbt|oas|soat|ft|imt|agent)-[A-Za-z0-9_-]{20,}"),
    ("tok", r"(?<![A-Za-z0-9_-])xox[abeoprs]-[A-Za-z0-9-]{10,}"),
    ("tok", r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{10,}"),
    ("tok", r"https://(?:[a-z]+\.)?discord(?:app)?\.com/api/webhooks/[0-9]+/[A-Za-z0-9_-]{20,}"),
    # An access key id followed by its secret (credentials CSV, `aws configure list` output).
    ("tok", r"(?<![A-Z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}[\s,;:|\"']{1,5}[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])"),
    ("tok", r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA)[0-9A-Z]{16}(?![A-Z0-9])"),
    ("tok", r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}"),
    ("tok", r"(?<![A-Za-z0-9_-])ya29\.[0-9A-Za-z_-]{20,}"),
    ("tok", r"(?<![A-Za-z0-9_-])GOCSPX-[A-Za-z0-9_-]{20,}"),
    ("tok", r"(?<![A-Za-z0-9_])(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{10,}"),
    ("tok", r"(?<![A-Za-z0-9_])whsec_[A-Za-z0-9+/=]{20,}"),
    ("tok", r"(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{30,}"),
    ("tok", r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}"),
    ("tok", r"(?<![A-Za-z0-9_])(?:pypi-AgEIcHlwaS5vcmc|dop_v1_|doo_v1_|shpat_|shpss_|SG\.)[A-Za-z0-9_.-]{20,}"),
    ("tok", r"(?<![0-9A-Za-z_:])[0-9]{8,10}:[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])"),
    # JWTs: header.payload.signature, the header always base64url of '{"'.
    ("tok", r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),
    # AWS secret access key written near its name, in any notation.
    (
        "aws",
        r"(?i:aws_?secret_?access_?key|secretaccesskey)(?P<aws_sep>[\"']?\s{0,5}[:=]?\s{0,5}[\"']?)"
        r"(?P<aws_val>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
    ),
    # Authorization headers and bare bearer tokens.
    (
        "auth",
        r"(?P<auth_key>(?i:(?:proxy-)?authorization)[\"']?\s{0,5}[:=]\s{0,5}[\"']?(?i:bearer|basic|token|bot|digest)?\s{0,5})"
        r"(?P<auth_val>[A-Za-z0-9_\-.~+/=:]{8,})",
    ),
    ("bearer", r"(?P<bearer_key>(?i:\bbearer)\s{1,5})(?P<bearer_val>[A-Za-z0-9_\-.~+/=]{16,})"),
    # Passwords in URL userinfo: scheme://user:PASSWORD@host.
    ("url", r"(?P<url_head>\b[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s/:@'\"<>]{0,100}:)(?P<url_val>[^\s/@'\"<>]{1,200})(?=@)"),
    # Assignments: KEY=value, key: value, "key": "value", --password value.
    (
        "assign",
        rf"(?<![A-Za-z0-9_.-])(?P<as_key>{_ASSIGN_KEY}|{_ENV_KEY})(?P<as_sep>[\"']?\s{{0,5}}(?::|=|:=|=>)\s{{0,5}})"
        rf"(?:\"(?P<as_dq>[^\"\n\\]{{1,400}})\"|'(?P<as_sq>[^'\n]{{1,400}})'|(?P<as_bare>{_BARE}{{1,400}}))",
    ),
    (
        "flag",
        r"(?P<fl_key>--(?:password|passwd|token|api-key|apikey|secret|client-secret|access-key)[ =])"
        r"(?P<fl_val>[^\s'\"`]{4,400})",
    ),
]

_COMBINED = re.compile("|".join(f"(?P<_{i}_{kind}>{rx})" for i, (kind, rx) in enumerate(_PATTERNS)))
_GROUP_KIND = {f"_{i}_{kind}": kind for i, (kind, _rx) in enumerate(_PATTERNS)}

# Values that are placeholders, references or types, never secrets.
_PLACEHOLDER = re.compile(
    r"""^(?:
        .*REDACTED.*                                  # REDACTED_API_KEY, [REDACTED], redacted://...
      | \$.* | %\(.* | \{\{.* | <.*> | \[.*\]         # $VAR, ${VAR}, %(x)s, {{ x }}, <your-key>, [x]
      | [xX*•.#_-]{3,} | (?:x{3,}|X{3,})[-_A-Za-z0-9]*   # xxxx, ****, xxx-your-key
      | (?:your|example|dummy|fake|sample|placeholder)[-_][-_a-zA-Z0-9]* | changeme | change-me
      | true|false|null|none|nil|undefined|required|optional|string|str|bytes|number|int|integer|bool|boolean
      | secret|password|token|hidden|masked|env|environ|process\.env.*|os\.environ.*|os\.getenv.*|getenv.*
      | [0-9]+(?:\.[0-9]+)?                           # counts: max_tokens=4096
    )$""",
    re.IGNORECASE | re.VERBOSE,
)


def _is_placeholder(value: str) -> bool:
    return bool(_PLACEHOLDER.match(value)) or len(value) < 4


def _replace(match: re.Match[str]) -> str:
    group = match.lastgroup
    kind = _GROUP_KIND.get(group or "", "tok")
    text = match.group(0)
    if "REDACTED" in text.upper() and kind in ("pem", "tok"):
        return text
    if kind in ("pem", "tok"):
        return REDACTED
    if kind == "aws":
        return _keep(match, "aws_val")
    if kind == "auth":
        return _keep(match, "auth_val")
    if kind == "bearer":
        return _keep(match, "bearer_val")
    if kind == "url":
        return _keep(match, "url_val")
    if kind == "flag":
        return _keep(match, "fl_val")
    for name in ("as_dq", "as_sq", "as_bare"):
        if match.group(name) is not None:
            return _keep(match, name)
    return text


def _keep(match: re.Match[str], value_group: str) -> str:
    """The match with only ``value_group`` replaced (placeholders stay as they are)."""
    value = match.group(value_group)
    if value is None or _is_placeholder(value):
        return match.group(0)
    start, end = match.span(value_group)
    whole_start = match.start()
    text = match.group(0)
    return text[: start - whole_start] + REDACTED + text[end - whole_start :]


_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def clean_text(text: str) -> str:
    """``text`` safe to encode as UTF-8: lone surrogates become U+FFFD.

    ``json.loads`` accepts escapes like ``\\ud83d`` that then break ``.encode("utf-8")``;
    every string that leaves a session log goes through here.
    """
    if _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub("\ufffd", text)


def strip_controls(text: str) -> str:
    """``text`` without C0 control characters other than tab and newline."""
    return _CONTROL.sub("", text)


def redact(text: str) -> str:
    """``text`` with every recognised secret replaced by ``[REDACTED]`` (idempotent)."""
    if not text:
        return text
    return _COMBINED.sub(_replace, clean_text(text))


def redact_obj(value: Any) -> Any:
    """A JSON-like value with every string (keys included) redacted; other values unchanged."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(k) if isinstance(k, str) else k: redact_obj(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_obj(v) for v in value]
    return value


Redactor = Callable[[str], str]
