"""Redaction (SPEC §10): every kind of secret the spec and session-formats.md §5 list, and the
placeholders that must survive untouched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brain.core.redaction import REDACTED, clean_text, redact, redact_obj

FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "sessions"

# Built from pieces so that no complete fake credential sits in the repository as one literal.
ANTHROPIC = "sk-ant-" + "api03-" + "Zx9" * 30
ANTHROPIC_OAUTH = "sk-ant-" + "oat01-" + "Qw7_" * 22
OPENAI = "sk-" + "proj-" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5bC7"
OPENAI_LEGACY = "sk-" + "T3BlbkFJ" + "x1Y2z3" * 7
GITHUB_PAT = "ghp_" + "A1b2C3d4E5" * 3 + "F6g7H8"
GITHUB_OAUTH = "gho_" + "Zz9Yy8Xx7W" * 4
GITHUB_FINE = "github_pat_" + "11ABCDEFG0" * 8 + "ab"
GITLAB = "glpat-" + "xY7_zW8-vU9tS0rQ1pO2"
SLACK = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
SLACK_HOOK = "https://hooks.slack.com/services/" + "T00000000/B00000000/XXXXabcdXXXXabcdXXXXabcd"
AWS_ID = "AKIA" + "IOSFODNN7EXAMPLF"
AWS_SESSION_ID = "ASIA" + "Q3EGRU6EXAMPLE12"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
GOOGLE = "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWZ"
GOOGLE_OAUTH = "ya29." + "a0AfH6SMBx-9tSrke72PouQMnMX"
STRIPE_SECRET = "sk_" + "live_" + "51HqLyjWDarjtT1zdp7dc0123"
STRIPE_RESTRICTED = "rk_" + "live_" + "51HqLyjWDarjtT1zdp7dc9876"
STRIPE_PUBLISHABLE = "pk_" + "live_" + "51HqLyjWDarjtT1zdp7dc5555"
HF = "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567"
NPM = "npm_" + "a1B2c3D4e5" * 3 + "F6g7H8"
TELEGRAM = "123456789:" + "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM_BODY = "MIIEowIBAAKCAQEAx1y2z3" + "\nQWERTYqwerty0123456789abcdef\nzzzz=="
PRIVATE_KEY = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----"
OPENSSH_KEY = f"-----BEGIN OPENSSH PRIVATE KEY-----\n{PEM_BODY}\n-----END OPENSSH PRIVATE KEY-----"
PASSWORD = "hunter2-" + "Corr3ct"

# (kind, text, secret that must disappear, context that must stay)
POSITIVE: list[tuple[str, str, str, str]] = [
    ("anthropic", f"export ANTHROPIC_API_KEY={ANTHROPIC}", ANTHROPIC, "export ANTHROPIC_API_KEY="),
    ("anthropic inline", f"the key {ANTHROPIC} leaked", ANTHROPIC, "the key "),
    ("anthropic oauth", f"token {ANTHROPIC_OAUTH}", ANTHROPIC_OAUTH, "token "),
    ("openai", f"client = OpenAI(api_key='{OPENAI}')", OPENAI, "client = OpenAI("),
    ("openai legacy", f"{OPENAI_LEGACY} is my key", OPENAI_LEGACY, " is my key"),
    ("github pat", f"git push https://x:{GITHUB_PAT}@github.com/o/r", GITHUB_PAT, "@github.com/o/r"),
    ("github oauth", f"gh auth: {GITHUB_OAUTH}", GITHUB_OAUTH, "gh auth"),
    ("github fine-grained", f"GH={GITHUB_FINE}", GITHUB_FINE, "GH="),
    ("gitlab", f"glab login --token {GITLAB}", GITLAB, "glab login"),
    ("slack token", f"SLACK={SLACK}", SLACK, "SLACK="),
    ("slack webhook", f"curl -X POST {SLACK_HOOK}", SLACK_HOOK, "curl -X POST "),
    ("aws access key id", f"aws_access_key_id = {AWS_ID}", AWS_ID, "aws_access_key_id"),
    ("aws session key id", f"id {AWS_SESSION_ID} here", AWS_SESSION_ID, "id "),
    ("aws secret", f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET, "aws_secret_access_key = "),
    ("aws secret env", f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}", AWS_SECRET, "AWS_SECRET_ACCESS_KEY="),
    ("aws secret json", f'{{"SecretAccessKey": "{AWS_SECRET}"}}', AWS_SECRET, '"SecretAccessKey": "'),
    ("aws csv", f"Access key ID,Secret access key\n{AWS_ID},{AWS_SECRET}", AWS_SECRET, "Access key ID"),
    ("google", f"GEMINI_API_KEY={GOOGLE}", GOOGLE, "GEMINI_API_KEY="),
    ("google inline", f"key={GOOGLE}&q=1", GOOGLE, "&q=1"),
    ("google oauth", f"access {GOOGLE_OAUTH} ok", GOOGLE_OAUTH, "access "),
    ("stripe secret", f"Stripe.api_key = '{STRIPE_SECRET}'", STRIPE_SECRET, "Stripe.api_key"),
    ("stripe restricted", f"use {STRIPE_RESTRICTED}", STRIPE_RESTRICTED, "use "),
    ("stripe publishable", f"pk {STRIPE_PUBLISHABLE}", STRIPE_PUBLISHABLE, "pk "),
    ("hugging face", f"huggingface-cli login {HF}", HF, "huggingface-cli login "),
    ("npm", f"//registry.npmjs.org/:_authToken={NPM}", NPM, "registry.npmjs.org"),
    ("telegram", f"bot url https://api.telegram.org/bot{TELEGRAM}/getMe", TELEGRAM.split(":")[1], "/getMe"),
    ("telegram bare", f"BOT {TELEGRAM}", TELEGRAM.split(":")[1], "BOT "),
    ("jwt", f"cookie session={JWT}; path=/", JWT, "; path=/"),
    ("jwt bare", f"here {JWT} end", JWT, " end"),
    ("bearer header", f'curl -H "Authorization: Bearer {GITHUB_OAUTH[4:]}xyz" api', GITHUB_OAUTH[4:], "Authorization: Bearer "),
    ("bearer lowercase", "authorization: bearer abcdef0123456789abcdef", "abcdef0123456789abcdef", "authorization: bearer "),
    ("basic header", "Authorization: Basic dXNlcjpwYXNzd29yZDEyMw==", "dXNlcjpwYXNzd29yZDEyMw==", "Authorization: Basic "),
    ("json authorization", '{"Authorization": "Token 9f8e7d6c5b4a39281706"}', "9f8e7d6c5b4a39281706", '"Authorization": "Token '),
    ("bare bearer", "send Bearer 0123456789abcdefABCDEF0123 to it", "0123456789abcdefABCDEF0123", "send Bearer "),
    ("private key", f"key:\n{PRIVATE_KEY}\nafter", PEM_BODY, "after"),
    ("openssh key", f"{OPENSSH_KEY}", PEM_BODY, ""),
    ("truncated private key", f"-----BEGIN EC PRIVATE KEY-----\n{PEM_BODY}", PEM_BODY, ""),
    ("postgres url", f"postgres://admin:{PASSWORD}@db.internal:5432/app", PASSWORD, "postgres://admin:"),
    ("redis url", f"REDIS_URL=redis://:{PASSWORD}@cache:6379/0", PASSWORD, "@cache:6379/0"),
    ("mongodb url", f"mongodb+srv://u:{PASSWORD}@cluster0.x.mongodb.net", PASSWORD, "@cluster0.x.mongodb.net"),
    ("git remote", f"https://bot:{PASSWORD}@gitlab.com/g/p.git", PASSWORD, "@gitlab.com/g/p.git"),
    ("password=", f"password={PASSWORD}", PASSWORD, "password="),
    ("PASSWORD env", f"DB_PASSWORD={PASSWORD}", PASSWORD, "DB_PASSWORD="),
    ("passwd yaml", f"passwd: {PASSWORD}", PASSWORD, "passwd: "),
    ("token:", f"token: {PASSWORD}", PASSWORD, "token: "),
    ("token json", f'{{"access_token":"{PASSWORD}","expires":3600}}', PASSWORD, '"expires":3600'),
    ("refresh token", f"refresh_token = '{PASSWORD}'", PASSWORD, "refresh_token = '"),
    ("api_key=", f"api_key={PASSWORD}", PASSWORD, "api_key="),
    ("apiKey camel", f"const apiKey = '{PASSWORD}'", PASSWORD, "const apiKey = '"),
    ("x-api-key header", f"x-api-key: {PASSWORD}", PASSWORD, "x-api-key: "),
    ("client_secret", f"client_secret={PASSWORD}", PASSWORD, "client_secret="),
    ("_SECRET env", f"JWT_SECRET={PASSWORD}", PASSWORD, "JWT_SECRET="),
    ("_TOKEN env", f"export SENTRY_AUTH_TOKEN={PASSWORD}", PASSWORD, "export SENTRY_AUTH_TOKEN="),
    ("_KEY env", f"STRIPE_KEY={PASSWORD}", PASSWORD, "STRIPE_KEY="),
    ("_PASS env", f"SMTP_PASS={PASSWORD}", PASSWORD, "SMTP_PASS="),
    ("private_key json", f'"private_key": "{PASSWORD}"', PASSWORD, '"private_key": "'),
    ("double-quoted with spaces", 'DB_SECRET="correct horse battery"', "correct horse battery", 'DB_SECRET="'),
    ("password flag", f"mysql -u root --password={PASSWORD} db", PASSWORD, "mysql -u root --password="),
    ("token flag", f"tool --token {PASSWORD} run", PASSWORD, " run"),
    ("nested in a command value", f'"command": "mysql --password={PASSWORD}"', PASSWORD, '"command": "mysql'),
]

NEGATIVE = [
    "REDACTED_API_KEY",
    "OPENAI_API_KEY=REDACTED_API_KEY",
    "token: REDACTED_TOKEN",
    "[REDACTED_SIGNATURE]",
    "[REDACTED]",
    "password=[REDACTED]",
    "Authorization: Bearer [REDACTED]",
    "[REDACTED_TEXT len=3021 sha=dc9e82a0]",
    "[REDACTED_ENCRYPTED_CONTENT len=12 sha=ab12cd34]",
    "redacted://url/454be97b1a",
    "/redacted/path/59b923df4d",
    '"id":"REDACTED"',
    "[REDACTED_EMAIL]",
    "token: ${{ secrets.GITHUB_TOKEN }}",
    "password = os.environ['DB_PASSWORD']",
    "apiKey: process.env.OPENAI_API_KEY",
    "API_KEY=$OPENAI_API_KEY",
    "password: string;",
    "token: Optional[str] = None",
    "max_tokens=4096",
    '"input_tokens": 12345',
    "Original token count: 1356",
    "tokenizer: cl100k_base",
    "the task-management-feature-branch-1234 is ready",
    "http://localhost:8080/path@v2",
    "git@github.com:org/repo.git",
    "ssh user@host",
    "msg_01ABCdef234GHIjkl567MNOpqr and toolu_01XyZ890abcDEF12345ghijk and req_011CUabc123",
    "signature: EqQBCkgIBxABGAIqQHx0aGlua2luZw",
    "the password is short",
    "keyboard: us",
    "PATH=/usr/local/bin:/usr/bin",
    "use the skeleton-screen-loading component",
]


@pytest.mark.parametrize(("kind", "text", "secret", "context"), POSITIVE, ids=[p[0] for p in POSITIVE])
def test_secret_is_redacted(kind: str, text: str, secret: str, context: str) -> None:
    out = redact(text)
    assert secret not in out, kind
    assert REDACTED in out
    assert context in out, f"{kind}: the surrounding text was lost: {out!r}"


@pytest.mark.parametrize("text", NEGATIVE)
def test_placeholders_and_ordinary_text_are_left_alone(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(("kind", "text", "secret", "context"), POSITIVE, ids=[p[0] for p in POSITIVE])
def test_redaction_is_idempotent(kind: str, text: str, secret: str, context: str) -> None:
    once = redact(text)
    assert redact(once) == once


@given(st.text(max_size=300))
def test_redaction_never_fails_and_is_idempotent_on_any_text(text: str) -> None:
    once = redact(text)
    assert redact(once) == once
    once.encode("utf-8")


def test_lone_surrogates_are_sanitised() -> None:
    text = json.loads('"bad \\ud83d emoji and \\udcb2 byte, good \\ud83d\\ude00"')
    with pytest.raises(UnicodeEncodeError):
        text.encode("utf-8")
    cleaned = clean_text(text)
    cleaned.encode("utf-8")
    assert "\U0001f600" in cleaned and "\ufffd" in cleaned
    redact(text).encode("utf-8")


def test_redact_obj_walks_nested_values() -> None:
    value = {"cmd": f"export GITHUB_TOKEN={GITHUB_PAT}", "list": [OPENAI, 3, None, {"k": JWT}], "n": 1.5}
    out = redact_obj(value)
    dumped = json.dumps(out)
    for secret in (GITHUB_PAT, OPENAI, JWT):
        assert secret not in dumped
    assert out["n"] == 1.5 and out["list"][1] == 3 and out["list"][2] is None


def test_many_secrets_in_one_text() -> None:
    text = "\n".join(f"{kind}: {line}" for kind, line, _s, _c in POSITIVE)
    out = redact(text)
    for kind, _line, secret, _context in POSITIVE:
        assert secret not in out, kind


def test_real_fixtures_hold_no_false_alarm_on_their_placeholders() -> None:
    """The sanitised fixtures' placeholders pass through unchanged (session-formats.md §5)."""
    path = FIXTURES / "codex" / "sessions" / "2026" / "02" / "23"
    sample = next(path.glob("rollout-*T20-34-25-*.jsonl")).read_text(encoding="utf-8")
    assert redact(sample).count("[REDACTED_") == sample.count("[REDACTED_")
