"""Python 3.10 is the oldest supported Python: no code of the repository uses what came after it.

The checks read the source (the grammar of 3.10 and a list of standard-library names added in 3.11 and
later), so they hold whichever Python runs the tests. What differs at run time between versions and is
handled in the code (ISO 8601 parsing, str enums) is checked on the running Python.
"""

from __future__ import annotations

import ast
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from airflow_provider_sm_prefs.domain.status import from_iso
from offline_sagemaker.models import CapacityKind, JobKind, TrainingStatus

ROOT = Path(__file__).resolve().parents[1]
FLOOR = (3, 10)
SOURCES = sorted(
    path
    for top in (
        "airflow_provider_sm_prefs",
        "offline-sagemaker",
        "harness",
        "tests",
        "dags_examples",
        "benchmarks",
    )
    for path in (ROOT / top).rglob("*.py")
    if "results" not in path.relative_to(ROOT).parts
)

#: Standard-library names added after Python 3.10, by module ("builtins": names used without an import).
NEWER: dict[str, set[str]] = {
    "datetime": {"UTC"},
    "enum": {
        "StrEnum",
        "ReprEnum",
        "EnumCheck",
        "FlagBoundary",
        "verify",
        "member",
        "nonmember",
        "global_enum",
    },
    "typing": {
        "Self",
        "LiteralString",
        "Never",
        "NotRequired",
        "Required",
        "assert_never",
        "assert_type",
        "reveal_type",
        "dataclass_transform",
        "Unpack",
        "TypeVarTuple",
        "get_overloads",
        "override",
        "TypeAliasType",
        "ReadOnly",
        "TypeIs",
    },
    "asyncio": {"TaskGroup", "timeout", "timeout_at", "Timeout", "Runner", "Barrier", "QueueShutDown"},
    "contextlib": {"chdir"},
    "operator": {"call"},
    "hashlib": {"file_digest"},
    "itertools": {"batched"},
    "logging": {"getLevelNamesMapping", "getHandlerByName"},
    "sys": {"exception"},
    "builtins": {"ExceptionGroup", "BaseExceptionGroup"},
}
#: Modules added after Python 3.10.
NEWER_MODULES = {"tomllib", "wsgiref.types"}


def newer_than_the_floor(source: str) -> list[str]:
    """What ``source`` uses that Python 3.10 does not have (its grammar, then the names above)."""
    try:
        tree = ast.parse(source, feature_version=FLOOR)
    except SyntaxError as error:
        return [f"line {error.lineno}: {error.msg}"]
    found, aliases = newer_imports(tree)
    found += builtin_timeout_around_wait_for(tree)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.attr in NEWER.get(aliases.get(node.value.id, ""), ())
        ):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
        elif isinstance(node, ast.Name) and node.id in NEWER["builtins"]:
            found.append(f"line {node.lineno}: {node.id}")
    return found


def newer_imports(tree: ast.AST) -> tuple[list[str], dict[str, str]]:
    """Imports of what 3.10 lacks, and the modules imported whole (local name -> module)."""
    found: list[str] = []
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in NEWER_MODULES:
                    found.append(f"line {node.lineno}: import {alias.name}")
                aliases[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and not node.level:
            module = node.module or ""
            if module in NEWER_MODULES:
                found.append(f"line {node.lineno}: from {module} import")
            found += [
                f"line {node.lineno}: from {module} import {alias.name}"
                for alias in node.names
                if alias.name in NEWER.get(module, ())
            ]
    return found, aliases


def builtin_timeout_around_wait_for(tree: ast.AST) -> list[str]:
    """``TimeoutError`` caught, expected or suppressed around ``asyncio.wait_for``.

    Before Python 3.11 ``asyncio.wait_for`` raises ``asyncio.TimeoutError``, a class of its own; from 3.11
    on that is the builtin ``TimeoutError``. ``asyncio.TimeoutError`` is right on both.
    """
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Try):
            body, caught = node.body, [handler.type for handler in node.handlers if handler.type]
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            # pytest.raises(...), contextlib.suppress(...) and the like: what their arguments name.
            body = node.body
            caught = [
                arg
                for item in node.items
                if isinstance(item.context_expr, ast.Call)
                for arg in item.context_expr.args
            ]
        else:
            continue
        waits = any(
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "wait_for"
            and isinstance(call.func.value, ast.Name)
            and call.func.value.id == "asyncio"
            for statement in body
            for call in ast.walk(statement)
        )
        builtin = any(isinstance(n, ast.Name) and n.id == "TimeoutError" for e in caught for n in ast.walk(e))
        if waits and builtin:
            found.append(f"line {node.lineno}: TimeoutError around asyncio.wait_for (asyncio.TimeoutError)")
    return found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_source_uses_what_python_3_10_lacks(path: Path) -> None:
    assert newer_than_the_floor(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    "source",
    [
        "from datetime import UTC, datetime\n",
        "import datetime\nnow = datetime.datetime.now(datetime.UTC)\n",
        "from enum import StrEnum\n",
        "import enum\nclass K(enum.StrEnum):\n    A = 'a'\n",
        "import tomllib\n",
        "from typing import Self\n",
        "import asyncio as aio\nasync def f():\n    async with aio.timeout(1):\n        pass\n",
        "try:\n    pass\nexcept* ValueError:\n    pass\n",
        "raise ExceptionGroup('x', [ValueError()])\n",
        "from contextlib import chdir\n",
        "import hashlib\nhashlib.file_digest\n",
        "import asyncio\nasync def f(w):\n    try:\n        await asyncio.wait_for(w, 1)\n    except TimeoutError:\n        pass\n",
        "import asyncio, pytest\nasync def f(w):\n    with pytest.raises(TimeoutError):\n        await asyncio.wait_for(w, 1)\n",
    ],
)
def test_the_check_finds_what_came_after_3_10(source: str) -> None:
    assert newer_than_the_floor(source)


def test_the_check_passes_what_3_10_has() -> None:
    source = (
        "from datetime import datetime, timezone\n"
        "from enum import Enum\n"
        "from typing import Any\n"
        "import asyncio\n"
        "now = datetime.now(timezone.utc)\n"
        "async def f() -> Any:\n"
        "    try:\n"
        "        return await asyncio.wait_for(asyncio.sleep(0), 1)\n"
        "    except asyncio.TimeoutError:\n"
        "        return None\n"
        "match now.year:\n"
        "    case 2026:\n"
        "        pass\n"
    )
    assert newer_than_the_floor(source) == []


def test_the_declared_floor_is_3_10() -> None:
    # pyproject.toml read as text: tomllib is one of the modules 3.10 lacks.
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^requires-python = ">=3\.10"$', text, re.M)
    assert re.search(r'^target-version = "py310"$', text, re.M)
    assert re.search(r'^python_version = "3\.10"$', text, re.M)


UTC = timezone.utc


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-30T12:00:00Z", datetime(2026, 11, 30, 12, tzinfo=UTC)),
        ("2026-11-30T12:00:00.5Z", datetime(2026, 11, 30, 12, 0, 0, 500000, tzinfo=UTC)),
        ("2026-11-30T12:00:00.123Z", datetime(2026, 11, 30, 12, 0, 0, 123000, tzinfo=UTC)),
        ("2026-11-30T12:00:00.1234567+00:00", datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=UTC)),
        ("2026-11-30T12:00:00,25z", datetime(2026, 11, 30, 12, 0, 0, 250000, tzinfo=UTC)),
        (
            "2026-11-30T12:00:00+0530",
            datetime(2026, 11, 30, 12, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        ),
        ("2026-11-30T12:00-08", datetime(2026, 11, 30, 12, tzinfo=timezone(timedelta(hours=-8)))),
        ("2026-11-30 12:00:00.123456+00:00", datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=UTC)),
        ("2026-11-30T12:00:00", datetime(2026, 11, 30, 12)),
        ("2026-11-30", datetime(2026, 11, 30)),
    ],
)
def test_iso_8601_reads_alike_on_every_python(text: str, expected: datetime) -> None:
    # What Python 3.11's fromisoformat reads, read the same on 3.10.
    assert from_iso(text) == expected
    assert from_iso(text).utcoffset() == expected.utcoffset()


@pytest.mark.parametrize("text", ["", "nonsense", "2026-11-30T25:00:00Z", "2026-11-30T12:00:00+25:00"])
def test_iso_8601_that_is_not_a_time_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        from_iso(text)


def test_the_emulators_str_enums_read_as_their_values_on_every_python() -> None:
    # As enum.StrEnum (3.11+) does: str(), format() and f-strings give the value, not Cls.NAME.
    assert str(JobKind.TRAINING) == f"{JobKind.TRAINING}" == format(JobKind.TRAINING) == "training"
    assert f"{TrainingStatus.IN_PROGRESS:>12}" == "  InProgress"
    assert str(CapacityKind.ON_DEMAND) == f"{CapacityKind.ON_DEMAND}" == "on-demand"
    assert type(str(JobKind.PROCESSING)) is str and JobKind("processing") is JobKind.PROCESSING
