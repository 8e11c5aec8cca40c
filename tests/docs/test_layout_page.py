"""docs/layout.md names every module under streams/ and no module that is not there.

Each ``## `streams/<part>/` `` section's table has a row per module (``| `name.py` | job |``, several names
in one row allowed) or per sub-package (``| `sub/` | ... `module.py` ... |``, its modules named in the
row's text). ``__init__.py`` files may go unnamed. A module moved or added without its row fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "layout.md"
PACKAGE = ROOT / "streams"
_SECTION = re.compile(r"^## (?:The package root: )?`streams/([\w/]*)`", re.M)
_ROW = re.compile(r"^\| ([^|]+) \|(.*)\|\s*$", re.M)
_NAME = re.compile(r"`([\w.]+/?)`")


def _documented() -> dict[str, tuple[set[str], set[str]]]:
    """``{part: (named, mentioned)}`` per section (``""`` the package root): the modules and sub-packages its
    rows name in their first column, with ``sub/module.py`` for each module a sub-package's row names in its
    text; and the modules any row's text mentions (``html.py``'s row names ``html_summary.py``)."""
    text = PAGE.read_text(encoding="utf-8")
    sections = list(_SECTION.finditer(text))
    found: dict[str, tuple[set[str], set[str]]] = {}
    for i, section in enumerate(sections):
        end = sections[i + 1].start() if i + 1 < len(sections) else text.find("\n## ", section.end())
        body = text[section.end():end if end > 0 else len(text)]
        named, mentioned = found.setdefault(section.group(1).rstrip("/"), (set(), set()))
        for first, rest in _ROW.findall(body):
            inner = [name for name in _NAME.findall(rest) if name.endswith(".py")]
            mentioned.update(inner)
            for name in _NAME.findall(first):
                named.add(name)
                if name.endswith("/"):
                    named.update(f"{name}{module}" for module in inner)
    return found


def _modules(part: str) -> set[str]:
    """The modules (``.py``, ``.c``) of ``streams/<part>``, those of its sub-packages as ``sub/module.py``, and
    the sub-packages as ``sub/`` (for the package root, ``part`` ``""``, its own files only); ``__init__.py``
    left out."""
    folder = PACKAGE / part
    names = set()
    for path in folder.iterdir():
        if part and path.is_dir() and (path / "__init__.py").exists():  # the root's parts have their own sections
            names.add(f"{path.name}/")
            names.update(f"{path.name}/{inner.name}" for inner in path.glob("*.py") if inner.name != "__init__.py")
        elif path.suffix in (".py", ".c") and path.name != "__init__.py":
            names.add(path.name)
    return names


def test_every_module_has_its_row_and_every_row_its_module():
    documented = _documented()
    parts = {path.parent.relative_to(PACKAGE).as_posix().replace(".", "")
             for path in PACKAGE.rglob("__init__.py") if path.parent.parent == PACKAGE or path.parent == PACKAGE}
    assert set(documented) == parts, "a part of streams/ without its section, or a section of no part"
    for part, (named, mentioned) in documented.items():
        on_disk = _modules(part)
        named = {n for n in named if n != "__init__.py"}
        assert on_disk - named - mentioned == set(), f"streams/{part}: modules docs/layout.md does not name"
        assert named - on_disk == set(), f"streams/{part}: docs/layout.md has rows of modules that are not there"


def test_the_check_reads_the_page_as_written():
    documented = {part: named for part, (named, _) in _documented().items()}
    assert {"app.py", "processor.py", "reader.py"} <= documented["worker"]
    assert {"config/", "config/schema.py", "_canonical.c"} <= documented["detection"]
    assert {"gateway/", "gateway/serve.py", "hooks/command.py"} <= documented["runners"]
    assert {"cli.py", "app.py"} <= documented[""]
    assert "html_summary.py" in _documented()["report"][1]
