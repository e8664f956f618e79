"""PersonalPool's lifecycle, as htcondor2.personal.PersonalPool's: stopped
however the Python that started it ends, unless detached; attached to again;
its state, repr and configuration."""

import gc
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time
from typing import Iterator

import pytest

import andes
from andes.personal import PersonalPool, PersonalPoolState
from needs import needed


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def pool_pid(d: pathlib.Path) -> int:
    return int((d / "pool-up.pid").read_text())


def python(script: str, *args: object) -> subprocess.CompletedProcess[str]:
    """Runs ``script`` in a Python of its own, as a user's script runs."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.fixture
def reap() -> Iterator[list[int]]:
    """Kills, at the end, any pool process a failed test left behind."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def state_of(pool: PersonalPool) -> PersonalPoolState:
    """``pool.state``, read by a call: mypy takes what an assert found of
    ``pool.state`` to hold after ``start()`` and ``stop()`` too."""
    return pool.state


def test_a_pool_left_running_stops_when_the_interpreter_exits(
    tmp_path: pathlib.Path, andes_bin: str, reap: list[int]
) -> None:
    d = tmp_path / "pool"
    # Neither stop() nor a with block: the script just ends.
    r = python(
        """
        import sys
        from andes.personal import PersonalPool
        pool = PersonalPool(local_dir=sys.argv[1], slots=1).start()
        print(pool.state.value, flush=True)
        """,
        d,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "READY"
    pid = pool_pid(d)
    reap.append(pid)
    assert gone_within(pid, 30), "andes pool up outlived the Python that started it"
    assert (d / "pool-up.out").read_text().rstrip().endswith("pool stopped")

    # Ended by an exception, too.
    r = python(
        """
        import sys
        from andes.personal import PersonalPool
        pool = PersonalPool(local_dir=sys.argv[1], slots=1).start()
        raise SystemExit("the script failed")
        """,
        d,
    )
    assert "the script failed" in r.stderr
    pid = pool_pid(d)
    reap.append(pid)
    assert gone_within(pid, 30)


def test_a_pool_no_longer_referenced_is_stopped(tmp_path: pathlib.Path, andes_bin: str, reap: list[int]) -> None:
    pool = PersonalPool(local_dir=tmp_path / "pool", slots=1).start()
    pid = pool_pid(tmp_path / "pool")
    reap.append(pid)
    assert alive(pid)
    del pool
    gc.collect()
    assert gone_within(pid, 30)


def test_detach_leaves_the_pool_running_and_attach_finds_it(
    tmp_path: pathlib.Path, andes_bin: str, reap: list[int]
) -> None:
    d = tmp_path / "pool"
    r = python(
        """
        import sys
        from andes.personal import PersonalPool
        pool = PersonalPool(local_dir=sys.argv[1], slots=1).start()
        assert pool.detach() is pool
        """,
        d,
    )
    assert r.returncode == 0, r.stderr
    pid = pool_pid(d)
    reap.append(pid)
    time.sleep(1)
    assert alive(pid), "a detached pool was stopped"

    pool = PersonalPool.attach(d)
    assert pool.state is PersonalPoolState.READY
    assert pool.schedd.query("false") == []
    assert pool.get_config_val("NUM_CPUS") == "1"
    # As in htcondor2, stop() leaves a detached pool running ...
    pool.detach().stop()
    assert alive(pid) and pool.state is PersonalPoolState.READY
    # ... and an attached one is stopped like one started here.
    again = PersonalPool.attach(d)
    assert again.stop() is again
    assert again.state is PersonalPoolState.STOPPED
    assert gone_within(pid, 30)

    # Nothing to attach to: said so.
    with pytest.raises(andes.HTCondorException, match="no running personal pool"):
        PersonalPool.attach(d)
    with pytest.raises(andes.HTCondorException, match="no personal pool in"):
        PersonalPool.attach(tmp_path / "nowhere")


def test_an_attached_pool_is_stopped_when_the_interpreter_exits(
    tmp_path: pathlib.Path, andes_bin: str, reap: list[int]
) -> None:
    d = tmp_path / "pool"
    started = PersonalPool(local_dir=d, slots=1).start().detach()
    pid = pool_pid(d)
    reap.append(pid)
    r = python(
        """
        import sys
        from andes.personal import PersonalPool
        PersonalPool.attach(sys.argv[1])
        """,
        d,
    )
    assert r.returncode == 0, r.stderr
    assert gone_within(pid, 30)
    del started


def test_state_repr_and_configuration(tmp_path: pathlib.Path, andes_bin: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    pool = PersonalPool(
        local_dir="pool",
        slots=1,
        config={"MY_KNOB": "$(NUM_CPUS)0", "EMPTY_KNOB": None},
        raw_config="OTHER_KNOB = raw\n",
    )
    assert state_of(pool) is PersonalPoolState.UNINITIALIZED
    assert repr(pool) == "PersonalPool(local_dir=./pool, state=PersonalPoolState.UNINITIALIZED)"
    with pytest.raises(andes.HTCondorException, match="not been started"):
        pool.schedd
    with pytest.raises(andes.HTCondorException, match="no configuration yet"):
        pool.get_config_val("NUM_CPUS")
    with pool:
        assert state_of(pool) is PersonalPoolState.READY
        assert repr(pool) == "PersonalPool(local_dir=./pool, state=PersonalPoolState.READY)"
        assert pool.config_file == tmp_path / "pool" / "andes.config"
        # Expanded, as andes config-val prints it and as htcondor2's gives it.
        assert pool.config is not None
        env = dict(os.environ, ANDES_CONFIG=pool.config)
        for knob in ("SPOOL", "NUM_CPUS", "COLLECTOR_HOST"):
            out = subprocess.run([andes_bin, "config-val", knob], env=env, capture_output=True, text=True)
            assert pool.get_config_val(knob) == out.stdout.strip(), knob
        assert pool.get_config_val("MY_KNOB") == "10"
        assert pool.get_config_val("OTHER_KNOB") == "raw"
        assert pool.get_config_val("EMPTY_KNOB", "dflt") == "dflt"
        assert pool.get_config_val("NO_SUCH_KNOB", "dflt") == "dflt"
        with pytest.raises(KeyError):
            pool.get_config_val("NO_SUCH_KNOB")
    assert state_of(pool) is PersonalPoolState.STOPPED
    assert repr(pool) == "PersonalPool(local_dir=./pool, state=PersonalPoolState.STOPPED)"
    # A pool started without them has none of them.
    with PersonalPool(local_dir="pool", slots=1) as again:
        assert again.get_config_val("MY_KNOB", "gone") == "gone"
    with pytest.raises(ValueError, match="not a knob name"):
        PersonalPool(config={"A B": "1"})
    with pytest.raises(ValueError, match="newline"):
        PersonalPool(config={"A": "1\nB = 2"})

    # htcondor2's repr and states, for the same directory.
    personal = needed("htcondor2.personal", "htcondor")
    theirs = personal.PersonalPool(local_dir="pool", use_config=False)
    assert [s.value for s in PersonalPoolState] == [s.value for s in personal.PersonalPoolState]
    for state in PersonalPoolState:
        theirs._state = personal.PersonalPoolState(state.value)
        pool._state = state
        assert repr(pool) == repr(theirs)
    pool._state = PersonalPoolState.STOPPED
    theirs._state = personal.PersonalPoolState.STOPPED


def test_a_pool_that_cannot_start_says_why_and_leaves_nothing(
    tmp_path: pathlib.Path, andes_bin: str, reap: list[int]
) -> None:
    d = tmp_path / "pool"
    d.mkdir()
    (d / "config.d").mkdir()
    (d / "config.d" / "broken.config").write_text("SHUTDOWN_GRACEFUL_TIMEOUT = soon\n")
    pool = PersonalPool(local_dir=d, slots=1)
    with pytest.raises(andes.HTCondorException, match="did not start"):
        pool.start()
    assert pool.state is PersonalPoolState.STOPPED
    assert not alive(pool_pid(d))
