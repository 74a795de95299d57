"""What `make install` and `make sdk-venv` download is pinned and checked against known hashes.

A requirement without a hash takes whatever the index serves under that version; an unpinned one, whatever
version is newest. Both are read here from the files themselves, so a regenerated lock without
``--generate-hashes`` or a Makefile that installs uv by name fails the suite.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAKEFILE = ROOT / "Makefile"
UV_REQUIREMENTS = ROOT / "uv-requirements.txt"
SDK_REQUIREMENTS = ROOT / "tests" / "sdk" / "requirements.txt"
SDK_INPUT = ROOT / "tests" / "sdk" / "requirements.in"
HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}")


def requirements(path: Path) -> dict[str, list[str]]:
    """Each requirement of a requirements file (continuation lines joined) -> its hash options."""
    text = re.sub(r"\\\n", " ", path.read_text())
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        line = line.partition(" #")[0].strip()
        if not line or line.startswith("#"):
            continue
        requirement, *options = shlex.split(line)
        found[requirement] = [option for option in options if option.startswith("--hash")]
    return found


def makefile_lines() -> list[str]:
    """The Makefile's lines with its ``NAME := value`` variables expanded (until nothing changes)."""
    text = MAKEFILE.read_text()
    variables = dict(re.findall(r"^([A-Z_]+) \??:?= (.*)$", text, flags=re.MULTILINE))
    expanded = []
    for line in text.splitlines():
        previous = None
        while previous != line:
            previous = line
            for name, value in variables.items():
                line = line.replace(f"$({name})", value)
        expanded.append(line.strip())
    return expanded


def recipe(target: str) -> list[str]:
    """The expanded recipe of the Makefile rule for ``target`` (its lines up to the next blank one)."""
    lines = makefile_lines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{target}:"))
    end = lines.index("", start)
    return lines[start + 1 : end]


def test_every_pin_of_the_sdk_venv_is_exact_and_hashed() -> None:
    pinned = requirements(SDK_REQUIREMENTS)
    assert len(pinned) > 50  # the SDK and its whole tree, not only the SDK
    unpinned = [name for name in pinned if "==" not in name]
    unhashed = [name for name, hashes in pinned.items() if not hashes]
    malformed = [name for name, hashes in pinned.items() if not all(HASH.fullmatch(h) for h in hashes)]
    assert (unpinned, unhashed, malformed) == ([], [], [])
    # The lock is compiled from the input: the SDK's pin is the same in both.
    for requirement in requirements(SDK_INPUT):
        assert requirement in pinned


def test_the_sdk_venv_is_installed_with_require_hashes() -> None:
    installs = [line for line in recipe("build/sdk-venv/.installed") if " pip install " in line]
    assert installs and all("--require-hashes" in line for line in installs), installs


def test_uv_is_installed_by_exact_version_and_hash_wherever_the_makefile_installs_it() -> None:
    pip_installs = [line for line in makefile_lines() if re.search(r"-m pip install", line)]
    assert pip_installs and all("--require-hashes -r uv-requirements.txt" in line for line in pip_installs), (
        pip_installs
    )
    for target in (".venv/.installed", "build/sdk-venv/.installed"):
        bootstrap = recipe(target)[0]
        assert bootstrap.startswith("@python3 -m uv --version") and bootstrap.endswith(
            "|| python3 -m pip install --quiet --require-hashes -r uv-requirements.txt"
        ), bootstrap


def test_the_uv_pin_is_uv_locks_and_carries_a_hash_for_every_platform() -> None:
    version, locked = _locked_uv()
    pins = requirements(UV_REQUIREMENTS)
    assert list(pins) == [f"uv=={version}"]
    hashes = {h.removeprefix("--hash=sha256:") for h in pins[f"uv=={version}"]}
    # uv.lock's own record of the release (its Linux wheels and the sdist) agrees with every hash it has.
    assert locked and locked <= hashes
    # Beyond uv.lock's platforms: the macOS (Intel, Apple silicon) and Windows (x86, x64, arm64) wheels.
    assert len(hashes) >= len(locked) + 5


def _locked_uv() -> tuple[str, set[str]]:
    """uv's version in uv.lock and the sha256 digests it records for that release."""
    block = re.search(
        r'\[\[package\]\]\nname = "uv"\nversion = "([^"]+)"\n(.*?)\n\n', (ROOT / "uv.lock").read_text(), re.S
    )
    assert block is not None, "uv.lock pins no uv"
    return block.group(1), set(re.findall(r'hash = "sha256:([0-9a-f]{64})"', block.group(2)))
