"""Fixtures: a real personal pool (``andes pool up``) and the sample jobs.

``ANDES_BIN`` names the andes program (``cargo xtask python`` sets it to the
build it tests); ``ANDES_SAMPLES`` the directory of the sample jobs' modules.
"""

import os
import pathlib
import shutil
from typing import Iterator

import pytest

from andes.personal import PersonalPool

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _samples() -> pathlib.Path:
    d = pathlib.Path(os.environ.get("ANDES_SAMPLES", ROOT / "samples/target/wasm32-wasip1/release"))
    if not (d / "primes.wasm").exists():
        pytest.fail(f"the sample jobs are not built in {d}: run `cargo xtask samples`")
    return d


@pytest.fixture(scope="session", autouse=True)
def andes_bin() -> str:
    exe = os.environ.get("ANDES_BIN") or shutil.which("andes")
    if not exe:
        exe = str(ROOT / "target/debug/andes")
    if not os.path.exists(exe):
        pytest.fail(f"no andes program at {exe}: build it (cargo build) or set ANDES_BIN")
    os.environ["ANDES_BIN"] = exe
    return exe


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory, andes_bin: str) -> Iterator[PersonalPool]:
    d = tmp_path_factory.mktemp("pool")
    with PersonalPool(local_dir=d / "pool", slots=2, ready_timeout=120) as p:
        yield p


@pytest.fixture
def jobdir(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    """A submit directory holding the sample modules, made the working directory."""
    for name in ("primes.wasm", "hello.wasm"):
        shutil.copy(_samples() / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path
