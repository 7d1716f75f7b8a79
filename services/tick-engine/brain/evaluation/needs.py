"""What a session needed: files, commands, errors, entities and terms (FEED-METRIC §2).

An independent reader of the raw logs (Claude Code JSONL with its subagent transcripts, Codex
rollouts), standard library only. It deliberately shares no code with Brain's extractor: the
measure must not inherit the extractor's blind spots. It survives what real logs contain
(damaged lines, unknown record types, duplicated records, lone surrogates) by skipping what it
cannot read.

Every item has a ``kind``, a ``key`` (what makes two sessions' items the same) and normalised
surface ``forms`` (what a feed must mention, see :func:`normalise`).
"""

from __future__ import annotations

import bisect
import heapq
import json
import re
import shlex
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

FILE, COMMAND, ERROR, ENTITY, TERM = "file", "command", "error", "entity", "term"
#: The kinds of the headline; ``term`` is diagnostic only.
KINDS = (FILE, COMMAND, ERROR, ENTITY)
ALL_KINDS = (*KINDS, TERM)

_NON_ALNUM = re.compile(r"[\W_]+")


def normalise(text: str) -> str:
    """Lower-cased, every run of non-alphanumerics one space, no leading/trailing space."""
    return _NON_ALNUM.sub(" ", text.lower()).strip()


@dataclass(frozen=True)
class NeededItem:
    kind: str
    key: str
    #: Normalised surface forms; a feed mentions the item when it contains one as a whole-word phrase.
    forms: tuple[str, ...]
    #: How the item is shown (the oracle lists it this way).
    label: str
    #: Tool calls the session had made before it first needed this item.
    first_call: int
    #: The human prompt (0-based, in ``SessionNeeds.prompts``) whose turn first needed this item; -1
    #: before the first prompt. Prompt-time recall shown at prompt k is credited only for items of
    #: turn k or later (docs/eval.md).
    first_turn: int = -1


@dataclass(frozen=True)
class SessionNeeds:
    session_id: str
    agent: str
    items: tuple[NeededItem, ...]
    tool_calls: int
    damaged_lines: int = 0
    #: The human prompts in order, as this reader saw them (replayed to prompt-time recall; never printed).
    prompts: tuple[str, ...] = field(default=(), repr=False)
    #: Per prompt, the keys of the items the operator typed in it (entities): recall at that prompt
    #: showing one of them only echoes the prompt and is not credited.
    prompt_keys: tuple[frozenset[str], ...] = field(default=(), repr=False)

    def headline(self) -> tuple[NeededItem, ...]:
        """The items of the headline kinds (no terms)."""
        return tuple(i for i in self.items if i.kind != TERM)


@dataclass(frozen=True)
class SessionFiles:
    """The raw files of one session: the main log and its subagent transcripts."""

    session_id: str
    agent: str
    main: Path
    subagents: tuple[Path, ...] = ()


# --- locating sessions ---------------------------------------------------------------------

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _first_session_id(path: Path) -> str | None:
    for record in _records(path):
        value = record.get("sessionId")
        if isinstance(value, str) and value:
            return value
    return None


def locate_claude(projects_dir: Path) -> dict[str, SessionFiles]:
    """Main sessions under ``projects_dir/<project>/`` with their subagent transcripts.

    A main file is ``<id>.jsonl`` directly in a project folder and not ``agent-*``; subagents
    are ``<id>/subagents/**/agent-*.jsonl`` (2.1.x) or flat ``agent-*.jsonl`` carrying the
    parent's sessionId (2.0.x).
    """
    found: dict[str, SessionFiles] = {}
    if not projects_dir.is_dir():
        return found
    flat_agents: list[Path] = []
    for project in sorted(p for p in projects_dir.iterdir() if p.is_dir()):
        for path in sorted(p for p in project.glob("*.jsonl") if p.is_file()):  # never a FIFO: opening one waits
            if path.name.startswith("agent-"):
                flat_agents.append(path)
                continue
            nested = tuple(sorted(p for p in (project / path.stem).glob("subagents/**/agent-*.jsonl") if p.is_file()))
            found[path.stem] = SessionFiles(path.stem, "claude-code", path, nested)
    for path in flat_agents:
        parent = _first_session_id(path)
        if parent in found:
            files = found[parent]
            found[parent] = SessionFiles(files.session_id, files.agent, files.main,
                                         tuple(sorted((*files.subagents, path))))
    return found


def locate_codex(codex_dir: Path) -> dict[str, SessionFiles]:
    """Codex rollouts under ``codex_dir`` (any depth), keyed by the session id."""
    found: dict[str, SessionFiles] = {}
    if not codex_dir.is_dir():
        return found
    for path in sorted(p for p in codex_dir.rglob("rollout-*.jsonl") if p.is_file()):
        session_id = None
        for record in _records(path):
            payload = record.get("payload")
            if record.get("type") == "session_meta" and isinstance(payload, dict):
                value = payload.get("id")
                session_id = value if isinstance(value, str) and value else None
                break
        if session_id is None:
            match = _UUID.findall(path.name)
            session_id = match[-1] if match else path.stem
        found.setdefault(session_id, SessionFiles(session_id, "codex", path))
    return found


# --- reading records -------------------------------------------------------------------------


def _clean(text: str) -> str:
    """Lone surrogates (truncated emoji in tool output) replaced, so the text can be encoded."""
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def _records(path: Path, damaged: list[int] | None = None) -> Iterator[dict[str, Any]]:
    """JSON objects of a JSONL file, one per line; unreadable lines are counted and skipped."""
    try:
        handle = path.open(encoding="utf-8", errors="replace")
    except OSError:
        return
    with handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):  # damaged, or nested deeper than Python parses
                if damaged is not None:
                    damaged[0] += 1
                continue
            if isinstance(record, dict):
                yield record


def _text_of(content: Any) -> str:
    """The text of a string or of a list of text-like blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return "\n".join(parts)
    return ""


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# --- what an item looks like -------------------------------------------------------------------

#: Names every repository has; a feed naming them says nothing about this project.
GENERIC_FILES = frozenset({
    "readme.md", "readme", "readme.rst", "readme.txt", "claude.md", "agents.md", "gemini.md", "skill.md",
    "changelog.md", "contributing.md", "license", "license.md", "license.txt", "todo.md", "notes.md",
    "package.json", "package-lock.json", "yarn.lock", "pnpm-lock.yaml", "bun.lockb", "tsconfig.json",
    "pyproject.toml", "setup.py", "setup.cfg", "requirements.txt", "uv.lock", "poetry.lock",
    "cargo.toml", "cargo.lock", "go.mod", "go.sum", "gemfile", "gemfile.lock", "mix.exs", "mix.lock",
    "makefile", "dockerfile", ".gitignore", ".dockerignore", ".env", ".env.example", "__init__.py",
    "index.js", "index.ts", "index.html", "main.py", "main.go", "main.rs", "lib.rs", "mod.rs",
    "config", "config.json", "config.yaml", "config.yml", "config.toml", "config.js", "config.ts",
    "settings.json", "settings.local.json", ".eslintrc", ".prettierrc", "conftest.py", "tmp", "test",
})

#: Extensions that make a shell argument a file.
FILE_EXTENSIONS = _words(
    "py pyi ipynb js mjs cjs ts tsx jsx vue svelte ex exs heex eex leex erl rs go rb java kt kts scala "
    "c h cc cpp hpp cs swift m php lua sh bash zsh fish ps1 sql md mdx rst txt json jsonl yaml yml "
    "toml ini cfg conf env xml html htm css scss sass less csv tsv lock gradle tf tfvars proto graphql "
    "dart r jl nix zig hs ml clj cljs el vim properties plist gql prisma"
)

#: Shell utilities: running them says nothing about the project (FEED-METRIC §2).
SHELL_UTILITIES = _words(
    "ls cat grep egrep fgrep rg ag sed awk head tail find fd echo printf cd pwd mkdir rmdir rm cp mv "
    "touch chmod chown ln wc sort uniq cut tr tee xargs diff cmp which whereis type command sleep "
    "kill killall pkill pgrep ps top htop true false test [ export unset source . set alias read "
    "less more file stat du df date env printenv whoami id hostname uname basename dirname realpath "
    "readlink tar gzip gunzip zip unzip open clear history exit wait jobs bg fg nl od xxd hexdump "
    "strings column paste join comm split tac rev fold fmt seq yes watch lsof tree bat jq yq "
    "sh bash zsh dash fish sudo time nohup exec builtin nice timeout curl wget ssh scp rsync "
    # the shell's own built-ins and keywords, like set, export and read above: no program runs
    "trap eval local declare typeset readonly shift return break continue let shopt ulimit umask "
    "pushd popd hash getopts "
    "git"
)
#: Windows plumbing: cmd and PowerShell built-ins and aliases (the Windows ls, grep, cat and shells).
WINDOWS_UTILITIES = _words(
    "dir where cls del erase copy move ren rename md rd findstr icacls attrib tasklist taskkill netstat "
    "ipconfig robocopy xcopy start setx mklink powershell pwsh cmd gci gc sls iwr irm select foreach sl ni ri"
)
#: A PowerShell cmdlet (``Get-ChildItem``, ``Receive-Job``: an approved verb, a noun): plumbing like ls and grep.
_CMDLET = re.compile(
    r"(?:add|approve|assert|backup|block|build|checkpoint|clear|close|compare|complete|"
    r"compress|confirm|connect|convert|convertfrom|convertto|copy|debug|deny|deploy|disable|"
    r"disconnect|dismount|edit|enable|enter|exit|expand|export|find|foreach|format|get|"
    r"grant|group|hide|import|initialize|install|invoke|join|limit|lock|measure|merge|"
    r"mount|move|new|open|optimize|out|ping|pop|protect|publish|push|read|receive|redo|"
    r"register|remove|rename|repair|request|reset|resize|resolve|restart|restore|resume|"
    r"revoke|save|search|select|send|set|show|skip|sort|split|start|step|stop|submit|"
    r"suspend|switch|sync|tee|test|trace|unblock|undo|uninstall|unlock|unprotect|unpublish|"
    r"unregister|update|use|wait|watch|where|write)-[a-z]+", re.IGNORECASE)
#: PowerShell words that start no program (``if (…) {``, ``foreach``, ``continue``).
_POWERSHELL_KEYWORDS = _words(
    "if else elseif foreach for while do until switch try catch finally function filter param return continue "
    "break throw trap begin process end exit default"
)
#: A Windows program file: ``Python.exe`` runs ``python``.
_WINDOWS_PROGRAM = re.compile(r"\.(?:exe|cmd|bat|com)\Z", re.IGNORECASE)
#: A backslash between two parts of a Windows path (``venv\\Scripts\\python.exe``) in a POSIX line:
#: a separator, not an escape (an escaped quote, ``$``, space, backslash or line end keeps its meaning).
_PATH_BACKSLASH = re.compile(r"(?<=[\w.:~-])\\(?=[\w.~-])")

#: Programs that run another program: ``uv run pytest`` keeps the third word.
_RUNNERS = {"uv": {"run", "tool"}, "poetry": {"run"}, "pdm": {"run"}, "pipenv": {"run"}, "hatch": {"run"},
            "rye": {"run"}, "npm": {"run", "exec"}, "pnpm": {"run", "exec", "dlx"}, "yarn": {"run", "dlx"},
            "bun": {"run", "x"}, "bundle": {"exec"}, "cargo": {"run"}, "go": {"run"}, "dotnet": {"run"},
            "docker": {"compose"}, "kubectl": set(), "mix": set()}
_INTERPRETERS = frozenset({"python", "python3", "python2", "py", "node", "ruby", "perl", "deno", "php", "elixir",
                           "iex", "pypy", "pypy3"})
_WRAPPERS = frozenset({"sudo", "time", "nohup", "exec", "builtin", "nice", "command", "env"})
_SUBCOMMAND = re.compile(r"[a-z][a-z0-9_.:-]*\Z")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")


def _strip_heredocs(command: str) -> str:
    """The command without heredoc bodies (their text is data, not commands)."""
    lines = command.split("\n")
    out: list[str] = []
    ending: str | None = None
    for line in lines:
        if ending is not None:
            if line.strip() == ending:
                ending = None
            continue
        out.append(line)
        match = _HEREDOC.search(line)
        if match:
            ending = match.group(2)
    return "\n".join(out)


def _split_lines(command: str) -> list[str]:
    """The command's lines, split at newlines outside quotes (a quoted script stays one argument)."""
    lines: list[str] = []
    current: list[str] = []
    quote = ""
    escaped = False
    for ch in command:
        if escaped:
            escaped = False
        elif ch == "\\" and quote != "'":
            escaped = True
        elif quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "\n":
            lines.append("".join(current))
            current = []
            continue
        current.append(ch)
    lines.append("".join(current))
    return lines


#: Shell keywords in front of a command (``do make test``) and words that start no command.
_SHELL_PREFIXES = frozenset({"do", "then", "else", "elif", "if", "while", "until", "!", "{", "}", "time"})
_SHELL_SKIP = frozenset({"for", "case", "done", "fi", "esac", "function", "select", "in"})


def _program_name(word: str) -> str:
    """The program a command word runs, lowercased: no folders (``/`` or ``\\``), no Windows ``.exe``."""
    return _WINDOWS_PROGRAM.sub("", re.split(r"[\\/]", word)[-1]).lower()


def _simple_commands(command: str, powershell: bool = False) -> Iterator[list[str]]:
    """The words of each simple command in a shell line, redirections dropped; backslashes in Windows
    paths are ``/`` (in a PowerShell line every backslash: PowerShell has no backslash escapes)."""
    text = _strip_heredocs(command).replace("\\\n", " ")
    text = text.replace("\\", "/") if powershell else _PATH_BACKSLASH.sub("/", text)
    for line in _split_lines(text):
        try:
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            lexer.commenters = "#"
            tokens = list(lexer)
        except ValueError:  # unbalanced quotes: plain words
            tokens = line.split()
        words: list[str] = []
        skip_next = False
        for token in tokens:
            if skip_next:
                skip_next = False
                continue
            if token and all(ch in "();<>|&" for ch in token):
                if token in (">", ">>", "<", ">&", "&>", ">|", "<<", "<<-", "<<<", "&>>", "<>"):
                    skip_next = True
                    continue
                if _trim(words):
                    yield _trim(words)
                words = []
                continue
            words.append(token)
        if _trim(words):
            yield _trim(words)


def _trim(words: list[str]) -> list[str]:
    while words and words[0] in _SHELL_PREFIXES:
        words = words[1:]
    if words and words[0] in _SHELL_SKIP:
        return []
    return words


_WINDOWS_PATH = re.compile(r"^(?:[A-Za-z]:[\\/]|\\\\)")


def slashed(path: str) -> str:
    """``path`` with ``/`` separators: a Windows path (``X:\\a\\b.py``, ``a\\b.py``) is the same path."""
    if _WINDOWS_PATH.match(path) or ("\\" in path and "/" not in path):
        return path.replace("\\", "/")
    return path


def _file_like(token: str) -> str | None:
    """``token`` as a file path when it looks like one (known extension, not a URL or a flag)."""
    if "://" in token or token.startswith("-") or any(ch in token for ch in "*?$`{}[]\"'=@ \t\n"):
        return None
    name = PurePosixPath(slashed(token)).name
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem or ext.lower() not in FILE_EXTENSIONS or not re.search(r"[A-Za-z]", stem):
        return None
    return token


def parse_shell(command: str, powershell: bool = False) -> tuple[list[str], list[str]]:
    """(commands as ``program subcommand``, file-like arguments) of a shell command line
    (``powershell``: a line of Claude Code's PowerShell tool)."""
    commands: list[str] = []
    files: list[str] = []
    for words in _simple_commands(command, powershell):
        while words and _ASSIGNMENT.match(words[0]):
            words = words[1:]
        while words and PurePosixPath(words[0]).name in _WRAPPERS:
            head = PurePosixPath(words[0]).name
            words = words[1:]
            while words and (words[0].startswith("-") or (head == "env" and _ASSIGNMENT.match(words[0]))):
                words = words[1:]
        if words and words[0] == "timeout":
            words = words[2:]
        if not words:
            continue
        program = _program_name(words[0])
        args = words[1:]
        if powershell and (program in _POWERSHELL_KEYWORDS or (args and args[0].startswith("="))):
            continue  # a keyword, or a hash table entry / assignment (``Name = 'x'``): no program
        for arg in args:
            value = arg.split("=", 1)[1] if arg.startswith("--") and "=" in arg else arg
            path = _file_like(value)
            if path is not None:
                files.append(path)
        if program in ("sh", "bash", "zsh", "dash") and len(args) >= 2 and args[0] in ("-c", "-lc", "-ic"):
            inner_commands, inner_files = parse_shell(args[1])
            commands.extend(inner_commands)
            files.extend(inner_files)
            continue
        flags = [arg.lower() for arg in args]
        if program in ("powershell", "pwsh") and ("-command" in flags or "-c" in flags):
            at = flags.index("-command") if "-command" in flags else flags.index("-c")
            if at + 1 < len(args):
                inner_commands, inner_files = parse_shell(args[at + 1], powershell=True)
                commands.extend(inner_commands)
                files.extend(inner_files)
            continue
        if _file_like(words[0]) is not None:
            files.append(words[0])
        if (not re.fullmatch(r"[a-z][a-z0-9_.+-]*", program) or program in SHELL_UTILITIES
                or program in WINDOWS_UTILITIES or _CMDLET.fullmatch(program)):
            continue
        command_key = _command_of(program, args)
        if command_key is not None:
            commands.append(command_key)
    return commands, files


def _command_of(program: str, args: list[str]) -> str | None:
    """``program subcommand``; None for an interpreter running inline code (``python -c``)."""
    if program in _INTERPRETERS:
        if len(args) >= 2 and args[0] == "-m":
            return f"{program} -m {args[1].lower()}"
        script = args[0] if args and not args[0].startswith("-") else None
        if script is not None and _file_like(script) is not None:
            return f"{program} {PurePosixPath(slashed(script)).name.lower()}"
        return None
    if not args or not _SUBCOMMAND.match(args[0]) or _file_like(args[0]) is not None:
        return program
    sub = args[0]
    if sub in _RUNNERS.get(program, set()) and len(args) >= 2 and _SUBCOMMAND.match(args[1]):
        return f"{program} {sub} {args[1]}"
    if program == "npx":
        return f"npx {sub}"
    return f"{program} {sub}"


# --- errors ---------------------------------------------------------------------------------------

_ERROR_CLASS = re.compile(r"\b([A-Z][A-Za-z0-9]*?[a-z0-9](?:Error|Exception|Warning))\b")
_ERRNO = re.compile(
    r"\b(E(?:NOENT|ACCES|ADDRINUSE|ADDRNOTAVAIL|CONNREFUSED|CONNRESET|CONNABORTED|TIMEDOUT|PERM|EXIST|"
    r"NOTDIR|ISDIR|NOSPC|PIPE|AGAIN|MFILE|NOTEMPTY|HOSTUNREACH|NETUNREACH|NOTFOUND|AI_AGAIN|BADF|INVAL|"
    r"NOMEM|ROFS|BUSY|NOTCONN|LOOP|NAMETOOLONG|DQUOT|XDEV)|ERR_[A-Z][A-Z_]{2,})\b"
)
#: bash's ``foo: command not found`` and zsh's ``zsh:1: command not found: foo`` (whose line
#: number before the words is no command: the name comes after them).
_NOT_FOUND = re.compile(r"(?:([\w.+-]+): command not found(?!:)|command not found: ([\w.+-]+))")
_NO_MODULE = re.compile(r"No module named ['\"]?([\w.]+)")
_TS_CODE = re.compile(r"\berror (TS\d{4,5})\b|\b(TS\d{4,5}):")
_RUST_CODE = re.compile(r"\berror\[(E\d{4})\]")
#: Harness messages flagged as errors that are not the project's errors.
_HARNESS_NOISE = (
    "The user doesn't want to proceed", "The user doesn't want to take this action", "User rejected",
    "Sibling tool call errored", "File has not been read yet", "[Request interrupted",
    "Error: The user doesn't want",
    # The agent called a tool with inputs its schema refuses (a parameter it made up): the harness's
    # error about the call, not the project's.
    "InputValidationError",
)


def parse_errors(text: str) -> list[tuple[str, str]]:
    """(key, label) of the error names in a failed tool result's text."""
    body = text.replace("<tool_use_error>", "").strip()
    if any(body.startswith(noise) or noise in body[:200] for noise in _HARNESS_NOISE):
        return []
    found: list[tuple[str, str]] = []
    for match in _ERROR_CLASS.finditer(body):
        found.append((match.group(1).lower(), match.group(1)))
    for match in _ERRNO.finditer(body):
        found.append((match.group(1).lower(), match.group(1)))
    for match in _NOT_FOUND.finditer(body):
        name = match.group(1) or match.group(2)
        found.append((f"command not found {name.lower()}", f"command not found: {name}"))
    for match in _NO_MODULE.finditer(body):
        found.append((f"no module named {match.group(1).lower()}", f"No module named {match.group(1)}"))
    for match in _TS_CODE.finditer(body):
        code = match.group(1) or match.group(2)
        found.append((code.lower(), code))
    for match in _RUST_CODE.finditer(body):
        found.append((match.group(1).lower(), match.group(1)))
    return found


# --- entities and terms from human prompts -------------------------------------------------------

_PLACEHOLDER = re.compile(r"\[REDACTED[^\]]*\]|redacted://\S+|/redacted/path/\S*")
_IDE_BLOCK = re.compile(r"<(ide_selection|ide_opened_file|system-reminder)>.*?</\1>", re.S)
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.I)
_BACKTICK = re.compile(r"`([^`\n]{2,80})`")
_PATH = re.compile(r"(?<![\w/.-])(?:~|\.{1,2})?/?[\w.-]+(?:/[\w.-]+)+/?")
#: A Windows path typed in a prompt (``X:\\addons\\crm\\views.xml``, ``crm\\views.xml``).
_WINDOWS_TYPED = re.compile(r"(?<![\w\\/.-])(?:[A-Za-z]:\\)?[\w.-]+(?:\\[\w.-]+)+\\?")
_DOTTED = re.compile(r"(?<![\w.-])[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)+(?![\w-])")
_SNAKE = re.compile(r"(?<![\w-])[A-Za-z0-9]*[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+(?![\w-])")
_CAMEL = re.compile(r"(?<![\w-])(?:[a-z]+[a-z0-9]*(?:[A-Z][a-z0-9]*)+|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+)(?![\w-])")
_HYPHEN = re.compile(r"(?<![\w.-])[a-z][a-z0-9]*(?:-[a-z0-9]+)+(?![\w-])")
_WORD = re.compile(r"[^\W\d_]{5,}")

#: Product and platform names typed in prose, not the project's identifiers.
BRAND_WORDS = _words(
    "github gitlab bitbucket macos ios ipados watchos tvos iphone ipad javascript typescript coffeescript "
    "youtube linkedin postgresql mysql sqlite mongodb redis openai chatgpt anthropic claude claudecode "
    "vscode intellij pycharm webstorm jetbrains graphql oauth devops fastapi nextjs nodejs reactjs vuejs "
    "tailwindcss postcss webpack esbuild vitest jest pytest numpy pandas pypi npmjs dockerhub kubernetes "
    "gpt chatgpt openapi websocket websockets powershell javafx dynamodb bigquery cloudflare vercel netlify "
    "heroku digitalocean onedrive dropbox whatsapp facebook instagram tiktok paypal wordpress shopify "
    "elasticsearch opensearch rabbitmq kafka jira confluence slack discord zoom figma notion trello "
    "xcode testflight appstore playwright puppeteer selenium liveview phoenix codex gemini mcp e.g i.e "
    "a.m p.m"
)
#: Parts that make a hyphenated word common English (``follow-up``, ``read-only``, ``end-to-end``).
HYPHEN_ENGLISH = _words(
    "a an the to of in on at by up out off over under down for from with into onto via per and or not "
    "no non re pre post sub co self well ill real time read only write long short term high low level "
    "end front back built follow set check opt log sign one two three four five first second third "
    "multi cross full half side auto semi anti hand made based like free safe aware specific related "
    "friendly driven oriented ready wide date step run dry hot cold hard soft open close closed day week "
    "month year old new same next last all any more less most least top bottom left right inner outer "
    "part sort kind let make take use used get got go going come see look looking start stop e x "
    "user client server side word line lines bit bits many much few fine grained good bad best worst "
    "case first-class class world human machine so called non-trivial trivial quick easy deep dive "
    "double single triple per cent percent ever never always pop mid in-place place place-holder "
    "drop down drag click through walk thought counter intuitive state art"
)
#: Frequent words of five letters or more that carry no topic.
TERM_STOPWORDS = _words(
    "about above after again against along already also although always among another anything "
    "around because before being below between both could doesn does didn done during each either "
    "every everything first following found from going great having here however instead into just "
    "know known later least let like little looks make makes maybe might more most much must need "
    "needs never next nothing now other others otherwise over perhaps please pretty probably quite "
    "rather really right same seems shall should since some something still such sure take than "
    "thank thanks that their them then there these they thing things think this those though "
    "through thus together under until using very want wants wasn well were what whatever when "
    "where whether which while whole will with within without work would write yeah your yours "
    "again actually currently better check change changes could create added update updated "
    "continue wouldn haven hasn isn aren weren shouldn couldn can't won't let's that's there's "
    "it's what's don't doesn't didn't i'm i've i'll you're we're they're"
)


def _hyphen_is_id(word: str) -> bool:
    parts = word.split("-")
    if any(ch.isdigit() for ch in word):
        return True
    return not any(part in HYPHEN_ENGLISH for part in parts)


def _entity_key(token: str) -> str | None:
    """The key of a typed identifier: a path to a file is keyed by its basename, like a file item."""
    token = token.strip().strip(".,:;!?()[]{}\"'")
    if len(token) < 3 or len(token) > 80 or not re.search(r"[A-Za-z]", token):
        return None
    lowered = slashed(token).lower()
    if "/" in lowered:
        name = lowered.rstrip("/").rsplit("/", 1)[-1]
        if _file_like(name) is not None:
            lowered = name
        elif len(normalise(lowered).split()) < 2:
            return None  # `.../tools/`: one plain word, not an identifier
    if lowered in BRAND_WORDS or lowered in GENERIC_FILES or normalise(lowered) == "":
        return None
    return lowered


def parse_prompt(text: str) -> tuple[list[tuple[str, str]], list[str]]:
    """(entity (key, label) pairs, terms) of one human prompt."""
    text = _PLACEHOLDER.sub(" ", _IDE_BLOCK.sub(" ", text))
    entities: list[tuple[str, str]] = []

    def take(pattern: re.Pattern[str], source: str, keep: Any = None) -> str:
        def repl(match: re.Match[str]) -> str:
            token = match.group(1) if pattern.groups else match.group(0)
            if keep is None or keep(token):
                key = _entity_key(token)
                if key is not None:
                    entities.append((key, token.strip()))
            return " "

        return pattern.sub(repl, source)

    rest = take(_BACKTICK, text, lambda t: len(t.split()) <= 4)
    rest = _URL.sub(" ", rest)
    terms_source = rest
    rest = take(_WINDOWS_TYPED, rest, lambda t: _path_is_entity(slashed(t)))
    rest = take(_PATH, rest, _path_is_entity)
    rest = take(_DOTTED, rest, lambda t: t.lower() not in BRAND_WORDS)
    rest = take(_SNAKE, rest)
    rest = take(_CAMEL, rest, lambda t: t.lower() not in BRAND_WORDS)
    take(_HYPHEN, rest, _hyphen_is_id)
    terms = [w.lower() for w in _WORD.findall(terms_source) if w.lower() not in TERM_STOPWORDS]
    return entities, terms


def _path_is_entity(token: str) -> bool:
    last = token.rstrip("/").rsplit("/", 1)[-1]
    return token.count("/") >= 2 or token.startswith(("/", "./", "~/", "../")) or "." in last


# --- the session as a stream of events -----------------------------------------------------------


@dataclass
class _Collector:
    """Items in the order the session first needed them."""

    cwd: str | None
    calls: int = 0
    items: dict[tuple[str, str], NeededItem] = field(default_factory=dict)
    prompts: list[str] = field(default_factory=list)
    #: ``calls`` when each prompt arrived: a call numbered c belongs to the last prompt that came at or before c.
    prompt_calls: list[int] = field(default_factory=list)
    prompt_keys: list[frozenset[str]] = field(default_factory=list)

    def _turn(self, at: int | None) -> int:
        if at is None:
            return len(self.prompts) - 1
        return bisect.bisect_right(self.prompt_calls, at) - 1

    def add(self, kind: str, key: str, forms: Iterable[str], label: str, at: int | None = None) -> None:
        """Record a need; one item per key (a file typed in a prompt and then read is one item,
        of the more specific kind: file, then command, error, entity)."""
        normal = tuple(dict.fromkeys(f for f in (normalise(x) for x in forms) if f))
        if not key or not normal:
            return
        slot = (TERM if kind == TERM else "item", key)
        when = self.calls if at is None else at
        turn = self._turn(at)
        old = self.items.get(slot)
        if old is None:
            self.items[slot] = NeededItem(kind, key, normal, label, when, turn)
            return
        first = min(old.first_call, when)
        first_turn = min(old.first_turn, turn)
        merged = tuple(dict.fromkeys((*old.forms, *normal)))
        if ALL_KINDS.index(kind) < ALL_KINDS.index(old.kind):
            self.items[slot] = NeededItem(kind, key, tuple(dict.fromkeys((*normal, *old.forms))), label, first,
                                          first_turn)
        else:
            self.items[slot] = NeededItem(old.kind, key, merged, old.label, first, first_turn)

    def file(self, path: str, at: int | None = None) -> None:
        path = slashed(path.strip())
        if not path or "://" in path:
            return
        name = PurePosixPath(path).name
        if not name or name.lower() in GENERIC_FILES or not re.search(r"[A-Za-z]", name):
            return
        relative = path
        root = slashed(self.cwd).rstrip("/") + "/" if self.cwd else ""
        folded = _WINDOWS_PATH.match(path) is not None  # Windows paths compare without case
        if root and (path.lower().startswith(root.lower()) if folded else path.startswith(root)):
            relative = path[len(root):]
        self.add(FILE, name.lower(), (name, relative), relative, at)

    def shell(self, command: str, at: int | None = None, powershell: bool = False) -> None:
        commands, files = parse_shell(command, powershell)
        for cmd in commands:
            self.add(COMMAND, cmd, (cmd,), cmd, at)
        for path in files:
            self.file(path, at)

    def errors(self, text: str, at: int | None = None) -> None:
        for key, label in parse_errors(text):
            self.add(ERROR, key, (label,), label, at)

    def prompt(self, text: str) -> None:
        if not text.strip():
            return
        self.prompts.append(text)
        self.prompt_calls.append(self.calls)
        entities, terms = parse_prompt(text)
        for key, label in entities:
            self.add(ENTITY, key, (label, key), label)
        for term in terms:
            self.add(TERM, term, (term,), term)
        self.prompt_keys.append(frozenset(key for key, _ in entities))

    def result(self, session_id: str, agent: str, damaged: int) -> SessionNeeds:
        ordered = sorted(self.items.values(), key=lambda i: (i.first_call, ALL_KINDS.index(i.kind), i.key))
        return SessionNeeds(session_id, agent, tuple(ordered), self.calls, damaged, tuple(self.prompts),
                            tuple(self.prompt_keys))


# --- Claude Code --------------------------------------------------------------------------------

_FILE_TOOLS = frozenset({"Read", "Edit", "MultiEdit", "Write", "NotebookEdit"})
#: Claude Code run from Zed calls its own tools through an MCP server named ``acp``
#: (``mcp__acp__Read`` is Read, with Read's input).
_ACP_PREFIX = "mcp__acp__"
_HARNESS_PREFIXES = (
    "Caveat:", "<command-name>", "<command-message>", "<command-args>", "<local-command-stdout>",
    "<local-command-stderr>", "<local-command-caveat>", "<system-reminder>", "<task-notification>",
    "<bash-notification>", "[Request interrupted by user", "This session is being continued from a previous conversation",
    "Warmup", "<user-prompt-submit-hook>", "<bash-input>", "<bash-stdout>", "<bash-stderr>",
)


def _human_prompt(record: Mapping[str, Any]) -> str | None:
    """The prompt text of a real human ``user`` record (§1.6 of the format notes), else None."""
    if record.get("type") != "user" or record.get("isMeta") or record.get("isCompactSummary"):
        return None
    if record.get("isSidechain"):
        return None  # written by the parent agent, not typed by the operator
    message = record.get("message")
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
        return None
    text = _IDE_BLOCK.sub(" ", _text_of(content)).strip()
    if not text or text.startswith(_HARNESS_PREFIXES):
        return None
    return text


def _monotonic(records: Iterable[dict[str, Any]], rank: int) -> Iterator[tuple[str, int, int, dict[str, Any]]]:
    """Records keyed by the latest timestamp seen so far, so a merge keeps each file's order."""
    latest = ""
    for index, record in enumerate(records):
        stamp = record.get("timestamp")
        if isinstance(stamp, str) and stamp > latest:
            latest = stamp
        yield latest, rank, index, record


def read_claude(files: SessionFiles, cwd: str | None = None) -> SessionNeeds:
    """The items a Claude Code session needed, its subagents' tool calls included."""
    damaged = [0]
    streams = [_monotonic(_records(files.main, damaged), 0)]
    streams += [_monotonic(_records(path, damaged), rank) for rank, path in enumerate(files.subagents, 1)]
    if cwd is None:
        cwd = next((r["cwd"] for r in _records(files.main) if isinstance(r.get("cwd"), str)), None)
    out = _Collector(cwd)
    seen: set[str] = set()
    call_index: dict[str, int] = {}
    for _, _, _, record in heapq.merge(*streams, key=lambda e: (e[0], e[1], e[2])):
        uuid = record.get("uuid")
        if isinstance(uuid, str):
            if uuid in seen:
                continue
            seen.add(uuid)
        prompt = _human_prompt(record)
        if prompt is not None:
            out.prompt(_clean(prompt))
            continue
        message = record.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                _claude_tool(out, block)
                if isinstance(block.get("id"), str):
                    call_index[block["id"]] = out.calls
                out.calls += 1
            elif block.get("type") == "tool_result" and block.get("is_error"):
                at = call_index.get(block.get("tool_use_id") or "")
                out.errors(_clean(_text_of(block.get("content"))), at)
    return out.result(files.session_id, files.agent, damaged[0])


def _claude_tool(out: _Collector, block: Mapping[str, Any]) -> None:
    name = block.get("name")
    tool_input = block.get("input")
    if not isinstance(tool_input, dict) or not isinstance(name, str):
        return
    name = name.removeprefix(_ACP_PREFIX)
    if name in _FILE_TOOLS:
        for key in ("file_path", "notebook_path"):
            value = tool_input.get(key)
            if isinstance(value, str):
                out.file(_clean(value))
    elif name in ("Bash", "PowerShell") and isinstance(tool_input.get("command"), str):
        out.shell(_clean(tool_input["command"]), powershell=name == "PowerShell")


# --- Codex ----------------------------------------------------------------------------------------

_CODEX_SCAFFOLDING = (
    "<permissions instructions>", "<collaboration_mode>", "<skills_instructions>", "<plugins_instructions>",
    "# AGENTS.md instructions", "<environment_context>", "<user_instructions>", "<turn_aborted>",
    "<user_shell_command>", "<apps_instructions>",
)
_PATCH_HEADER = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+)$|^\*\*\* Move to: (.+)$", re.M)
_EXIT_CODE = re.compile(r"Process exited with code (-?\d+)")
_SHELL_TOOLS = frozenset({"exec_command", "shell", "container.exec", "local_shell", "shell_command"})


def _codex_shell_text(arguments: Mapping[str, Any]) -> str | None:
    for key in ("cmd", "command"):
        value = arguments.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            if len(value) >= 3 and PurePosixPath(value[0]).name in ("bash", "sh", "zsh") and value[1] in ("-c", "-lc"):
                return str(value[2])
            return shlex.join(value)
    return None


def read_codex(files: SessionFiles, cwd: str | None = None) -> SessionNeeds:
    """The items a Codex rollout needed: exec_command / apply_patch calls, failures, prompts."""
    damaged = [0]
    out = _Collector(cwd)
    prompts: set[str] = set()
    failed_calls: set[str] = set()
    call_index: dict[str, int] = {}
    for record in _records(files.main, damaged):
        kind = record.get("type")
        payload = record.get("payload")
        if not isinstance(payload, dict):
            continue
        ptype = payload.get("type")
        if kind == "session_meta" and out.cwd is None and isinstance(payload.get("cwd"), str):
            out.cwd = payload["cwd"]
        if kind == "response_item" and ptype == "message" and payload.get("role") == "user":
            _codex_prompt(out, prompts, _text_of(payload.get("content")))
        elif kind == "event_msg" and ptype == "user_message" and isinstance(payload.get("message"), str):
            _codex_prompt(out, prompts, payload["message"])
        elif kind == "response_item" and ptype in ("function_call", "custom_tool_call", "local_shell_call"):
            call_id = payload.get("call_id")
            if isinstance(call_id, str):
                call_index[call_id] = out.calls
            _codex_call(out, payload)
            out.calls += 1
        elif kind == "response_item" and ptype in ("function_call_output", "custom_tool_call_output"):
            text = payload.get("output")
            text = text if isinstance(text, str) else _text_of(text)
            match = _EXIT_CODE.search(text[:400])
            call_id = str(payload.get("call_id") or "")
            if match and match.group(1) != "0" and call_id not in failed_calls:
                failed_calls.add(call_id)
                out.errors(_clean(text), call_index.get(call_id))
        elif kind == "event_msg" and ptype == "exec_command_end":
            code = payload.get("exit_code")
            call_id = str(payload.get("call_id") or "")
            if isinstance(code, int) and code != 0 and call_id not in failed_calls:
                failed_calls.add(call_id)
                text = "\n".join(str(payload.get(k) or "") for k in ("stderr", "aggregated_output", "stdout"))
                out.errors(_clean(text), call_index.get(call_id))
    return out.result(files.session_id, files.agent, damaged[0])


def _codex_prompt(out: _Collector, seen: set[str], text: str) -> None:
    text = text.strip()
    if not text or text.startswith(_CODEX_SCAFFOLDING) or text in seen:
        return
    seen.add(text)
    out.prompt(_clean(text))


def _codex_call(out: _Collector, payload: Mapping[str, Any]) -> None:
    name = payload.get("name") if isinstance(payload.get("name"), str) else ""
    if payload.get("type") == "custom_tool_call" and isinstance(payload.get("input"), str):
        if name == "apply_patch":
            _patch_files(out, payload["input"])
        return
    if payload.get("type") == "local_shell_call":
        action = payload.get("action")
        if isinstance(action, dict):
            text = _codex_shell_text(action)
            if text:
                out.shell(_clean(text))
        return
    raw = payload.get("arguments")
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except (ValueError, RecursionError):
        return
    if not isinstance(arguments, dict):
        return
    if name in _SHELL_TOOLS:
        text = _codex_shell_text(arguments)
        if text:
            out.shell(_clean(text))
    elif name == "apply_patch" and isinstance(arguments.get("input"), str):
        _patch_files(out, arguments["input"])


def _patch_files(out: _Collector, patch: str) -> None:
    for match in _PATCH_HEADER.finditer(patch):
        out.file(_clean((match.group(1) or match.group(2)).strip()))


def read_needs(files: SessionFiles, cwd: str | None = None) -> SessionNeeds:
    """The needed items of one session, read from its raw files."""
    if files.agent == "codex":
        return read_codex(files, cwd)
    return read_claude(files, cwd)
