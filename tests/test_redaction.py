"""Redaction (SPEC §10): every kind of secret the spec and session-formats.md §5 list, and the
placeholders that must survive untouched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brain.core.redaction import RECURRING_CHARS, REDACTED, clean_text, redact, redact_obj, redact_recurring
from tests.support.fresh import assert_in_fresh_interpreter

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
    ("postgres url", f"postgres://admin:{PASSWORD}@db.internal:5432/app", PASSWORD, "postgres://[REDACTED]@db.internal"),
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


@pytest.mark.parametrize(("kind", "text", "secret", "context"), POSITIVE, ids=[p[0] for p in POSITIVE])
def test_the_feeds_memoised_redaction_redacts_the_same(kind: str, text: str, secret: str, context: str) -> None:
    # the feed renders a cwd or a file once per arc and project: redacted once, the same answer
    # every time, short or past the memo's length
    for value in (text, text + " " * RECURRING_CHARS):
        assert redact_recurring(value) == redact_recurring(value) == redact(value)
        assert secret not in redact_recurring(value)


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


# --- secret classes, each in several shapes (issue 12 item 5) -----------------------------
# Every class is widened by its shape (the prefix family, the grammar of a URL or a header),
# not by one example; each token is tried in every context below.

_R = "Zq7Xk2Lm9Np4Rt6Vw8Yb3Cd5Fg1Hj0"  # letters and digits, built up so no real key sits in the repo
TOKEN_CLASSES: dict[str, list[str]] = {
    "slack": [
        "xoxb-" + "1234567890-" + _R, "xoxp-" + "1234567890-" + _R, "xoxa-2-" + _R, "xoxc-" + _R,
        "xoxd-" + _R, "xoxe.xoxp-1-" + _R, "xoxe-1-" + _R, "xapp-1-A0123456789-" + _R, "xoxr-" + _R,
    ],
    "llm providers": ["sk-ant-admin01-" + _R, "sk-or-v1-" + _R, "gsk_" + _R, "xai-" + _R, "r8_" + _R, "pplx-" + _R],
    "developer platforms": [
        "ghs_" + _R + "ab", "ghr_" + _R + "cd", "glptt-" + _R, "lin_api_" + _R, "ntn_" + _R + _R[:12],
        "ATATT3xFfGF0" + _R, "dckr_pat_" + _R, "sbp_" + "0123456789abcdef" * 2 + "01234567", "figd_" + _R,
        "PMAK-" + _R[:24] + "-" + _R, "npm_" + _R[:30] + "Ab12cD",
    ],
    "infrastructure": [
        "hvs." + _R, "dapi" + "0123456789abcdef" * 2, "tskey-auth-" + _R, "sntrys_" + _R, "glsa_" + _R,
        "NRAK-" + "ABCDEFGHIJ0123456789KLMNO", "pul-" + "0123456789abcdef" * 2 + "01234567",
        "dp.st." + _R + "Aa", "key-" + "0123456789abcdef" * 2, "sq0atp-" + _R, "AGE-SECRET-KEY-1" + "QZ7" * 20,
    ],
}
TOKEN_SHAPES = [
    "the key {s} leaked",
    '{{"value": "{s}"}}',
    "export SOMETHING={s}",
    "`{s}`",
    "({s}).",
    "{s}",
    "line one\n{s}\nline three",
]

# (class, text, the secret part that must go)
SHAPED: list[tuple[str, str, str]] = [
    # URL userinfo whose password holds reserved characters: the whole userinfo goes.
    ("url", "postgres://admin:p@ssw0rd123@db/app", "p@ssw0rd123"),
    ("url", "DATABASE_URL=mysql://root:s3cr:et@db.internal:3306/x", "s3cr:et"),
    ("url", '{"url": "redis://default:pa#ss?w0rd!@cache:6379/0"}', "pa#ss?w0rd!"),
    ("url", "amqp://guest:hunter%402@rabbit//", "hunter%402"),
    ("url", "git clone https://deploy:tok$en&x=1@git.example.com/o/r.git", "tok$en&x=1"),
    ("url", "mongodb+srv://app:Zx!9@@@cluster0.example.net/db?retryWrites=true", "Zx!9@@"),
    # Authorization headers, any scheme, any spelling.
    ("authorization", "Authorization: Bearer " + _R, _R),
    ("authorization", "authorization: Negotiate YIIGhgYGKwYBBQUCoIIGejCCBnag" + _R, _R),
    ("authorization", 'curl -H "Authorization: ApiKey ' + _R + '" https://api', _R),
    ("authorization", "Authorization: SSWS 00" + _R, _R),
    ("authorization", "Proxy-Authorization: Basic " + _R + "==", _R),
    ("authorization", 'headers = {"Authorization": "Token ' + _R + '"}', _R),
    ("authorization", "AUTHORIZATION=" + _R, _R),
    ("cookie", "Cookie: session=" + _R + "; theme=dark", _R),
    ("cookie", "set-cookie: sid=" + _R + "; Path=/; HttpOnly", _R),
    # Assignments: secret-ish names, and loose names whose value looks random.
    ("assignment", "key=" + _R, _R),
    ("assignment", '"key": "' + _R + '"', _R),
    ("assignment", "auth: " + _R, _R),
    ("assignment", "webhook_hmac = '" + _R + "'", _R),
    ("assignment", "GOOGLE_APPLICATION_CREDENTIALS_JSON=" + _R, _R),
    ("assignment", "credentials: " + _R, _R),
    ("assignment", "secret: " + _R, _R),
    ("assignment", "pwd=" + _R, _R),
]

ALL_TOKENS = [(cls, tok) for cls, toks in TOKEN_CLASSES.items() for tok in toks]


@pytest.mark.parametrize(("cls", "token"), ALL_TOKENS, ids=[f"{c}:{t[:12]}" for c, t in ALL_TOKENS])
def test_every_token_class_is_redacted_in_every_shape(cls: str, token: str) -> None:
    for shape in TOKEN_SHAPES:
        text = shape.format(s=token)
        out = redact(text)
        assert token not in out and token[-12:] not in out, (cls, text, out)
        assert REDACTED in out
        assert redact(out) == out


@pytest.mark.parametrize(("cls", "text", "secret"), SHAPED, ids=[f"{c}:{t[:30]}" for c, t, _ in SHAPED])
def test_every_shaped_secret_class_is_redacted(cls: str, text: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out, (cls, out)
    assert REDACTED in out and redact(out) == out
    if cls == "url":
        assert "://[REDACTED]@" in out  # the whole userinfo, user included


@pytest.mark.parametrize("text", [
    "key=value", "key: id", "auth: required", "primary_key: id", "the key is short",
    "auth=oauth2", "https://host:8080/path@scope/pkg", "ssh git@github.com", "postgres://db/app",
    "postgres://admin:[REDACTED]@db/app", "postgres://[REDACTED]@db/app", "redis://:${REDIS_PASSWORD}@cache:6379",
    "Authorization: Bearer [REDACTED]", "Cookie: [REDACTED]",
])
def test_looser_classes_leave_ordinary_values_and_placeholders_alone(text: str) -> None:
    assert redact(text) == text


def test_no_planted_secret_reaches_the_bundle_the_arc_its_id_or_file_name(tmp_path: Path) -> None:
    """`brain extract` then `brain cluster` over a session full of secrets: none survives anywhere."""
    from typer.testing import CliRunner

    from brain.cli import app
    from tests.support.vaults import init_vault

    slack_app = "xapp-1-A0123456789-" + _R
    url_password = "p@ssw0rd123"
    secrets = [slack_app, url_password, "ssw0rd123", "xoxe.xoxp-1-" + _R, _R, "hunter%402"]
    prompts = [
        f"postgres://admin:{url_password}@db/app is down, fix it with {slack_app}",
        f"{slack_app} deploy the bot, token xoxe.xoxp-1-{_R}",
        f"Authorization: Negotiate YIIGhgYG{_R} fails for amqp://guest:hunter%402@rabbit//",
        "now add the tests", "and the docs", "ship it",
    ]
    sid = "11111111-2222-4333-8444-555555555555"
    folder = tmp_path / "projects" / f"-work-{slack_app}"
    folder.mkdir(parents=True)
    records = []
    for index, prompt in enumerate(prompts):
        ts = f"2026-05-01T10:{index:02d}:00.000Z"
        records.append({"type": "user", "uuid": f"u{index}", "sessionId": sid, "timestamp": ts,
                        "cwd": f"/work/{slack_app}", "gitBranch": "main",
                        "message": {"role": "user", "content": prompt}})
        records.append({"type": "assistant", "uuid": f"a{index}", "sessionId": sid, "timestamp": ts,
                        "message": {"id": f"m{index}", "role": "assistant",
                                    "content": [{"type": "text", "text": f"Using {slack_app} and postgres://admin:{url_password}@db/app."}]}})
    (folder / f"{sid}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")

    runner = CliRunner()
    extracted = runner.invoke(app, ["extract", "--agent", "claude-code", "--projects-dir", str(tmp_path / "projects"),
                                    "--codex-dir", str(tmp_path / "none"), "--since", "4000d", "--min-turns", "1",
                                    "--now", "2026-05-02T00:00:00Z"])
    assert extracted.exit_code == 0, extracted.stderr
    bundle = extracted.stdout
    assert '"sessions"' in bundle and sid in bundle
    vault = init_vault(tmp_path / "vault")
    (tmp_path / "bundle.json").write_text(bundle, encoding="utf-8")
    clustered = runner.invoke(app, ["cluster", "--out-dir", str(vault / "clusters" / "2026-05-01"),
                                    "--vault", str(vault), "--bundle", str(tmp_path / "bundle.json"),
                                    "--now", "2026-05-02T00:00:00Z"])
    assert clustered.exit_code == 0, clustered.stderr
    arcs = list((vault / "clusters").rglob("*.md"))
    assert arcs, clustered.stdout
    surfaces = {"bundle": bundle, "cluster report": clustered.stdout + clustered.stderr}
    for path in vault.rglob("*"):
        surfaces[f"name {path.relative_to(vault)}"] = str(path.relative_to(vault))
        if path.is_file():
            surfaces[str(path.relative_to(vault))] = path.read_text(encoding="utf-8", errors="replace")
    for where, text in surfaces.items():
        for secret in secrets:
            assert secret not in text, f"{secret!r} reached {where}"


# --- the needle pre-check (issue 10): skipping a pass never changes the result ------------------

def _every_pass(text: str) -> str:
    """:func:`redact` without the pre-check: every pattern run on every text."""
    from brain.core.redaction import _PASSES, repair_surrogates

    if not text:
        return text
    text = repair_surrogates(text)
    for step in _PASSES:
        text = step.pattern.sub(step.handler, text)
    return text


_PIECES = [tok for _, tok in ALL_TOKENS] + [text for _, text, *_ in SHAPED] + NEGATIVE + [
    "Authorization: Bearer ", "password=", "--token ", "://u:", "@host", ":", "--", "gh", "auth", "ey", "EY",
    "PAT=", "SECRET_KEY=", "key-", "sk-", "eyJ", " ", "\n", "x", "_", "-", "=", '"', "'", "é",
]


@given(st.lists(st.sampled_from(_PIECES), max_size=8), st.text(max_size=40))
def test_the_needle_pre_check_never_changes_what_redaction_gives(pieces: list[str], noise: str) -> None:
    text = noise.join(pieces) if pieces else noise
    assert redact(text) == _every_pass(text)


def test_every_pass_is_skipped_only_for_a_needle_its_matches_start_with() -> None:
    from brain.core.redaction import _GUARDED

    for step, guard in _GUARDED:
        for _, token in ALL_TOKENS:
            for match in step.pattern.finditer(token):
                assert not guard or match.group(0).startswith(guard), (step.pattern.pattern, guard)


def test_a_pattern_is_compiled_only_for_a_text_holding_its_needle() -> None:
    """Compiling all 72 passes cost every ``brain`` process 20 ms at import; a tick compiles the
    few whose needle its texts hold. Lazily compiled, each still redacts (the tests above)."""
    code = (
        "from brain.core import redaction as r\n"
        "compiled = lambda: [s.pattern.pattern for s in r._PASSES if s.pattern._compiled is not None]\n"
        "assert compiled() == [], compiled()\n"
        "assert r.redact('plain words only') == 'plain words only'\n"
        "assert compiled() == [], compiled()\n"
        "token = 'ghp_' + 'a1B2' * 9\n"
        "assert r.redact('push with ' + token) == 'push with [REDACTED]'\n"
        "assert len(compiled()) == 1 and compiled()[0].startswith('gh'), compiled()\n"
    )
    assert_in_fresh_interpreter(code)
