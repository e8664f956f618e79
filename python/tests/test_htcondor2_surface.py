"""More of htcondor2's surface against a real personal pool, checked against
htcondor2's own where that says what is right."""

import enum
import os
import pathlib
import socket
import time
from typing import Iterator

import pytest

import andes
from andes import classad
from andes.personal import PersonalPool
from needs import needed


@pytest.fixture
def pool_env(pool: PersonalPool, monkeypatch: pytest.MonkeyPatch) -> Iterator[PersonalPool]:
    """The pool as this process's configuration (``ANDES_CONFIG``), as an
    htcondor2 script finds its pool: ``param`` read afresh, and again after."""
    assert pool.config is not None
    monkeypatch.setenv("ANDES_CONFIG", pool.config)
    andes.reload_config()
    yield pool
    monkeypatch.undo()
    # No subsystem, and the configuration read again when next used.
    andes.param._subsystem = None
    andes.param._root = None
    andes.param._table = None


def test_locate_gives_an_ad_schedd_connects_to(pool_env: PersonalPool, jobdir: pathlib.Path) -> None:
    coll = andes.Collector()
    ad = coll.locate(andes.DaemonType.Schedd)
    assert isinstance(ad, classad.ClassAd)
    assert ad["MyType"] == "Scheduler" and ad["Name"] == andes.param["SCHEDD_NAME"]
    assert ad["MyAddress"] == pool_env.schedd._session.url.split("://")[1]
    by_name = coll.locate(andes.DaemonTypes.Schedd, ad["Name"])
    assert by_name is not None and by_name["MyAddress"] == ad["MyAddress"]
    assert coll.locate(andes.DaemonType.Schedd, "nobody@nowhere") is None

    schedd = andes.Schedd(ad)
    cid = schedd.submit(andes.Submit(executable="primes.wasm", requirements="false"), count=2).cluster()
    assert sorted(a["ProcId"] for a in schedd.query(f"ClusterId == {cid}", ["ProcId"])) == [0, 1]
    # HTCondor's form of an address, "<host:port?...>", is taken too.
    sinful = classad.ClassAd({"MyAddress": f"<{ad['MyAddress']}?addrs={ad['MyAddress']}>"})
    assert len(andes.Schedd(sinful).query(f"ClusterId == {cid}")) == 2
    assert andes.Schedd(ad).act(andes.JobAction.Remove, cid)["TotalSuccess"] == 2
    with pytest.raises(TypeError):
        andes.Schedd("not an ad")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Machine ad, not a schedd"):
        andes.Schedd(coll.locateAll(andes.DaemonType.Startd)[0])


def test_locate_all_startds_and_a_collector_by_address(pool_env: PersonalPool) -> None:
    coll = andes.Collector()
    slots = coll.locateAll(andes.DaemonType.Startd)
    assert sorted(a["Name"] for a in slots) == sorted(
        a["Name"] for a in coll.query(andes.AdType.Startd, projection=["Name"])
    )
    assert len(slots) == 2 and all("MyAddress" in a and a["MyType"] == "Machine" for a in slots)
    first = coll.locate(andes.DaemonType.Startd, slots[0]["Name"])
    assert first is not None and first["Name"] == slots[0]["Name"]
    # A startd by machine name: this machine's, as the slot ads name it.
    by_machine = coll.locate(andes.DaemonType.Startd, slots[0]["Machine"])
    assert by_machine is not None and by_machine["Machine"] == slots[0]["Machine"]
    local = coll.locate(andes.DaemonType.Startd)
    assert local is not None and local["Machine"] in (socket.gethostname(), slots[0]["Machine"])
    schedd = coll.locate(andes.DaemonType.Schedd)
    assert schedd is not None
    assert [a["MyAddress"] for a in coll.locateAll(andes.DaemonType.Schedd)] == [schedd["MyAddress"]]
    assert coll.locateAll(andes.DaemonType.Credd) == []

    # The collector itself, and Collector(pool) by "host:port", by a list, by an ad.
    me = coll.locate(andes.DaemonType.Collector)
    assert me is not None and me["MyAddress"] == andes.param["COLLECTOR_HOST"]
    for pool in (me["MyAddress"], [me["MyAddress"]], me, f"<{me['MyAddress']}>"):
        remote = andes.Collector(pool)
        assert remote.default is False
        assert len(remote.query(andes.AdType.Startd)) == 2
        found = remote.locate(andes.DaemonType.Schedd)
        assert found is not None and found["Name"] == andes.param["SCHEDD_NAME"]
    with pytest.raises(ValueError, match="MyAddress"):
        andes.Collector(classad.ClassAd({"Name": "x"}))
    with pytest.raises(TypeError):
        andes.Collector(9618)  # type: ignore[arg-type]
    # Ad types andes's collector does not hold have no ads.
    assert coll.query(andes.AdType.Master) == []


def test_enums_have_htcondor2s_names_and_values(pool: PersonalPool) -> None:
    htcondor2 = needed("htcondor2", "htcondor")
    pairs = [
        ("AdType", "AdTypes"),
        ("DaemonType", "DaemonTypes"),
        ("QueryOpt", "QueryOpts"),
        ("TransactionFlag", "TransactionFlags"),
        ("DrainType", "DrainTypes"),
        ("CredType", "CredTypes"),
        ("DaemonCommand", "DaemonCommands"),
        ("SubsystemType", None),
        ("JobAction", None),
    ]
    for one, many in pairs:
        ours, theirs = getattr(andes, one), getattr(htcondor2, one)
        assert ours.__mro__[1] is theirs.__mro__[1], one
        assert dict(ours.__members__) and {k: int(v) for k, v in ours.__members__.items()} == {
            k: int(v) for k, v in theirs.__members__.items()
        }, one
        if many:
            assert getattr(andes, many) is ours and many in andes.__all__
    # An IntFlag member equals its number (mypy's strict equality takes the
    # member and the int for types that cannot be equal).
    assert andes.QueryOpts.Default == 0 and andes.TransactionFlags.Default == 0  # type: ignore[comparison-overlap]
    assert andes.AdType.from_MyType("Scheduler") is andes.AdType.Schedd
    assert andes.AdType.from_MyType("Machine") == htcondor2.AdType.from_MyType("Machine")
    # The pool answers to the numbers htcondor2 scripts pass.
    assert len(pool.collector.query(andes.AdType(1))) == 1
    assert issubclass(andes.QueryOpt, enum.IntFlag)


def test_param_reads_the_configuration_as_config_val_does(pool_env: PersonalPool, tmp_path: pathlib.Path) -> None:
    import subprocess

    param = andes.param
    assert param["COLLECTOR_HOST"].startswith("127.0.0.1:")
    assert param["collector_host"] == param["COLLECTOR_HOST"]
    # Macros are expanded, as andes config-val prints them.
    assert param["SPOOL"] == os.path.join(pool_env.local_dir, "spool")
    assert pool_env.config is not None
    env = dict(os.environ, ANDES_CONFIG=pool_env.config)
    for knob in ("SPOOL", "NUM_CPUS", "SCHEDD_NAME", "LOCAL_CONFIG_DIR"):
        out = subprocess.run([os.environ["ANDES_BIN"], "config-val", knob], env=env, capture_output=True, text=True)
        assert param[knob] == out.stdout.strip(), knob
    assert "SPOOL" in param and "NO_SUCH_KNOB" not in param
    assert param.get("NO_SUCH_KNOB", "dflt") == "dflt" and param.get("NUM_CPUS") == "2"
    with pytest.raises(KeyError):
        param["NO_SUCH_KNOB"]
    keys = list(param)
    assert "SPOOL" in keys and "COLLECTOR_HOST" in keys and len(param) == len(keys)
    assert all(param[k] for k in keys)

    # A knob set here is seen here (and expanded), not written anywhere.
    param["MY_KNOB"] = "$(NUM_CPUS)0"
    assert param["MY_KNOB"] == "20"
    del param["MY_KNOB"]
    assert "MY_KNOB" not in param

    # reload_config reads the files again, or the file it is given.
    with open(os.path.join(pool_env.local_dir, "andes.config.local"), "w") as f:
        f.write("MY_KNOB = from the local file\nSCHEDD.MY_KNOB = the schedd's\n")
    assert "MY_KNOB" not in param
    andes.reload_config()
    assert param["MY_KNOB"] == "from the local file"
    param["SET_HERE"] = "kept"
    andes.set_subsystem("SCHEDD")
    assert param["MY_KNOB"] == "the schedd's" and param["SET_HERE"] == "kept"
    andes.set_subsystem("TOOL", andes.SubsystemType.Tool)
    assert param["MY_KNOB"] == "from the local file"
    other = tmp_path / "other.config"
    other.write_text("LOCAL_DIR = /nowhere\nMY_KNOB = other\n")
    andes.reload_config(other)
    assert param["MY_KNOB"] == "other" and param["SPOOL"] == "/nowhere/spool"
    assert "SET_HERE" not in param
    andes.reload_config()
    assert param["MY_KNOB"] == "from the local file"
    os.remove(os.path.join(pool_env.local_dir, "andes.config.local"))


def test_reload_config_with_a_file_is_the_pool_schedd_and_collector_use(
    pool_env: PersonalPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANDES_CONFIG")
    andes.reload_config(pool_env.config)
    collector = andes.Collector().locate(andes.DaemonType.Collector)
    assert collector is not None and andes.param["COLLECTOR_HOST"] == collector["MyAddress"]
    assert andes.Schedd().query("false") == []
    schedd = andes.Collector().locate(andes.DaemonType.Schedd)
    assert schedd is not None and schedd["Name"] == andes.param["SCHEDD_NAME"]


def test_str_of_an_event_is_its_text_in_the_user_log(pool: PersonalPool, jobdir: pathlib.Path) -> None:
    sub = andes.Submit(executable="primes.wasm", arguments="300", log="text.log", output="o")
    cid = pool.schedd.submit(sub, count=1).cluster()
    events = []
    for e in andes.JobEventLog("text.log").events(stop_after=120):
        events.append(e)
        if e.type == andes.JobEventType.JOB_TERMINATED:
            break
    text = (jobdir / "text.log").read_text()
    blocks = [b for b in text.split("...\n") if b]
    assert len(blocks) == len(events) >= 3
    for e, block in zip(events, blocks):
        # The log's text, its date in local time (as htcondor2 gives it; the
        # schedd writes UTC with a Z).
        head, _, body = str(e).partition("\n")
        log_head, _, log_body = block.partition("\n")
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e.timestamp))
        assert head == f"{int(e.type):03d} ({cid:03d}.000.000) {when} " + log_head.split("Z ", 1)[1]
        assert body == log_body, repr(e)
    assert str(events[0]).startswith(f"000 ({cid:03d}.000.000) ")
    assert "Job submitted from host: <" in str(events[0])
    assert repr(events[0]) == f"JobEvent(type={andes.JobEventType.SUBMIT}, cluster={cid}, proc=0, timestamp={events[0].timestamp})"

    htcondor2 = needed("htcondor2", "htcondor")
    theirs = list(htcondor2.JobEventLog("text.log").events(0))
    assert [str(e) for e in events] == [str(e) for e in theirs]
    assert [repr(e) for e in events] == [repr(e) for e in theirs]


def test_submit_takes_queue_as_htcondor2_does(pool: PersonalPool, jobdir: pathlib.Path) -> None:
    htcondor2 = needed("htcondor2", "htcondor")
    for q in ("3", "queue 3", "QUEUE 2 x in (a b)", ""):
        ours = andes.Submit({"executable": "primes.wasm"}, queue=q)
        theirs = htcondor2.Submit({"executable": "primes.wasm"}, queue=q)
        assert ours.getQArgs() == theirs.getQArgs() and str(ours) == str(theirs), q
    ours = andes.Submit(executable="primes.wasm", arguments="10", log="q.log", queue="3")
    assert dict(ours) == {"executable": "primes.wasm", "arguments": "10", "log": "q.log"}
    result = pool.schedd.submit(ours)
    assert result.num_procs() == 3
    with pytest.raises(ValueError, match="can not be specified in a dictionary"):
        andes.Submit({"executable": "primes.wasm", "Queue": "3"})
    with pytest.raises(ValueError, match="can not be specified in a dictionary"):
        htcondor2.Submit({"executable": "primes.wasm", "Queue": "3"})
    with pytest.raises(ValueError, match="setQArgs"):
        andes.Submit(executable="primes.wasm")["queue"] = "3"
    with pytest.raises(TypeError):
        andes.Submit(executable="primes.wasm", queue=3)  # type: ignore[arg-type]
    # A submit file's own queue statement stays as it was.
    assert andes.Submit("executable = primes.wasm\nqueue 4\n").getQArgs() == "4"
    n = 0
    for e in andes.JobEventLog("q.log").events(stop_after=120):
        n += e.type == andes.JobEventType.JOB_TERMINATED
        if n == 3:
            break
    assert n == 3


def test_job_event_log_is_an_iterator_and_a_context_manager(pool: PersonalPool, jobdir: pathlib.Path) -> None:
    cid = pool.schedd.submit(andes.Submit(executable="primes.wasm", arguments="200", log="it.log"), count=2).cluster()
    with andes.JobEventLog("it.log") as log:
        assert iter(log) is log and log.events(stop_after=120) is log
        first = next(log)
        assert first.type == andes.JobEventType.SUBMIT and first.cluster == cid
        ended = set()
        for e in log:
            if e.type == andes.JobEventType.JOB_TERMINATED:
                ended.add(e.proc)
                if ended == {0, 1}:
                    break
        # Read to the end: nothing more comes, and the log can be read on.
        assert list(log.events(stop_after=0)) == []
        with pytest.raises(StopIteration):
            next(log)
    # Closed: no more events, even from the start of another pass.
    with pytest.raises(StopIteration):
        next(log.events(stop_after=0))
    # A log read again from its start has them all, and iterates as htcondor2's.
    again = andes.JobEventLog("it.log")
    events = list(again.events(0))
    assert events[0].type == andes.JobEventType.SUBMIT and len(events) >= 6
    again.close()
    assert list(again.events(0)) == []
    with pytest.raises(ValueError):
        andes.JobEventLog("")
    with pytest.raises(TypeError):
        andes.JobEventLog("it.log").events(stop_after="soon")  # type: ignore[arg-type]
