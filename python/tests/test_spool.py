"""Remote round trips in htcondor2's shape: ``Schedd.submit(spool=True)``,
``Schedd.spool``, ``Schedd.retrieve`` and ``Schedd.reschedule``, against a
real personal pool started from Python."""


import pathlib
from typing import Union

import pytest

import andes
from andes import classad
from andes.personal import PersonalPool
from waiting import wait_until


def completed(schedd: andes.Schedd, cluster: int) -> Union[list[classad.ClassAd], bool]:
    ads = schedd.query(f"ClusterId == {cluster}", ["ProcId", "JobStatus"])
    return ads and all(a["JobStatus"] == andes.JobStatus.COMPLETED for a in ads)


def test_a_spooled_jobs_input_travels_with_it_and_its_output_waits_for_retrieve(
    pool: PersonalPool, jobdir: pathlib.Path
) -> None:
    schedd = pool.schedd
    (jobdir / "in.txt").write_text("line one\nline two\n")
    sub = andes.Submit(
        {
            "executable": "hello.wasm",
            "arguments": "$(Process)",
            "input": "in.txt",
            "output": "out.$(Process)",
            "error": "err.$(Process)",
            "log": "spooled.log",
        }
    )
    result = schedd.submit(sub, count=2, spool=True)
    schedd.spool(result)
    # The input went to the schedd with the submit: the jobs no longer need it here.
    (jobdir / "in.txt").unlink()
    cluster = result.cluster()
    wait_until("the spooled jobs to complete", lambda: completed(schedd, cluster), 120)
    # Completed, and kept in the queue with their output in the spool.
    assert not (jobdir / "out.0").exists() and not (jobdir / "spooled.log").exists()
    schedd.retrieve(cluster)
    for p in range(2):
        out = (jobdir / f"out.{p}").read_text()
        assert "stdin: LINE ONE" in out and "stdin: LINE TWO" in out, out
    ended = [e for e in andes.JobEventLog("spooled.log").events(stop_after=0) if e.type == andes.JobEventType.JOB_TERMINATED]
    assert sorted(e.proc for e in ended) == [0, 1]
    # Fetched, the completed jobs leave the queue.
    wait_until("the fetched jobs to leave the queue", lambda: not schedd.query(f"ClusterId == {cluster}", ["ProcId"]), 60)
    assert len(schedd.history(f"ClusterId == {cluster}", ["ProcId"])) == 2


def test_retrieve_takes_ids_and_constraints(pool: PersonalPool, jobdir: pathlib.Path) -> None:
    schedd = pool.schedd
    sub = andes.Submit(executable="hello.wasm", arguments="$(Process)", output="c.$(Process)")
    one = schedd.submit(sub, count=2, spool=True).cluster()
    wait_until("the spooled jobs to complete", lambda: completed(schedd, one), 120)
    schedd.retrieve(f"{one}.1")
    assert (jobdir / "c.1").exists() and not (jobdir / "c.0").exists()
    schedd.retrieve(classad.ExprTree(f"ClusterId == {one} && ProcId == 0"))
    assert (jobdir / "c.0").exists()


def test_spool_and_retrieve_refuse_what_was_not_spooled(pool: PersonalPool, jobdir: pathlib.Path) -> None:
    schedd = pool.schedd
    plain = schedd.submit(andes.Submit(executable="hello.wasm", output="plain.out"))
    with pytest.raises(ValueError, match="spool"):
        schedd.spool(plain)
    with pytest.raises(TypeError):
        schedd.spool(plain.cluster())  # type: ignore[arg-type]
    with pytest.raises(andes.HTCondorException, match="spool"):
        schedd.retrieve(f"{plain.cluster()}.0")
    (jobdir / "x.dag").write_text("JOB A a.sub\n")
    with pytest.raises(andes.HTCondorException, match="spooled"):
        schedd.submit(andes.Submit.from_dag("x.dag"), spool=True)


def test_reschedule_reaches_the_schedd(pool: PersonalPool, tmp_path: pathlib.Path) -> None:
    # What it returns, checked: mypy knows it returns nothing.
    assert pool.schedd.reschedule() is None  # type: ignore[func-returns-value]
    # A schedd that does not answer is an error, as htcondor2's is.
    gone = andes.Schedd(classad.ClassAd({"MyAddress": "127.0.0.1:9", "MyType": "Scheduler"}), config=pool.config)
    with pytest.raises(andes.HTCondorException):
        gone.reschedule()
