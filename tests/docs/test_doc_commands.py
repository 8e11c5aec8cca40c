"""Every ``loopwatch`` command the docs and the README print runs as written after the README's set-up.

In shell blocks (any mark: also those this suite cannot run) a command is ``.venv/bin/loopwatch``, what
``make run`` installs, run from the checkout; prose may name it ``loopwatch ...`` (the README says
``. .venv/bin/activate`` puts it on the PATH). In both, the sub-command and every option must exist (read
from the click commands ``--help`` prints), and a file the command is given by a relative path (an
option's value or an argument, e.g. ``--config examples/openclaw.json``) must be in the checkout or made
by the same block before. Placeholders (``<...>``, ``UPPER``, ``~/...``, ``$VAR``, ``a|b``) are not checked.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from streams.commands import loopwatch
from tests.docs.test_code_blocks import FENCE, ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
INSTALLED = ".venv/bin/loopwatch"
_INLINE = re.compile(r"`((?:\.venv/bin/)?loopwatch [^`]+)`")
_END = {"|", "||", "&&", ";", ">", ">>", "2>", "<", "&", ")"}
_MADE = re.compile(r"(?:>|>>|-o|--output|--html|--fleet-output)\s+(\S+)")  # files a block writes


def _shell_commands() -> list[tuple[str, str, str, str]]:
    """``(where, mark, line, block)``: each line of a shell block that runs loopwatch (``\\`` continuations
    joined); ``mark`` is the block's (tests/docs/test_code_blocks.py)."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            if not match.group(1).startswith("sh"):
                continue
            where = f"{page.relative_to(ROOT)}:{text[:match.start()].count(chr(10)) + 1}"
            body = match.group(2).replace("\\\n", " ")
            for line in body.splitlines():
                code = line.split(" #", 1)[0].strip()
                if re.search(r"(^|[\s($])(\S*/)?loopwatch ", code) and not code.startswith("#"):
                    found.append((where, match.group(1)[2:].strip(), code, body))
    return found


def _inline_commands() -> list[tuple[str, str]]:
    """``(where, text)`` of every inline code span in prose that starts with ``loopwatch <sub-command>``."""
    found = []
    names = set(loopwatch.list_commands(click.Context(loopwatch)))
    for page in PAGES:
        text = FENCE.sub("", page.read_text(encoding="utf-8")).replace("\n", " ")
        for match in _INLINE.finditer(text):
            words = match.group(1).split()
            if len(words) > 1 and words[1] in names:  # not output such as "loopwatch replay: no --config"
                found.append((str(page.relative_to(ROOT)), match.group(1)))
    return found


SHELL = _shell_commands()
INLINE = _inline_commands()


def _invocations(line: str) -> list[tuple[str, list[str]]]:
    """``(program, words after it)`` for each loopwatch run on a shell line (also inside ``$(...)``)."""
    runs = []
    inner = re.findall(r"\$\(([^)]*)\)", line)
    for part in [re.sub(r"\$\([^)]*\)", "$SUBSTITUTED", line), *inner]:
        try:
            words = shlex.split(part, comments=True)
        except ValueError:
            words = part.split()
        for i, word in enumerate(words):
            first = i == 0 or words[i - 1] in _END or re.match(r"^\w+=", words[i - 1])  # the program run
            if first and (word == "loopwatch" or word.endswith("/loopwatch")):
                rest = []
                for w in words[i + 1:]:
                    if w in _END or w.startswith((">", "2>")):
                        break
                    rest.append(w)
                runs.append((word, rest))
    return runs


def _placeholder(word: str) -> bool:
    return bool(re.search(r"[<>$|~*]", word)) or (word.isupper() and len(word) > 1) or word == "..."


def _options(command: click.Command) -> set[str]:
    return {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)
            if opt.startswith("-")} | {"--help", "-h"}


def _check(words: list[str], made: set[str] | None) -> list[str]:
    """What is wrong with ``loopwatch <words>``: an unknown sub-command or option, a relative file not there
    (neither in the checkout nor in ``made``; ``made`` None: files not checked)."""
    ctx = click.Context(loopwatch)
    if not words:
        return []
    command = loopwatch.get_command(ctx, words[0])
    if command is None:
        return [f"no sub-command {words[0]!r}"]
    rest = words[1:]
    commands = [command]
    if isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
        if _placeholder(rest[0]):
            commands = list(command.commands.values())  # an option must then exist on each
        elif rest[0] not in command.commands:
            return [f"no sub-command {words[0]} {rest[0]!r}"]
        else:
            commands = [command.commands[rest[0]]]
        rest = rest[1:]
    problems = []
    for word in rest:
        option = word.split("=", 1)[0]
        if word.startswith("-") and word != "-" and not _placeholder(option):
            for each in commands:
                if option not in _options(each):
                    problems.append(f"{each.name} has no option {option}")
        elif made is not None and _looks_like_a_path(word) and not _placeholder(word) and word not in made \
                and not (ROOT / word).exists():
            problems.append(f"no file {word} in the checkout")
    return problems


def _looks_like_a_path(word: str) -> bool:
    # "../": outside the checkout (e.g. OpenClaw's conformance files beside it), not ours to check
    if word.startswith(("-", "/", "../")) or "://" in word:
        return False
    return "/" in word or re.search(r"\.(json5?|jsonl|msgpack|toml)$", word) is not None


@pytest.mark.parametrize("where, mark, line, block", SHELL, ids=[f"{w}:{line[:40]}" for w, _, line, _ in SHELL])
def test_shell_blocks_run_the_installed_loopwatch_with_options_that_exist(where, mark, line, block):
    made = None if mark == "needs-data" else set(_MADE.findall(block))  # needs-data: the reader's own files
    for program, words in _invocations(line):
        assert program == INSTALLED, f"{where}: {line!r} runs {program!r}: after the README's set-up that is " \
                                     f"{INSTALLED} (from the checkout)"
        assert _check(words, made) == [], f"{where}: {line!r}"


@pytest.mark.parametrize("where, text", INLINE, ids=[f"{w}:{t[:40]}" for w, t in INLINE])
def test_commands_named_in_prose_have_the_options_they_show(where, text):
    assert _check(text.split()[1:], set()) == [], f"{where}: `{text}`"


def test_the_check_finds_what_it_looks_for():
    assert len(SHELL) >= 15 and len(INLINE) >= 20
    assert _check(["replay", "--confg", "examples/openclaw.json"], set()) == ["replay has no option --confg"]
    assert _check(["worker", "--config", "loopwatch.json"], set()) == ["no file loopwatch.json in the checkout"]
    assert _check(["fleet", "lst"], set()) == ["no sub-command fleet 'lst'"]
    assert _check(["hook", "RUNNER", "--print-config"], set()) == []
    assert _invocations("curl -H \"Bearer $(loopwatch gateway --print-token)\" x") == \
        [("loopwatch", ["gateway", "--print-token"])]


def test_the_readme_says_how_to_run_loopwatch_without_the_path():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert ". .venv/bin/activate" in readme and INSTALLED in readme
