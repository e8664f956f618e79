"""Schedd.query's opts= (QueryOpt) honoured or refused, never ignored, and
limit= on query and history, against a real personal pool."""

import pathlib
import time
from typing import Optional, Union

import pytest

import andes
from andes import classad
from andes._andes import Session
from andes.personal import PersonalPool


def idle_jobs(pool: PersonalPool, n: int) -> int:
    """``n`` jobs that stay idle (nothing matches them): their cluster."""
    return pool.schedd.submit(andes.Submit(executable="primes.wasm", requirements="false"), count=n).cluster()


def test_summary_only_counts_as_htcondors_summary_ad(pool: PersonalPool, jobdir: pathlib.Path) -> None:
    schedd = pool.schedd
    cid = idle_jobs(pool, 3)
    schedd.act(andes.JobAction.Hold, f"{cid}.1", reason="counted as held")
    everyone = schedd.query(projection=["JobStatus", "Owner"])
    me = andes._user_name()

    (summary,) = schedd.query(f"ClusterId == {cid}", opts=andes.QueryOpt.SummaryOnly)
    assert isinstance(summary, classad.ClassAd) and summary["MyType"] == "Summary"
    assert (summary["Jobs"], summary["Idle"], summary["Held"], summary["Running"]) == (3, 2, 1, 0)
    assert summary["Removed"] == summary["Completed"] == summary["Suspended"] == 0
    assert summary["AllusersJobs"] == len(everyone)
    assert summary["AllusersHeld"] == sum(a["JobStatus"] == 5 for a in everyone)
    assert summary["MyJobs"] == sum(a["Owner"] == me for a in everyone) >= 3
    # The form scripts written for htcondor2 use.
    theirs = schedd.query("true", opts=andes.QueryOpts.SummaryOnly)[0]
    assert theirs["Jobs"] == theirs["AllusersJobs"] == len(everyone)
    # Flags combine: the summary of your own jobs only.
    mine = schedd.query(opts=andes.QueryOpt.SummaryOnly | andes.QueryOpt.DefaultMyJobsOnly)[0]
    assert mine["Jobs"] >= 3
    schedd.act(andes.JobAction.Remove, cid)


class Recording:
    """A schedd session that notes how each query asked (``mine``)."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self.mine: list[bool] = []

    def query(
        self,
        constraint: Optional[str],
        projection: list[str],
        limit: Optional[int],
        mine: bool = False,
        group_by: Optional[list[str]] = None,
    ) -> list[classad.ClassAd]:
        self.mine.append(mine)
        return self._session.query(constraint, projection, limit, mine=mine, group_by=group_by)


def test_my_jobs_only_is_sent_and_honoured(pool: PersonalPool, jobdir: pathlib.Path) -> None:
    cid = idle_jobs(pool, 2)
    schedd = pool.schedd
    # A stand-in for the schedd's session, which it records the queries of.
    schedd._session = recording = Recording(schedd._session)  # type: ignore[assignment]
    ours = schedd.query(f"ClusterId == {cid}", ["Owner"], opts=andes.QueryOpt.DefaultMyJobsOnly)
    # The pool's owner submitted them (and, as its administrator, would see
    # everyone's, as a queue superuser does with condor_q).
    assert [a["Owner"] for a in ours] == [andes._user_name()] * 2
    schedd.query(f"ClusterId == {cid}")
    # The schedd is asked for the caller's jobs only when the flag says so.
    assert recording.mine == [True, False]
    pool.schedd.act(andes.JobAction.Remove, cid)


def test_autocluster_and_group_by_give_an_ad_per_group_of_jobs(pool: PersonalPool, jobdir: pathlib.Path) -> None:
    schedd = pool.schedd
    small = schedd.submit(
        andes.Submit(executable="primes.wasm", requirements="false", request_memory="64"), count=3
    ).cluster()
    big = schedd.submit(
        andes.Submit(executable="primes.wasm", requirements="false", request_memory="128"), count=2
    ).cluster()
    c = f"ClusterId == {small} || ClusterId == {big}"

    groups = schedd.query(c, opts=andes.QueryOpt.AutoCluster)
    # One ad per autocluster, numbered in the order of their first jobs,
    # and none of the jobs' own ads.
    assert [(g["AutoClusterId"], g["JobCount"], g["RequestMemory"]) for g in groups] == [(1, 3, 64), (2, 2, 128)]
    attrs = groups[0]["AutoClusterAttrs"].split(",")
    assert {"Requirements", "RequestMemory", "RequestCpus"} <= set(attrs)
    assert all("ClusterId" not in g and "ProcId" not in g for g in groups)
    assert len(schedd.query(c, opts=andes.QueryOpt.AutoCluster, limit=1)) == 1
    # Flags combine: your own jobs' autoclusters.
    mine = schedd.query(c, opts=andes.QueryOpt.AutoCluster | andes.QueryOpt.DefaultMyJobsOnly)
    assert [g["JobCount"] for g in mine] == [3, 2]

    # GroupBy groups by the projection.
    (owners,) = schedd.query(c, ["Owner"], opts=andes.QueryOpts.GroupBy)
    assert (owners["Owner"], owners["JobCount"], owners["AutoClusterAttrs"]) == (andes._user_name(), 5, "Owner")
    by_memory = schedd.query(c, ["RequestMemory", "Owner"], opts=andes.QueryOpt.GroupBy)
    assert sorted((g["RequestMemory"], g["JobCount"]) for g in by_memory) == [(64, 3), (128, 2)]
    with pytest.raises(ValueError, match="projection"):
        schedd.query(c, opts=andes.QueryOpt.GroupBy)
    with pytest.raises(ValueError, match="give one"):
        schedd.query(c, ["Owner"], opts=andes.QueryOpt.GroupBy | andes.QueryOpt.AutoCluster)
    schedd.act(andes.JobAction.Remove, small)
    schedd.act(andes.JobAction.Remove, big)


@pytest.mark.parametrize(
    "opt, why",
    [
        (andes.QueryOpt.IncludeClusterAd, "no cluster ads"),
        (andes.QueryOpt.IncludeJobsetAds, "no job sets"),
        (andes.QueryOpt.IncludeClusterAd | andes.QueryOpt.DefaultMyJobsOnly, "IncludeClusterAd"),
        (0x10, "IncludeClusterAd"),
    ],
)
def test_options_andes_cannot_honour_are_refused(pool: PersonalPool, opt: Union[andes.QueryOpt, int], why: str) -> None:
    with pytest.raises(andes.HTCondorException, match=why):
        pool.schedd.query(opts=opt)


def test_bad_options_and_limits_are_errors(pool: PersonalPool) -> None:
    with pytest.raises(ValueError, match="no QueryOpt"):
        pool.schedd.query(opts=0x400)
    with pytest.raises(TypeError, match="opts"):
        pool.schedd.query(opts="AutoCluster")  # type: ignore[call-overload]
    for bad in ("2", 2.0, True):
        with pytest.raises(TypeError, match="limit"):
            pool.schedd.query(limit=bad)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="match"):
            pool.schedd.history(match=bad)  # type: ignore[arg-type]


def test_limit_on_query_and_history(pool: PersonalPool, jobdir: pathlib.Path) -> None:
    schedd = pool.schedd
    cid = idle_jobs(pool, 3)
    c = f"ClusterId == {cid}"
    assert len(schedd.query(c, limit=2)) == 2
    assert len(schedd.query(c, limit=-1)) == 3
    assert schedd.query(c, limit=0) == []
    assert len(schedd.query(c, ["ProcId"], None, 1, andes.QueryOpt.Default)) == 1
    schedd.act(andes.JobAction.Remove, cid)
    deadline = time.monotonic() + 60
    while len(schedd.history(c, ["ProcId"])) < 3:
        assert time.monotonic() < deadline, "the removed jobs never reached the history"
        time.sleep(0.2)
    assert len(schedd.history(c, ["ProcId"], limit=2)) == 2
    assert len(schedd.history(c, ["ProcId"], match=1)) == 1
    assert len(schedd.history(c, ["ProcId"], match=2, limit=2)) == 2
    with pytest.raises(ValueError, match="say different things"):
        schedd.history(c, match=1, limit=2)
