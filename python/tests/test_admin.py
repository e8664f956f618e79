"""Daemon administration in htcondor2's shape (send_command, Startd,
Negotiator, RemoteParam) against real personal pools started from Python."""


import pathlib

import pytest

import andes
from andes import classad
from waiting import wait_until
from andes.personal import PersonalPool


def states(pool: PersonalPool) -> dict[str, str]:
    return {a["Name"]: a["State"] for a in pool.collector.query(andes.AdType.Startd, projection=["Name", "State"])}


def test_reconfig_reaches_each_daemon_a_location_ad_names(pool: PersonalPool) -> None:
    c = pool.collector
    for daemon in (andes.DaemonType.Schedd, andes.DaemonType.Startd, andes.DaemonType.Collector):
        ad = c.locate(daemon)
        assert ad is not None, daemon
        andes.send_command(ad, andes.DaemonCommands.Reconfig, config=pool.config)
    # A schedd or negotiator is stopped by stopping its process, not by command.
    schedd = c.locate(andes.DaemonType.Schedd)
    assert schedd is not None
    with pytest.raises(andes.HTCondorException, match="SIGTERM"):
        andes.send_command(schedd, andes.DaemonCommand.OffGraceful, config=pool.config)


def test_what_has_no_andes_meaning_says_what_to_do_instead(pool: PersonalPool) -> None:
    c = pool.collector
    startd = c.locate(andes.DaemonType.Startd)
    assert startd is not None
    for dc in (andes.DaemonCommand.DaemonsOff, andes.DaemonCommand.Restart, andes.DaemonCommand.SetPeacefulShutdown):
        with pytest.raises(andes.HTCondorException, match="no master daemon"):
            andes.send_command(startd, dc, config=pool.config)
    with pytest.raises(andes.HTCondorException, match="no master daemon"):
        andes.send_command(startd, andes.DaemonCommand.DaemonOff, "STARTD", config=pool.config)
    master = classad.ClassAd({"MyType": "DaemonMaster", "MyAddress": startd["MyAddress"]})
    with pytest.raises(andes.HTCondorException, match="andes pool up"):
        andes.send_command(master, andes.DaemonCommand.Reconfig)
    with pytest.raises(ValueError, match="Address"):
        andes.send_command(classad.ClassAd({"MyType": "Machine"}), andes.DaemonCommand.Reconfig)
    with pytest.raises(andes.HTCondorException, match="config-val"):
        andes.RemoteParam(startd)
    sd = andes.Startd(startd, config=pool.config)
    with pytest.raises(andes.HTCondorException, match="reason"):
        sd.drainJobs(reason="maintenance")
    with pytest.raises(andes.HTCondorException, match="Quick"):
        sd.drainJobs(andes.DrainType.Fast)
    with pytest.raises(andes.HTCondorException, match="cancelDrainJobs"):
        sd.drainJobs(on_completion=andes.CompletionType.Resume)
    with pytest.raises(andes.HTCondorException, match="Schedd.history"):
        sd.history()
    with pytest.raises(ValueError, match="slot"):
        sd.vacateSlot("host.example.org")
    with pytest.raises(andes.HTCondorException, match="setFactor"):
        andes.Negotiator(config=pool.config).setPriority("me@here", 5.0)
    # Nothing above drained or stopped anything.
    assert set(states(pool).values()) == {"Unclaimed"}


def test_a_startd_drains_and_takes_jobs_again(pool: PersonalPool) -> None:
    sd = andes.Startd(pool.collector.locate(andes.DaemonType.Startd), config=pool.config)
    request = sd.drainJobs(andes.DrainType.Graceful)
    wait_until("every slot Drained", lambda: set(states(pool).values()) == {"Drained"})
    with pytest.raises(andes.HTCondorException, match="no drain request"):
        sd.cancelDrainJobs("someone else's")
    sd.cancelDrainJobs(request)
    wait_until("every slot Unclaimed", lambda: set(states(pool).values()) == {"Unclaimed"})


def test_vacate_sends_a_running_job_back_to_idle(pool: PersonalPool, jobdir: pathlib.Path) -> None:
    schedd = pool.schedd
    sub = andes.Submit({"executable": "primes.wasm", "arguments": "400000000", "log": "vacated.log"})
    cluster = schedd.submit(sub).cluster()
    running = lambda: schedd.query(f"ClusterId == {cluster} && JobStatus == 2", ["RemoteHost"])  # noqa: E731
    slot = wait_until("the job to run", running)[0]["RemoteHost"]
    andes.Startd(config=pool.config).vacateSlot(slot, andes.VacateType.Fast)
    evicted = next(e for e in andes.JobEventLog("vacated.log").events(stop_after=60) if e.type == andes.JobEventType.JOB_EVICTED)
    assert evicted.cluster == cluster
    schedd.act(andes.JobAction.Remove, f"ClusterId == {cluster}")


def test_negotiator_priorities_and_factor(pool: PersonalPool, jobdir: pathlib.Path) -> None:
    schedd = pool.schedd
    sub = andes.Submit({"executable": "hello.wasm", "log": "prio.log"})
    cluster = schedd.submit(sub).cluster()
    log = andes.JobEventLog("prio.log")
    assert any(e.type == andes.JobEventType.JOB_TERMINATED for e in log.events(stop_after=60))
    located = pool.collector.locate(andes.DaemonType.Negotiator)
    assert located is not None
    assert located["MyType"] == "Negotiator" and pool.collector.locateAll(andes.DaemonType.Negotiator) == [located]
    andes.send_command(located, andes.DaemonCommand.Reconfig, config=pool.config)
    neg = andes.Negotiator(located, config=pool.config)
    rows = wait_until("a submitter in the accountant", neg.getPriorities)
    name = rows[0]["Name"]
    owner = wait_until("the job in the history", lambda: schedd.history(f"ClusterId == {cluster}", ["Owner"]))[0]["Owner"]
    assert [r["Name"] for r in rows] == [owner] and rows[0]["PriorityFactor"] >= 1 and rows[0]["LastUsageTime"] > 0
    neg.setFactor(name, 7)
    assert {r["Name"]: r["PriorityFactor"] for r in neg.getPriorities(rollup=True)}[name] == 7.0
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        neg.setFactor(name, 0.5)
    with pytest.raises(ValueError, match="submitter"):
        neg.setFactor(" ", 2)


def test_off_turns_an_execute_host_off(tmp_path: pathlib.Path) -> None:
    # Its own pool: `andes pool up` ends with its host.
    with PersonalPool(local_dir=tmp_path / "offpool", slots=1, ready_timeout=120) as p:
        ad = p.collector.locate(andes.DaemonType.Startd)
        assert ad is not None
        andes.send_command(ad, andes.DaemonCommand.OffGraceful, config=p.config)

        def gone() -> bool:
            try:
                andes.Startd(ad, config=p.config).vacate()
            except andes.HTCondorException as e:
                return "refused" in str(e) or "closed" in str(e)
            return False

        wait_until("the host to stop answering", gone)
        # A personal pool's `andes pool up` ends with its host.
        wait_until("the pool to be stopped", lambda: p.state == andes.personal.PersonalPoolState.STOPPED)
