"""The htcondor2-shaped API against a real personal pool (``andes pool up``)."""

import os
import pathlib

import pytest

import andes
from andes import classad
from andes.personal import PersonalPool


def wait_for(log: str, kind: andes.JobEventType, n: int, timeout: float = 120) -> list[andes.JobEvent]:
    """The events of ``kind`` in ``log``, once ``n`` of them are there."""
    seen: list[andes.JobEvent] = []
    for e in andes.JobEventLog(log).events(stop_after=timeout):
        if e.type == kind:
            seen.append(e)
            if len(seen) == n:
                return seen
    raise AssertionError(f"only {len(seen)} of {n} {kind.name} events in {log} after {timeout} s")


def test_submit_wait_query_history(pool: PersonalPool, jobdir: pathlib.Path) -> None:
    schedd = pool.schedd
    sub = andes.Submit(
        {
            "executable": "primes.wasm",
            "arguments": "1000 $(Process)",
            "output": "out.$(Process)",
            "log": "jobs.log",
        }
    )
    result = schedd.submit(sub, count=3)
    assert result.num_procs() == 3 and result.first_proc() == 0
    assert result.clusterad()["Cmd"].endswith("primes.wasm")
    ended = wait_for("jobs.log", andes.JobEventType.JOB_TERMINATED, 3)
    assert sorted(e.proc for e in ended) == [0, 1, 2]
    assert all(e.cluster == result.cluster() and e["ReturnValue"] == 0 for e in ended)
    for p in range(3):
        assert os.path.getsize(jobdir / f"out.{p}") > 0
    done = schedd.history(f"ClusterId == {result.cluster()}", ["ProcId", "ExitCode", "JobStatus"])
    assert sorted(a["ProcId"] for a in done) == [0, 1, 2]
    assert all(a["JobStatus"] == andes.JobStatus.COMPLETED and a["ExitCode"] == 0 for a in done)
    assert len(schedd.history(f"ClusterId == {result.cluster()}", match=1)) == 1
    assert schedd.query(f"ClusterId == {result.cluster()}") == []


def test_submit_from_text_with_itemdata(pool: PersonalPool, jobdir: pathlib.Path) -> None:
    sub = andes.Submit("executable = primes.wasm\narguments = $(n) $(tag)\nlog = items.log\nqueue\n")
    result = pool.schedd.submit(sub, itemdata=[{"n": "100", "tag": "a"}, {"n": "200", "tag": "b"}])
    assert result.num_procs() == 2
    wait_for("items.log", andes.JobEventType.JOB_TERMINATED, 2)
    args = sorted(a["Args"] for a in pool.schedd.history(f"ClusterId == {result.cluster()}", ["Args"]))
    assert args == ["100 a", "200 b"]


def test_hold_release_edit_remove(pool: PersonalPool, jobdir: pathlib.Path) -> None:
    schedd = pool.schedd
    sub = andes.Submit(executable="primes.wasm", requirements="false", log="held.log")
    cid = schedd.submit(sub, count=2).cluster()
    r = schedd.act(andes.JobAction.Hold, f"{cid}.0", reason="look at it")
    assert r["TotalSuccess"] == 1
    (held,) = schedd.query(f"ClusterId == {cid} && ProcId == 0", ["JobStatus", "HoldReason"])
    assert held["JobStatus"] == andes.JobStatus.HELD and held["HoldReason"] == "look at it"
    assert wait_for("held.log", andes.JobEventType.JOB_HELD, 1)[0]["HoldReason"] == "look at it"
    assert schedd.act(andes.JobAction.Release, [f"{cid}.0"])["TotalSuccess"] == 1
    (again,) = schedd.query(f"ClusterId == {cid} && ProcId == 0", ["JobStatus"])
    assert again["JobStatus"] == andes.JobStatus.IDLE
    assert schedd.edit(cid, "Flavour", '"mint"') == 2
    assert schedd.edit(f"{cid}.1", "Weight", classad.ExprTree("2 * 21")) == 1
    ads = {a["ProcId"]: a for a in schedd.query(f"ClusterId == {cid}", ["ProcId", "Flavour", "Weight"])}
    assert ads[0]["Flavour"] == "mint" and ads[1].eval("Weight") == 42
    r = schedd.act(andes.JobAction.Remove, classad.ExprTree(f"ClusterId == {cid}"))
    assert r["TotalSuccess"] == 2
    assert schedd.query(f"ClusterId == {cid}") == []
    gone = schedd.history(f"ClusterId == {cid}", ["JobStatus"])
    assert [a["JobStatus"] for a in gone] == [andes.JobStatus.REMOVED] * 2


def test_collector_query(pool: PersonalPool) -> None:
    slots = pool.collector.query(andes.AdType.Startd, projection=["Name", "State", "Cpus"])
    assert len(slots) == 2
    assert all(a["Name"].startswith("slot") for a in slots)
    assert pool.collector.query(andes.AdType.Startd, "false") == []
    assert len(pool.collector.query(andes.AdType.Schedd)) == 1


def test_errors_are_htcondor_exceptions_with_the_commands_messages(
    pool: PersonalPool, jobdir: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    with pytest.raises(andes.HTCondorException, match="nope.wasm"):
        pool.schedd.submit(andes.Submit(executable="nope.wasm"))
    with pytest.raises(andes.HTCondorException, match=":2: bad queue statement"):
        pool.schedd.submit("executable = primes.wasm\nqueue banana from\n")
    with pytest.raises(andes.HTCondorException, match="no-such.config"):
        andes.Schedd(config=tmp_path / "no-such.config")
    with pytest.raises(andes.HTCondorException):
        pool.schedd.query("ClusterId ==")
    with pytest.raises(andes.HTCondorException, match="name the jobs"):
        pool.schedd.act(andes.JobAction.Hold, [])


def test_event_log_follows_a_growing_log(tmp_path: pathlib.Path) -> None:
    log = tmp_path / "grow.log"
    events = andes.JobEventLog(log)
    assert list(events.events(stop_after=0)) == []
    with open(log, "w") as f:
        f.write("000 (007.000.000) 2026-11-27 03:29:16Z Job submitted from host: <127.0.0.1:1>\n...\n")
        f.write("001 (007.000.000) 2026-11-27 03:29:17Z Job executing on host: slot1@x\n")
    got = list(events.events(stop_after=0))
    assert [(e.type, e.cluster, e.proc) for e in got] == [(andes.JobEventType.SUBMIT, 7, 0)]
    with open(log, "a") as f:
        f.write("...\n")
    (e,) = list(events.events(stop_after=0))
    assert e.type == andes.JobEventType.EXECUTE and e["ExecuteHost"] == "slot1@x"


def test_htcondors_own_reader_reads_the_same_events(pool: PersonalPool, jobdir: pathlib.Path) -> None:
    try:
        import htcondor2
    except ImportError:
        # A test that ran nothing never passes, unless skipping is asked for.
        if os.environ.get("ANDES_ALLOW_NOT_RUN"):
            pytest.skip("NOT RUN: HTCondor's reader (pip install htcondor)")
        raise
    sub = andes.Submit(executable="primes.wasm", arguments="500", log="both.log", output="o")
    cid = pool.schedd.submit(sub, count=2).cluster()
    wait_for("both.log", andes.JobEventType.JOB_TERMINATED, 2)
    ours = list(andes.JobEventLog("both.log").events(stop_after=0))
    theirs = list(htcondor2.JobEventLog("both.log").events(0))
    assert len(ours) == len(theirs) >= 6
    for a, b in zip(ours, theirs):
        assert (int(a.type), a.cluster, a.proc, a.timestamp) == (int(b.type), b.cluster, b.proc, b.timestamp)
        assert dict(a) == dict(b), f"event {a!r}"
    assert {e.cluster for e in ours} == {cid}


def test_the_readmes_script_runs_as_written(pool: PersonalPool, jobdir: pathlib.Path) -> None:
    import subprocess
    import sys

    readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
    script = readme.split("## From Python", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    assert pool.config is not None
    env = dict(os.environ, ANDES_CONFIG=pool.config)
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=jobdir, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.split("\n")[:-1]) == ["0 0", "1 0", "2 0"]
