"""The sdist and the wheel hold what a user of the package needs: type information (``py.typed``: the
project is type-checked), the licence named in the metadata, the documentation the README links to, and
the C source of the optional kernels; the build itself says nothing experimental.

The sdist is built from a copy of the checkout's files (tracked and new, not ignored ones), then the
wheel from the unpacked sdist, as ``python -m build --no-isolation`` does, through setuptools' PEP 517
hooks (so the ``build`` front end need not be installed). No network: nothing is installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

BUILD = """
import sys
from setuptools import build_meta
print(getattr(build_meta, sys.argv[1])(sys.argv[2]))
"""


def _source_files() -> list[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the git checkout (the files a clean clone has)")
    done = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return [name for name in done.stdout.splitlines() if (ROOT / name).is_file()]


def _hook(hook: str, source: Path, out: Path, **env: str) -> tuple[Path, str]:
    done = subprocess.run(
        [sys.executable, "-c", BUILD, hook, str(out)],
        cwd=source,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out / done.stdout.strip().splitlines()[-1], done.stdout + done.stderr


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, object]:
    tmp = tmp_path_factory.mktemp("build")
    checkout = tmp / "checkout"
    files = _source_files()
    for name in files:
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, checkout / name)
    sdist, sdist_log = _hook("build_sdist", checkout, tmp / "dist")
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp / "unpacked", filter="data")
        sdist_names = {name.partition("/")[2] for name in tar.getnames()}
    (unpacked,) = (tmp / "unpacked").iterdir()
    wheel, wheel_log = _hook("build_wheel", unpacked, tmp / "dist")
    with zipfile.ZipFile(wheel) as whl:
        wheel_names = set(whl.namelist())
        metadata = next(whl.read(n).decode() for n in wheel_names if n.endswith(".dist-info/METADATA"))
    shutil.rmtree(unpacked / "build", ignore_errors=True)
    no_compiler, no_compiler_log = _hook("build_wheel", unpacked, tmp / "no-compiler", CC="false")
    with zipfile.ZipFile(no_compiler) as whl:
        no_compiler_names = set(whl.namelist())
    return {
        "no_compiler": no_compiler_names,
        "no_compiler_log": no_compiler_log,
        "files": files,
        "sdist": sdist_names,
        "wheel": wheel_names,
        "metadata": metadata,
        "log": sdist_log + wheel_log,
    }


pytestmark = pytest.mark.slow


def test_both_carry_py_typed_for_each_package(built):
    for package in ("posenc", "posenc_bench"):
        assert f"src/{package}/py.typed" in built["sdist"]
        assert f"{package}/py.typed" in built["wheel"]


def test_the_licence_file_matches_the_metadata(built):
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "Permission is hereby granted, free of charge" in text
    assert "License-Expression: MIT" in built["metadata"]
    assert "License-File: LICENSE" in built["metadata"]
    assert "LICENSE" in built["sdist"]
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in built["wheel"])


def test_the_sdist_holds_the_docs_the_readme_links_to(built):
    docs = {name for name in built["files"] if name.startswith("docs/")}
    assert docs and docs <= built["sdist"], sorted(docs - built["sdist"])[:5]
    assert {"README.md", "src/posenc/_kernels.c"} <= built["sdist"]


def test_the_build_warns_of_nothing_experimental(built):
    assert "experimental" not in built["log"].lower(), built["log"][-3000:]


def _kernels(names: set[str]) -> list[str]:
    return [n for n in names if n.startswith("posenc/_kernels") and n.endswith((".so", ".pyd"))]


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler on this machine")
def test_the_wheel_holds_the_compiled_kernels(built):
    assert len(_kernels(built["wheel"])) == 1, sorted(built["wheel"])


def test_without_a_compiler_the_wheel_builds_without_the_kernels(built):
    assert not _kernels(built["no_compiler"]) and "posenc/tables.py" in built["no_compiler"]
    assert "experimental" not in built["no_compiler_log"].lower()
