"""No module under streams/ passes 400 lines unless its docstring says why, on a line starting ``Size:``.

A module that long usually holds two jobs; when it really is one (the reason given), its docstring
says so, e.g. ``Size: one class, the runner's whole API, ...``. ``KNOWN`` lists the modules that
were over the limit, without a reason, when the rule came in, with their line counts then: such a
module may only shrink, and leaves the list once it is within the limit or gives its reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

LIMIT = 400
PACKAGE = Path(__file__).resolve().parents[1] / "streams"

# path below streams/ -> its line count when the rule came in
KNOWN: dict[str, int] = {}


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _size_reason(path: Path) -> str | None:
    """The text after ``Size:`` on a line of the module docstring, or None."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    for line in doc.splitlines():
        if line.strip().startswith("Size:"):
            return line.strip()[len("Size:"):].strip()
    return None


def _modules() -> dict[str, Path]:
    return {path.relative_to(PACKAGE).as_posix(): path for path in sorted(PACKAGE.rglob("*.py"))}


def test_a_module_over_the_limit_gives_its_reason():
    over = {name: _lines(path) for name, path in _modules().items()
            if _lines(path) > LIMIT and not _size_reason(path) and name not in KNOWN}
    assert over == {}, f"over {LIMIT} lines without a 'Size:' line in the docstring saying why: split along a seam"


def test_a_reason_says_something():
    short = {name: reason for name, path in _modules().items()
             if (reason := _size_reason(path)) is not None and len(reason) < 20}
    assert short == {}


def test_known_modules_only_shrink_and_leave_the_list_once_within_the_rule():
    modules = _modules()
    grown = {name: (_lines(modules[name]), was) for name, was in KNOWN.items()
             if name in modules and _lines(modules[name]) > was}
    assert grown == {}, "a known oversize module grew: (now, then)"
    done = sorted(name for name in KNOWN
                  if name not in modules or _lines(modules[name]) <= LIMIT or _size_reason(modules[name]))
    assert done == [], "within the rule now (or gone): remove from KNOWN"


def test_the_reason_is_read_from_the_module_docstring_only(tmp_path):
    body = "x = 1\n" * LIMIT
    with_reason = tmp_path / "a.py"
    with_reason.write_text('"""One job.\n\nSize: one table of OpenClaw\'s, kept whole.\n"""\n' + body)
    in_a_comment = tmp_path / "b.py"
    in_a_comment.write_text('"""One job."""\n# Size: a comment is no docstring\n' + body)
    assert _lines(with_reason) > LIMIT and _lines(in_a_comment) > LIMIT
    assert _size_reason(with_reason) == "one table of OpenClaw's, kept whole."
    assert _size_reason(in_a_comment) is None
