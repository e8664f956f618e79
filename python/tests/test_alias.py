"""A tool from PyPI written for HTCondor's bindings (ezdag, which imports
``htcondor2`` itself and submits with ``htcondor2.Submit.from_dag`` and
``htcondor2.Schedd().submit``) drives a pool of andes's unchanged, after
one line of the script that uses it: ``andes.alias_htcondor()``."""

import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from andes.personal import PersonalPool

ROOT = pathlib.Path(__file__).resolve().parents[2]

SCRIPT = """
import andes
andes.alias_htcondor()

import htcondor2, htcondor, classad2
assert htcondor2 is andes and htcondor is andes and classad2 is andes.classad

from ezdag import DAG, Argument, Layer, Node

dag = DAG("copies")
copy = Layer("copyfile.wasm", name="copy")
for i in range(2):
    copy += Node(inputs=Argument("source", "source.txt"), outputs=Argument("copy", f"copy_{i}.txt"))
dag.attach(copy)
result = dag.submit()
print(result.cluster())
"""


def test_ezdag_submits_through_andes_after_alias_htcondor(
    pool: PersonalPool, andes_bin: str, tmp_path: pathlib.Path
) -> None:
    # Looked for, not imported: ezdag imports HTCondor's own bindings, which
    # the rest of this process's tests must not have loaded for them.
    if importlib.util.find_spec("ezdag") is None:
        # A test that ran nothing never passes, unless skipping is asked for.
        if os.environ.get("ANDES_ALLOW_NOT_RUN"):
            pytest.skip("NOT RUN: ezdag (pip install ezdag)")
        pytest.fail("ezdag is not installed (pip install ezdag)")
    samples = pathlib.Path(os.environ.get("ANDES_SAMPLES", ROOT / "samples/target/wasm32-wasip1/release"))
    shutil.copy(samples / "copyfile.wasm", tmp_path / "copyfile.wasm")
    (tmp_path / "source.txt").write_text("the source\n")
    assert pool.config is not None
    env = dict(os.environ, ANDES_CONFIG=pool.config)
    # A fresh interpreter: the alias is for the whole process.
    r = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stdout + r.stderr
    cluster = int(r.stdout.strip().splitlines()[-1])
    wait = subprocess.run(
        [andes_bin, "wait", "--wait", "180", "copies.dag.dagman.log"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=210,
    )
    progress = (tmp_path / "copies.dag.dagman.out").read_text()
    assert wait.returncode == 0, progress
    assert "exiting with status 0" in progress, progress
    for i in range(2):
        assert (tmp_path / f"copy_{i}.txt").read_text() == "the source\n"
    jobs = pool.schedd.history(f"DAGManJobId == {cluster}", ["DAGNodeName", "ExitCode"])
    assert sorted((a["DAGNodeName"], a["ExitCode"]) for a in jobs) == [("copy:00000", 0), ("copy:00001", 0)]


def test_alias_htcondor_after_the_real_bindings_is_an_error() -> None:
    code = "import htcondor2\nimport andes\nandes.alias_htcondor()\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    if "No module named 'htcondor2'" in r.stderr and not os.environ.get("ANDES_ALLOW_NOT_RUN"):
        pytest.fail("HTCondor's bindings are not installed (pip install htcondor)")
    assert r.returncode != 0
    assert "alias_htcondor() must come before anything imports" in r.stderr, r.stderr
