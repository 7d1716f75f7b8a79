"""What a session worked on, read from its tool calls and prompts (issue 11 item 2). Pure.

The session readers feed a :class:`WorkLog` record by record (tool calls, tool results,
human prompts, todo states, each with the line number in the log file); it returns the
ranked work items a :class:`~brain.core.session.Session` carries:

- files edited (Edit, MultiEdit, Write, NotebookEdit, ``apply_patch``) and read (Read),
  ranked by count, relative to the session's cwd;
- commands as program + subcommand (``uv run pytest``, ``mix phx.server``, ``npm run
  build``): shell utilities, every ``git`` command, heredoc bodies and redirections are left
  out (``../shared/FEED-METRIC.md`` §2);
- failures: the error signature of a failed tool call (exception / warning class, errno
  name, ``command not found``, ``No module named``, TypeScript / Rust codes, else the first
  line) and whether the same command (or the same tool on the same file) succeeded later;
  harness noise (a rejected tool call, a sibling that errored, a file not read yet) is no
  failure;
- identifiers the operator typed: backticked tokens, snake_case, camelCase, dotted names,
  paths and hyphenated ids such as ``spotter-dov``;
- lessons and decisions, through :class:`brain.core.lessons.LessonMiner`.
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
import shlex
from collections import Counter
from dataclasses import dataclass, field
from itertools import pairwise

from brain.core.lessons import LessonMiner
from brain.core.redaction import redact
from brain.core.session import (
    ITEM_CHARS,
    MAX_FAILURE_NAMES,
    MAX_FAILURES,
    MAX_IDENTIFIERS,
    MAX_RANKED,
    MAX_TODOS,
    Failure,
    Lesson,
    Todo,
)
from brain.core.text import error_names, strip_ansi
from brain.core.workpaths import ABSOLUTE_PATH, DRIVE_PATH

#: Programs that are plumbing, not the work (FEED-METRIC §2: shell utilities and all of git).
SHELL_UTILITIES = frozenset(
    ["ls", "cat", "grep", "egrep", "fgrep", "rg", "sed", "awk", "head", "tail", "wc", "echo", "printf", "cd", "pwd", "find", "xargs", "sort", "uniq", "cut", "tr", "tee", "touch", "mkdir", "rm", "rmdir", "cp", "mv", "ln", "chmod", "chown", "stat", "file", "which", "whereis", "type", "true", "false", "sleep", "date", "env", "export", "set", "unset", "source", ".", "test", "[", "diff", "cmp", "basename", "dirname", "realpath", "readlink", "less", "more", "nl", "od", "hexdump", "xxd", "jq", "yq", "tree", "du", "df", "ps", "kill", "pkill", "killall", "lsof", "open", "clear", "history", "alias", "exit", "read", "wait", "trap", "eval", "exec", "time", "timeout", "nohup", "sudo", "command", "builtin", "printenv", "whoami", "hostname", "uname", "id", "tar", "zip", "unzip", "gzip", "gunzip", "curl", "wget", "ssh", "scp", "rsync", "base64", "md5sum", "sha1sum", "sha256sum", "shasum", "column", "fold", "paste", "join", "comm", "split", "csplit", "expand", "unexpand", "rev", "tac", "fd", "bat", "git"]
)
#: Windows plumbing: cmd and PowerShell built-ins and aliases, the Windows ls, grep and cat.
WINDOWS_UTILITIES = frozenset(
    ["dir", "where", "cls", "del", "erase", "copy", "move", "ren", "rename", "md", "rd", "findstr", "icacls", "attrib", "tasklist", "taskkill", "netstat", "ipconfig", "robocopy", "xcopy", "start", "setx", "mklink", "powershell", "pwsh", "cmd", "gci", "gc", "sls", "iwr", "irm", "select", "foreach", "%", "?", "sl", "ni", "ri"]
)
#: A PowerShell cmdlet (``Get-ChildItem``, ``Receive-Job``: an approved verb, a noun): plumbing like ls and grep.
CMDLET = re.compile(
    r"^(?:Add|Approve|Assert|Backup|Block|Build|Checkpoint|Clear|Close|Compare|Complete|"
    r"Compress|Confirm|Connect|Convert|ConvertFrom|ConvertTo|Copy|Debug|Deny|Deploy|Disable|"
    r"Disconnect|Dismount|Edit|Enable|Enter|Exit|Expand|Export|Find|ForEach|Format|Get|"
    r"Grant|Group|Hide|Import|Initialize|Install|Invoke|Join|Limit|Lock|Measure|Merge|"
    r"Mount|Move|New|Open|Optimize|Out|Ping|Pop|Protect|Publish|Push|Read|Receive|Redo|"
    r"Register|Remove|Rename|Repair|Request|Reset|Resize|Resolve|Restart|Restore|Resume|"
    r"Revoke|Save|Search|Select|Send|Set|Show|Skip|Sort|Split|Start|Step|Stop|Submit|"
    r"Suspend|Switch|Sync|Tee|Test|Trace|Unblock|Undo|Uninstall|Unlock|Unprotect|Unpublish|"
    r"Unregister|Update|Use|Wait|Watch|Where|Write)-[A-Za-z]+$", re.IGNORECASE)
#: PowerShell words that start no program (``if (…) {``, ``foreach``, ``continue``).
POWERSHELL_KEYWORDS = frozenset(
    ["if", "else", "elseif", "foreach", "for", "while", "do", "until", "switch", "try", "catch", "finally", "function", "filter", "param", "return", "continue", "break", "throw", "trap", "begin", "process", "end", "exit", "default"]
)
#: Launchers whose next word names the real program (``npx vitest``, ``uv run pytest``).
_RUNNERS = {
    "uv": ("run", "tool", "pip"), "npm": ("run", "exec"), "pnpm": ("run", "exec", "dlx"), "yarn": ("run", "dlx"),
    "bun": ("run", "x"), "poetry": ("run",), "pipenv": ("run",), "bundle": ("exec",), "mix": ("run",),
    "cargo": ("run",), "go": ("run",), "dotnet": ("run",), "hatch": ("run",), "pdm": ("run",), "rye": ("run",),
    "docker": ("compose",),
}
_INTERPRETERS = frozenset({"python", "python3", "python2", "py", "node", "ruby", "perl", "deno", "php", "pypy3",
                           "bash", "sh", "zsh"})
#: Scripts without an extension that a framework runs its tasks with (Laravel, Symfony).
_FRAMEWORK_CONSOLES = {"php": ("artisan", "bin/console")}
_PREFIXES = frozenset({"sudo", "time", "nohup", "exec", "command", "env", "builtin", "then", "do", "else", "!",
                       "if", "elif", "while", "until"})
#: Shell syntax that opens or closes a compound command (``for d in …; do …; done``): no program.
_SHELL_SYNTAX = frozenset({"for", "select", "case", "esac", "done", "fi", "function", "in", "[[", "]]"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_WORD = re.compile(r"^[A-Za-z][A-Za-z0-9._:/+-]{0,40}$")
_FILE_ARG = re.compile(r"^(?:[A-Za-z]:/)?(?:[\w.~-]*/)*(?P<name>[\w-][\w.-]*)$")
#: File names without an extension that are still files.
_BARE_FILES = frozenset({"Makefile", "Dockerfile", "Gemfile", "Rakefile", "Procfile", "Justfile", "Containerfile"})
#: Extensions that make a bare word (no ``/``) a file name rather than a task like ``phx.server``.
FILE_EXTENSIONS = frozenset(
    ["py", "pyi", "ipynb", "js", "mjs", "cjs", "ts", "tsx", "jsx", "vue", "svelte", "ex", "exs", "erl", "heex", "eex", "rb", "go", "rs", "java", "kt", "kts", "scala", "c", "h", "cc", "cpp", "hpp", "cs", "swift", "m", "php", "pl", "lua", "r", "sql", "sh", "bash", "zsh", "fish", "ps1", "json", "jsonl", "yaml", "yml", "toml", "ini", "cfg", "conf", "env", "lock", "md", "mdx", "rst", "txt", "csv", "tsv", "xml", "html", "htm", "css", "scss", "sass", "less", "svg", "png", "jpg", "gif", "pdf", "log", "proto", "graphql", "tf", "hcl", "gradle", "mk", "dockerfile", "vtt"]
)
#: Programs whose first plain argument is a pattern or a script, not a file.
_PATTERN_FIRST = frozenset({"sed", "awk", "grep", "egrep", "fgrep", "rg", "jq", "yq"})

_CLASS_NAME = re.compile(r"\b([A-Z][A-Za-z0-9]*(?:Error|Exception|Warning|Fault|Failure|Panic))\b")
_RAISED = re.compile(r"^[ \t>|E]*(?:[\w.]+\.)?([A-Z][A-Za-z0-9]*(?:Error|Exception|Warning|Interrupt|Exit))\b:",
                     re.MULTILINE)
_ERRNO = re.compile(r"\b(E(?:ACCES|ADDRINUSE|ADDRNOTAVAIL|AGAIN|BADF|CONNABORTED|CONNREFUSED|CONNRESET|EXIST|HOSTUNREACH"
                    r"|INVAL|ISDIR|MFILE|NETUNREACH|NOENT|NOMEM|NOSPC|NOTDIR|NOTEMPTY|NOTFOUND|PERM|PIPE|ROFS"
                    r"|TIMEDOUT|AI_AGAIN))\b")
_NOT_FOUND = re.compile(r"(?:command not found:?\s*([\w./-]+)|([\w./-]+): command not found)")
_NO_MODULE = re.compile(r"No module named '?([\w.]+)'?")
_CODE = re.compile(r"\b((?:TS\d{4,5})|(?:error\[E\d{4}\]))")
#: Tool results that report the harness, not the work (FEED-METRIC §2).
_HARNESS_ERRORS = (
    "The user doesn't want to proceed",
    "The user doesn't want to take this action",
    "User rejected",
    "Sibling tool call errored",
    "File has not been read yet",
    "File has been modified since read",
    "has been modified since it was read",
    "<tool_use_error>",
    "Request interrupted",
    "Permission to use",
    "requested permissions",
    "requires approval",
    "was blocked. For security",
    "contains multiple operations",
)
#: A short line of prose in a failed command's result: the operator's answer to a rejected call
#: (newer Claude Code writes the operator's words as the result), not the command's output.
_NOT_PROSE = re.compile(r"\b(?:error|errors|fail\w*|fatal|denied|not found|no such|exception|traceback|warn\w*"
                        r"|cannot|can't|invalid|exit code|usage|(?:unknown|unrecognized|illegal) (?:option|argument|command"
                        r"|flag))\b|^[\w./()~-]+:\s|^\s*[\[{<=#|>$]", re.IGNORECASE)
#: A program's log level (``INFO  Unknown option "--verbose".``), in capitals as programs print it
#: (``warn``, ``error`` and ``fatal`` are in :data:`_NOT_PROSE` in any case).
_LOG_LEVEL = re.compile(r"\b(?:INFO|DEBUG|NOTICE)\b")


def is_operator_feedback(output: str) -> bool:
    """A failed command's result that is the operator's answer to a rejected call, not output:
    one short line of prose. Terminal escapes (colours) and a program's log levels or usage
    complaints are output: no operator types them."""
    text = output.strip()
    return (bool(text) and "\n" not in text and "\x1b" not in text and len(text) <= 500 and len(text.split()) >= 4
            and not _NOT_PROSE.search(text) and not _LOG_LEVEL.search(text)
            and not any(marker in text for marker in _HARNESS_ERRORS)
            and not text.startswith(("The user ", "User ", "STOP ")))
_EXIT_LINE = re.compile(r"^(?:Error: )?Exit code:? -?\d+\s*$|^Process exited with code -?\d+\s*$"
                        r"|^(?:Chunk ID|Wall time|Original token count|Output|Process running with session ID):")
_ERROR_LINE = re.compile(r"\b(?:error|failed|fatal|failure)\b\s*(?::|\[(?!\s*\d+%))", re.IGNORECASE)
#: A linter's finding: ``path:line:col: CODE message``.
_LINT = re.compile(r"^\S+:\d+:\d+:?\s+\S|^[A-Z]{1,4}\d{3,4}\s+[A-Z]", re.MULTILINE)
#: pytest's short traceback: ``tests/test_x.py:60: AssertionError``.
_WHERE_RAISED = re.compile(r"^\S+:\d+: ([A-Z][A-Za-z0-9]*(?:Error|Exception))\s*$", re.MULTILINE)
#: Test runner preamble lines: never what went wrong.
_PREAMBLE = ("test session starts", "platform ", "rootdir:", "cachedir:", "plugins:", "configfile:", "collected ",
             "collecting", "testpaths:")
_TROUBLE = re.compile(r"\b(?:FAILED|failed|failure|errors?|not found|no such file|denied|refused|timed out)\b",
                      re.IGNORECASE)


#: A Windows program file: ``Python.exe`` runs ``python``.
_WINDOWS_PROGRAM = re.compile(r"\.(?:exe|cmd|bat|com)$", re.IGNORECASE)
#: A backslash between two parts of a Windows path (``venv\\Scripts\\python.exe``): a separator, not a
#: POSIX escape (an escaped quote, ``$``, space, backslash or line end keeps its meaning).
_PATH_BACKSLASH = re.compile(r"(?<=[\w.:~-])\\(?=[\w.~-])")


def _program(token: str) -> str:
    """The program a word runs: its name without folders (``/`` or ``\\``), a Windows ``.exe`` suffix
    and, on Windows, case (``C:\\Python312\\Python.exe`` runs ``python``)."""
    name = re.split(r"[\\/]", token)[-1]
    bare = _WINDOWS_PROGRAM.sub("", name)
    return bare.lower() if bare != name else name


def windows_paths(command: str, powershell: bool = False) -> str:
    """``command`` with the backslashes of Windows paths as ``/``: PowerShell has no backslash escapes
    (every backslash separates), a POSIX line keeps its escapes."""
    return command.replace("\\", "/") if powershell else _PATH_BACKSLASH.sub("/", command)


#: A PowerShell here-string: ``@'`` or ``@"`` ends its line, ``'@`` or ``"@`` starts the closing one
#: (one cut at 4 000 characters runs to the end). Its lines are data, never commands.
_HERE_STRING = re.compile(r"@(['\"])[ \t]*\r?\n(?:.*?\r?\n\1@|.*\Z)", re.DOTALL)


def simple_commands(command: str, powershell: bool = False) -> list[list[str]]:
    """The words of each simple command in a shell line, split on unquoted ``; && || | & \\n $( `;``
    a heredoc body (after an unquoted ``<<``), a PowerShell here-string's (``@'`` … ``'@``: a script
    piped to ``python -``) and redirections are left out. Backslashes in Windows paths are ``/``
    (``powershell``: every backslash)."""
    parts: list[str] = []
    current: list[str] = []
    quote = ""
    text = command[:4000]
    if powershell and "@" in text:
        text = _HERE_STRING.sub(lambda found: found.group(1) * 2, text)
    text = windows_paths(text, powershell)
    index = 0
    while index < len(text):
        char = text[index]
        if quote:
            current.append(char)
            if char == quote:
                quote = ""
            elif char == "\\" and quote == '"' and index + 1 < len(text):
                current.append(text[index + 1])
                index += 1
        elif char in "'\"":
            quote = char
            current.append(char)
        elif text.startswith("\\\n", index):  # a line continuation: the same command goes on
            current.append(" ")
            index += 2
            continue
        elif text.startswith("<<", index):
            break
        elif char == "&" and (text.startswith(("&>", ">&"), index) or text[index - 1 : index] == ">"):
            current.append(char)  # a redirection (2>&1, &>file), not a separator
        elif char in ";|&\n`" or text.startswith("$(", index):
            parts.append("".join(current))
            current = []
            index += 2 if text.startswith(("&&", "||", "$("), index) else 1
            continue
        else:
            current.append(char)
        index += 1
    parts.append("".join(current))
    out: list[list[str]] = []
    for part in parts:
        try:
            words = shlex.split(part, comments=True)
        except ValueError:
            words = part.split()
        words = [w for w in words if not re.match(r"^\d*[<>]", w) and w not in ("(", ")", "{", "}")]
        if words:
            out.append(words)
    return out


#: Programs that change the shell's folder for the rest of a line (``cd agents && ./run.sh``).
_CHANGE_DIR = frozenset({"cd", "pushd", "chdir", "set-location", "sl"})


#: Git Bash's name for a drive (``/c/Users/…`` is ``C:/Users/…``).
_MSYS_DRIVE = re.compile(r"^/([A-Za-z])(?=/|$)")


def _on_drive(path: str, where: str) -> str:
    """``path`` with Git Bash's drive prefix as the drive, where the shell works on a Windows drive."""
    return _MSYS_DRIVE.sub(lambda found: f"{found.group(1).upper()}:", path) if DRIVE_PATH.match(where) else path


def _moved(where: str, target: str) -> str:
    """The folder a ``cd target`` from ``where`` lands in; "" when it cannot be told (no target, a
    variable, ``-``, the home folder) or ``where`` was not known and ``target`` is relative."""
    if not target or target.startswith(("$", "-", "~", "%")):
        return ""
    target = _on_drive(target, where).rstrip("/") or "/"
    if DRIVE_PATH.match(target + "/"):
        target += "/"  # ``C:`` alone is the drive's root here
    if ABSOLUTE_PATH.match(target):
        return posixpath.normpath(target)
    return posixpath.normpath(posixpath.join(where, target)) if where else ""


def _in_folder(word: str, where: str) -> str:
    """A file argument as the path it names: relative to ``where`` (the folder the command ran
    in) when that is known, ``./`` and ``..`` steps folded (``./run.sh`` is ``run.sh``)."""
    if word.startswith("~"):
        return word
    if ABSOLUTE_PATH.match(word):
        return _on_drive(word, where)
    if where:
        return posixpath.normpath(posixpath.join(where, word))
    folded = posixpath.normpath(word)
    return word if folded.startswith("..") else folded


def shell_files(command: str, powershell: bool = False, workdir: str = "") -> list[str]:
    """File-like arguments of a shell line (``sed -n 1,80p src/app.py`` reads ``src/app.py``).

    ``workdir``: the folder the line runs in (Claude Code records the shell's folder on every
    record, Codex gives ``workdir``); a relative argument is then the path from there, and a
    ``cd`` earlier in the line moves it (``cd agents && python3 run.py`` runs ``<workdir>/agents/run.py``)."""
    found: list[str] = []
    where = workdir.replace("\\", "/").rstrip("/") if workdir else ""
    for words in simple_commands(command, powershell):
        program = _program(words[0])
        if program.lower() in _CHANGE_DIR:
            targets = [w for w in words[1:] if not w.startswith("-") or w == "-"]
            where = _moved(where, targets[0] if targets else "")
            continue
        skip_pattern = program in _PATTERN_FIRST
        for word in words[1:]:
            if word.startswith("-"):
                continue
            if skip_pattern:
                skip_pattern = False
                continue
            match = _FILE_ARG.match(word)
            if (match and (_is_file_name(match.group("name")) or match.group("name") in _BARE_FILES)
                    and not word.startswith(("/dev/", "http")) and len(word) <= 300):
                found.append(_in_folder(word, where))
    return found


def command_keys(command: str, powershell: bool = False) -> list[str]:
    """Program + subcommand of each simple command in a shell line (utilities and git left out;
    ``powershell``: a line of Claude Code's PowerShell tool)."""
    keys: list[str] = []
    for words in simple_commands(command, powershell):
        while words and (words[0] in _PREFIXES or _ASSIGNMENT.match(words[0])):
            if words[0] == "timeout" and len(words) > 1:
                words = words[1:]
            words = words[1:]
        if words and words[0] == "timeout":
            words = words[2:]
        if not words or words[0] in _SHELL_SYNTAX:
            continue
        program = _program(words[0])
        if powershell and (program.lower() in POWERSHELL_KEYWORDS or (len(words) > 1 and words[1].startswith("="))):
            continue  # a keyword, or a hash table entry / assignment (``Name = 'x'``): no program
        if program in ("powershell", "pwsh"):  # ``powershell -Command "…"`` runs the line it is given
            flags = [w.lower() for w in words]
            at = next((i for i, w in enumerate(flags) if w in ("-command", "-c")), -1)
            if 0 < at < len(words) - 1:
                keys.extend(command_keys(words[at + 1], powershell=True))
            continue
        if (program in SHELL_UTILITIES or program.lower() in WINDOWS_UTILITIES or CMDLET.match(program)
                or not _WORD.match(program) or program.startswith("-")):
            continue
        if program in ("python", "python3", "python2", "py") and len(words) > 2 and words[1] == "-m":
            keys.append(f"{program} -m {words[2]}")
            continue
        rest = [w for w in words[1:] if _WORD.match(w) and not w.startswith("-")]
        if program in ("npx", "bunx", "uvx", "pipx") and rest:
            keys.append(f"{program} {_program(rest[0])}")
            continue
        runner = _RUNNERS.get(program)
        if runner and len(rest) >= 2 and rest[0] in runner:
            keys.append(f"{program} {rest[0]} {_program(rest[1])}")
            continue
        sub = rest[0] if rest and "/" not in rest[0] and not _is_file_name(rest[0]) else ""
        if program in _INTERPRETERS:
            # A script: its name is what a later session types again; inline code (-c) is nothing.
            target = words[1] if len(words) > 1 else ""
            tool = target.replace("\\", "/").removeprefix("./")
            if tool in _FRAMEWORK_CONSOLES.get(program, ()):
                # A framework's console (``php artisan migrate``): its task is the command.
                task = next((w for w in words[2:] if _WORD.match(w) and not w.startswith("-")), "")
                keys.append(f"{program} {tool} {task}".strip())
                continue
            if target.startswith("-") or not _is_file_name(_program(target)):
                continue
            sub = _program(target)
        keys.append(f"{program} {sub}".strip())
    return keys


def _is_file_name(word: str) -> bool:
    stem, dot, ext = word.rpartition(".")
    return bool(dot and stem and ext.lower() in FILE_EXTENSIONS)


def error_signature(text: str) -> str:
    """A short, stable name of what went wrong in a tool's error output ("" for harness noise).
    A long output is read at both ends: a server log or a test run says what went wrong last."""
    head = _both_ends(text).replace("\\n", "\n").replace("\\t", " ")  # output a hook escaped
    if any(marker in head[:400] for marker in _HARNESS_ERRORS):
        return ""
    raised = list(_RAISED.finditer(head))
    if raised:  # the last "SomeError: message" line of a traceback says what went wrong
        return _line_around(head, raised[-1].start(1))
    for pattern in (_WHERE_RAISED, _NO_MODULE, _NOT_FOUND):
        match = pattern.search(head)
        if match:
            return _line_around(head, match.start())
    for pattern in (_ERROR_LINE, _CLASS_NAME, _ERRNO, _CODE, _LINT, _TROUBLE):
        match = pattern.search(head)
        if match:
            return _line_around(head, match.start())
    lines = [line.strip() for line in head.splitlines()]
    meaningful = [line for line in lines if len(line) > 3 and not _EXIT_LINE.match(line)
                  and not line.strip("=-_*# ").lower().startswith(_PREAMBLE)]
    return meaningful[0][:160] if meaningful else ""


def output_error_names(text: str) -> tuple[str, ...]:
    """The distinct error names a tool's error output mentions (:func:`brain.core.text.error_names`),
    read like :func:`error_signature` reads it (both ends of a long output), at most
    :data:`MAX_FAILURE_NAMES`."""
    return tuple(dict.fromkeys(error_names(_both_ends(text))))[:MAX_FAILURE_NAMES]


def _both_ends(text: str) -> str:
    """A long tool output's first 2 000 and last 4 000 characters (from a line's start), without
    its terminal escapes (a coloured ``[FAIL]`` is read, and kept, as ``[FAIL]``)."""
    if len(text) > 6000:
        tail = text[-4000:]
        text = text[:2000] + "\n" + tail[tail.find("\n") + 1 :]
    return strip_ansi(text)


def _line_around(text: str, index: int) -> str:
    start = text.rfind("\n", 0, index) + 1
    end = text.find("\n", index)
    line = text[start : end if end != -1 else len(text)].strip()
    if len(line) > 160:
        before = text[start:index]
        at = len(before.lstrip())  # where the match is in ``line``
        offset = max(0, at - 40)
        if offset and not line[offset - 1].isspace():
            # Never from the middle of a word: from its start (a long path before the error stays
            # whole), or from the next word when the path is that long.
            word = line.rfind(" ", 0, offset) + 1
            space = line.find(" ", offset, at)
            offset = word if at - word <= 120 else space + 1 if space != -1 else offset
        line = line[offset : offset + 160].strip()
    return line


_BACKTICK = re.compile(r"`([^`\n]{2,80})`")
_TOKEN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./@#:-]*[A-Za-z0-9_]")
_SNAKE = re.compile(r"^[A-Za-z0-9]+(?:_[A-Za-z0-9]+)+$")
_CAMEL = re.compile(r"^[a-z]+[A-Z][A-Za-z0-9]*$|^[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+$")
_DOTTED = re.compile(r"^[A-Za-z_][\w-]*(?:\.[\w-]+)+$")
_HYPHEN_ID = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)+$")
_PATH = re.compile(r"^[\w.~-]*/[\w./-]+$")
#: Not identifiers: brand words, abbreviations, common hyphenated English.
_NOT_IDENTIFIERS = frozenset(
    ["github", "gitlab", "macos", "iphone", "ipad", "javascript", "typescript", "youtube", "linkedin", "openai", "chatgpt", "e.g", "i.e", "etc.", "vs.", "a.m", "p.m", "follow-up", "built-in", "long-term", "short-term", "real-time", "so-called", "e-mail", "one-shot", "re-run", "step-by-step", "up-to-date", "out-of-date", "end-to-end", "well-known", "high-level", "low-level", "side-by-side", "read-only", "write-only", "open-source", "third-party", "first-class", "day-to-day", "non-empty", "co-authored-by", "in-place", "opt-in", "opt-out", "check-in", "set-up", "log-in", "sign-in", "sign-up", "how-to", "to-do", "self-hosted", "multi-line", "single-line", "full-text", "front-end", "back-end", "front-matter", "top-level", "sub-agent", "sub-agents", "pre-commit", "auto-compact", "command-line", "built-ins", "long-running", "well-defined", "pros/cons", "and/or"]
)


_SEGMENTS = re.compile(r"[_./:@#-]")


def _looks_random(token: str) -> bool:
    """A part of ``token`` is a generated id or key (``iHubJjktLhacUMAZJR5BK8U``,
    ``session_01Nb9BCWhSmkDT3fRFNDXD8C``): long, digits and both cases, in runs of two
    characters on average, where a name's words run longer (``getUTF8StringFromBytes2``)."""
    for part in _SEGMENTS.split(token):
        if (len(part) < 12 or part.isalpha() or part.isdigit() or part.islower() or part.isupper()
                or not any(ch.isdigit() for ch in part)):
            continue
        runs = 1 + sum(1 for a, b in pairwise(part) if _kind(a) != _kind(b))
        if len(part) / runs < 2.2:
            return True
    return False


def _kind(ch: str) -> int:
    return 0 if ch.isdigit() else 1 if ch.isupper() else 2


def identifiers(text: str) -> list[str]:
    """Code-like tokens a human typed, in order of first appearance (generated ids left out)."""
    found: dict[str, None] = {}
    for match in _BACKTICK.finditer(text):
        token = match.group(1).strip()
        if token and " " not in token.strip() and len(token) <= 80 and not _looks_random(token):
            found.setdefault(token, None)
    for match in _TOKEN.finditer(text):
        token = match.group(0).rstrip(".:")
        low = token.lower()
        if (len(token) < 3 or low in _NOT_IDENTIFIERS or low.startswith(("http", "www.", "redacted"))
                or "@" in token):
            continue
        if token.replace(".", "").replace("-", "").isdigit() or _looks_random(token):
            continue  # versions, dates, numbers; generated ids
        if (_SNAKE.match(token) or _CAMEL.match(token) or _PATH.match(token)
                or (_DOTTED.match(token) and not token[0].isdigit())
                or (_HYPHEN_ID.match(token) and any(len(part) > 1 for part in token.split("-")))):
            found.setdefault(token, None)
    return list(found)


_WORKTREE_PREFIX = re.compile(r"^(?:\.claude/worktrees|\.worktrees)/[^/]+/")
#: A prompt with more identifiers than this is mostly a paste.
PASTE_IDENTIFIERS = 12


#: Claude Code's own spill files: a tool output too long for the log, saved under the session's
#: folder (``~/.claude/projects/<slug>/<session>/tool-results/toolu_….txt``). Read once by the
#: session that wrote it, never by another: not part of the project's work.
_SPILL_FILE = re.compile(r"/\.claude/projects/[^/]+/[^/]+/tool-results/")


def relative_path(path: str, cwd: str) -> str:
    """``path`` relative to ``cwd`` when it lies inside it (Windows separators and drive
    letters understood: ``x:\\repo\\a.py`` lies in ``X:\\Repo``)."""
    norm = path.replace("\\", "/")
    root = cwd.replace("\\", "/").rstrip("/")
    inside = norm.lower().startswith(root.lower() + "/") if DRIVE_PATH.match(root) else norm.startswith(root + "/")
    if root and inside:
        norm = norm[len(root) + 1 :]
    # A subagent's worktree of the same repository is the same file: .claude/worktrees/<agent>/src/x.py
    return _WORKTREE_PREFIX.sub("", norm)


def _ranked(counts: Counter[str], order: dict[str, int]) -> tuple[tuple[str, int], ...]:
    items = sorted(counts.items(), key=lambda item: (-item[1], order.get(item[0], 0), item[0]))
    return tuple(items[:MAX_RANKED])


#: Errno names that say the machine refused a tool (permissions, resources, the network), not
#: that the agent asked for a path that is not there (ENOENT, EISDIR): whichever tool hits one
#: (Grep's bundled ``rg`` not executable, a full disk) fails the same way in the next session.
_ENVIRONMENT_ERRNOS = frozenset({
    "EACCES", "EPERM", "EROFS", "ENOSPC", "EDQUOT", "EMFILE", "ENFILE", "ENOMEM", "ETIMEDOUT", "ECONNREFUSED",
    "ECONNRESET", "EHOSTUNREACH", "ENETUNREACH", "EADDRINUSE",
})
#: The key of a tool's own failure (see :data:`_ENVIRONMENT_ERRNOS`), never a command's.
_TOOL_KEY = "\0tool "


@dataclass
class _Call:
    line: int
    tool: str
    key: str  # command key, or "<tool> <file>" for file tools, "" when none
    display: str


@dataclass
class WorkLog:
    """Accumulates one session's work items; feed it in file order, then read the results."""

    session_key: str  # first 8 characters of the session id, for lesson provenance
    cwd: str = ""
    edited: Counter[str] = field(default_factory=Counter)
    read: Counter[str] = field(default_factory=Counter)
    commands: Counter[str] = field(default_factory=Counter)
    _order: dict[str, int] = field(default_factory=dict)
    _calls: dict[str, _Call] = field(default_factory=dict)
    _failures: list[tuple[str, Failure]] = field(default_factory=list)  # (key, failure)
    _identifiers: Counter[str] = field(default_factory=Counter)
    _todos: list[Todo] = field(default_factory=list)
    _broken: set[str] = field(default_factory=set)  # the tools that failed for the environment's sake
    miner: LessonMiner = field(init=False)

    def __post_init__(self) -> None:
        self.miner = LessonMiner(self.session_key)

    def _seen(self, key: str) -> None:
        self._order.setdefault(key, len(self._order))

    # --- tool calls --------------------------------------------------------------------------

    def file_read(self, path: str) -> None:
        rel = relative_path(path, self.cwd)
        if rel and not _SPILL_FILE.search(rel):
            self.read[rel] += 1
            self._seen(rel)

    def file_edited(self, path: str, line: int, old: str = "", new: str = "") -> None:
        rel = relative_path(path, self.cwd)
        if rel:
            self.edited[rel] += 1
            self._seen(rel)
            self.miner.edit(line, rel, old, new)

    def shell(self, call_id: str, line: int, command: str, powershell: bool = False, workdir: str = "") -> None:
        """``workdir``: the folder the line runs in, when the log records it (see :func:`shell_files`)."""
        keys = command_keys(command, powershell)
        for key in keys:
            self.commands[key] += 1
            self._seen(key)
        for path in shell_files(command, powershell, workdir):
            self.file_read(path)
        self.miner.shell(line, command)
        if call_id:
            words = (simple_commands(command, powershell) or [[""]])[-1]
            plain = [_program(words[0])] + [w for w in words[1:2] if _WORD.match(w) and not w.startswith("-")]
            # Plumbing (git, ls …) is not a counted command, but its failures still resolve by name.
            key = keys[-1] if keys else " ".join(plain)[:80]
            # A failing utility (ls, rg, cat …) is exploration, not work; git failures are work.
            tool = "shell" if keys or plain[0] == "git" else "utility"
            self._calls[call_id] = _Call(line, tool, key, key)

    def tool(self, call_id: str, line: int, tool: str, target: str = "") -> None:
        if call_id:
            key = f"{tool} {relative_path(target, self.cwd)}".strip() if target else ""
            self._calls[call_id] = _Call(line, tool, key, key or tool)

    def result(self, call_id: str, line: int, is_error: bool, output: str) -> None:
        call = self._calls.pop(call_id, None)
        if call is None:
            return
        if not is_error:
            if call.key:
                self._resolve(call.key, line)
            if _TOOL_KEY + call.tool in self._broken:
                self._mend(_TOOL_KEY + call.tool)
            return
        self.miner.rejection(line, output)
        if call.tool in ("shell", "utility") and is_operator_feedback(output):
            self.miner.feedback(line, output)
            return
        names = output_error_names(output)
        environment = call.tool not in ("shell", "utility") and not _ENVIRONMENT_ERRNOS.isdisjoint(names)
        if call.tool != "shell" and not environment:
            return  # exploration (ls, rg …) and tool mechanics (an Edit's "found 2 matches"): no failure
        signature = error_signature(output)
        if not signature:
            return
        if environment:  # the tool itself fails here (Grep: "spawn …/rg EACCES"): any later success mends it
            call = _Call(call.line, call.tool, _TOOL_KEY + call.tool, call.display)
            self._broken.add(call.key)
        root = self.cwd.replace("\\", "/").rstrip("/")
        if root:
            signature = signature.replace(root + "/", "")  # repo-relative, and no home path in the arc
        if len(self._failures) < MAX_FAILURES * 4:
            self._failures.append((call.key, Failure(signature[:ITEM_CHARS], False, call.line, call.display, names)))
        if not environment:
            self.miner.failure(call.line, call.key, call.display, signature)

    def _resolve(self, key: str, line: int) -> None:
        self._mend(key)
        self.miner.success(line, key)

    def _mend(self, key: str) -> None:
        """The failures recorded under ``key`` are resolved."""
        for index, (fkey, failure) in enumerate(self._failures):
            if fkey == key and not failure.resolved:
                self._failures[index] = (fkey, dataclasses.replace(failure, resolved=True))

    # --- prompts and plans -------------------------------------------------------------------

    def prompt(self, line: int, text: str, day: str = "") -> None:
        found = identifiers(text[:4000])
        if len(found) > PASTE_IDENTIFIERS:
            # A pasted log or field list: what the operator wrote is the opening, not the paste.
            found = identifiers(text[:300])[:PASTE_IDENTIFIERS]
        for token in found:
            self._identifiers[token] += 1
            self._seen("id:" + token)
        self.miner.prompt(line, text, day)

    def todos(self, items: list[tuple[str, str]]) -> None:
        """The latest todo / plan state replaces the previous one."""
        self._todos = [Todo(status, text[:ITEM_CHARS]) for status, text in items if text.strip()][:MAX_TODOS]

    # --- results -------------------------------------------------------------------------------

    def files_edited(self) -> tuple[tuple[str, int], ...]:
        return _ranked(self.edited, self._order)

    def files_read(self) -> tuple[tuple[str, int], ...]:
        return _ranked(self.read, self._order)

    def ranked_commands(self) -> tuple[tuple[str, int], ...]:
        return _ranked(self.commands, self._order)

    def failures(self) -> tuple[Failure, ...]:
        """Distinct failures, the unresolved ones first, then by line."""
        seen: dict[tuple[str, str], Failure] = {}
        for _key, failure in self._failures:
            ident = (failure.command, failure.text)
            known = seen.get(ident)
            # The same error again: its latest state counts (resolved only if the last one was).
            if known is None or failure.line >= known.line:
                seen[ident] = failure
        ordered = sorted(seen.values(), key=lambda f: (f.resolved, -f.line))
        return tuple(Failure(" ".join(redact(f.text).split())[:ITEM_CHARS], f.resolved, f.line,
                             " ".join(redact(f.command).split())[:120],
                             tuple(n for n in f.names if redact(n) == n)) for f in ordered[:MAX_FAILURES])

    def identifier_list(self) -> tuple[str, ...]:
        ranked = sorted(self._identifiers.items(), key=lambda item: (-item[1], self._order.get("id:" + item[0], 0)))
        return tuple(token for token, _count in ranked[:MAX_IDENTIFIERS])

    def todo_list(self) -> tuple[Todo, ...]:
        return tuple(self._todos)

    def lessons(self) -> tuple[Lesson, ...]:
        return self.miner.lessons()
