"""A personal pool run from Python, as ``htcondor2.personal.PersonalPool`` does.

::

    from andes.personal import PersonalPool

    with PersonalPool(local_dir="my-pool", slots=2) as pool:
        result = pool.schedd.submit(sub, count=4)

It runs ``andes pool up`` (the central manager, a schedd and an execute host in
one process) and stops it with ``andes pool down``. The ``andes`` program is
``ANDES_BIN`` when set, else ``andes`` on ``PATH``.

A pool started here is stopped when the ``with`` block ends, when ``stop()``
is called, when the object is garbage-collected, or when the interpreter
exits, whichever comes first: no ``andes pool up`` is left behind, unless the
pool is ``detach()``-ed (then it runs on, and ``PersonalPool.attach(dir)``
finds it again).
"""

import enum
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import weakref

from ._andes import Config as _Config
from ._andes import HTCondorException

__all__ = ["PersonalPool", "PersonalPoolState"]

# What `andes pool up` writes its output to, and the pid of the process
# (for `attach`), in the pool's directory.
_OUT = "pool-up.out"
_PID = "pool-up.pid"
# The configuration PersonalPool(config=..., raw_config=...) adds, written
# anew by every start into the pool's LOCAL_CONFIG_DIR.
_EXTRA = os.path.join("config.d", "personal-pool.config")

_KNOB = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


def _andes_bin():
    exe = os.environ.get("ANDES_BIN") or shutil.which("andes")
    if not exe:
        raise HTCondorException(
            "the andes program is not on PATH (install it with `cargo install --path .` "
            "from the andes checkout, or set ANDES_BIN)"
        )
    return exe


class PersonalPoolState(str, enum.Enum):
    """Where a ``PersonalPool`` is in its life (``htcondor2.personal.PersonalPoolState``)."""

    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZED = "INITIALIZED"
    STARTING = "STARTING"
    READY = "READY"
    STOPPING = "STOPPING"
    STOPPED = "STOPPED"


def _pid_alive(pid):
    """Whether process ``pid`` runs (a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _answers(address):
    """Whether something listens at ``host:port``."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=2):
            return True
    except (OSError, ValueError):
        return False


class _Running:
    """What stopping a running pool needs, held apart from the
    ``PersonalPool`` so that its finalizer does not keep it alive: the
    process (when this interpreter started it), else its pid (read from the
    pool's directory), else the collector's address to watch."""

    def __init__(self, andes, config, proc=None, pid=None, collector=None, tmp=None):
        self.andes = andes
        self.config = config
        self.proc = proc
        self.pid = pid
        self.collector = collector
        self.tmp = tmp

    def alive(self):
        if self.proc is not None:
            return self.proc.poll() is None
        if self.pid is not None:
            return _pid_alive(self.pid)
        return self.collector is not None and _answers(self.collector)

    def _signal(self, sig):
        try:
            if self.proc is not None:
                self.proc.send_signal(sig)
            elif self.pid is not None:
                os.kill(self.pid, sig)
        except (ProcessLookupError, OSError):
            pass

    def _wait(self, timeout):
        deadline = time.monotonic() + timeout
        while self.alive():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    def stop(self, timeout=60):
        """``andes pool down``; SIGTERM (which the pool takes as the same)
        when that cannot be sent; SIGKILL past ``timeout``."""
        try:
            if self.alive():
                env = dict(os.environ, ANDES_CONFIG=self.config)
                try:
                    down = subprocess.run(
                        [self.andes, "pool", "down"], env=env, capture_output=True, timeout=timeout
                    )
                    asked = down.returncode == 0
                except (OSError, subprocess.TimeoutExpired):
                    asked = False
                if not asked:
                    self._signal(signal.SIGTERM)
                if not self._wait(timeout):
                    self._signal(signal.SIGKILL)
                    self._wait(10)
            if self.proc is not None:
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            if self.tmp is not None:
                shutil.rmtree(self.tmp, ignore_errors=True)
                self.tmp = None


def _stop(running):
    running.stop()


class PersonalPool:
    """A pool of one machine (``htcondor2.personal.PersonalPool``): its
    directory holds the configuration, keys, queue and sandboxes.

    ``local_dir``: the pool's directory (default: a temporary one, removed
    when the pool stops). ``slots``: execute slots (default: one per CPU).
    ``plaintext``: plain HTTP between the pool's parts. ``ready_timeout``:
    seconds to wait for the pool to start. ``config`` (knob names to values)
    and ``raw_config`` (configuration text) are added to the pool's
    configuration, as in htcondor2. ``detach``: leave the pool running when
    this object goes or the interpreter exits (see ``detach()``).

    ``state`` says where the pool is (a ``PersonalPoolState``); ``config``,
    once started, is the path of its ``andes.config`` (what ``ANDES_CONFIG``
    names to use it from outside).
    """

    def __init__(
        self,
        local_dir=None,
        slots=None,
        plaintext=False,
        ready_timeout=120,
        config=None,
        raw_config=None,
        detach=False,
    ):
        self._tmp = None
        if local_dir is None:
            self._tmp = tempfile.mkdtemp(prefix="andes-pool-")
            local_dir = self._tmp
        self.local_dir = os.path.abspath(os.fspath(local_dir))
        self.slots = slots
        self.plaintext = plaintext
        self.ready_timeout = ready_timeout
        self._extra = _extra_config(config, raw_config)
        self._detach = bool(detach)
        self._state = PersonalPoolState.UNINITIALIZED
        self._running = None
        self._finalizer = None
        self.config = None

    @property
    def state(self):
        """Where the pool is in its life: a ``PersonalPoolState``. A ready
        pool whose ``andes pool up`` has ended (its execute host turned off,
        say, or the process killed) is ``STOPPED``."""
        running = self._running
        if (
            self._state == PersonalPoolState.READY
            and running is not None
            and (running.proc is not None or running.pid is not None)
            and not running.alive()
        ):
            self._halt()
        return self._state

    @property
    def config_file(self):
        """The pool's configuration file (``local_dir/andes.config``), as a
        ``pathlib.Path`` (htcondor2's ``config_file``)."""
        return pathlib.Path(self.local_dir) / "andes.config"

    def __repr__(self):
        # htcondor2's: the shortest of the absolute path, ~/... and ./...
        d = pathlib.Path(self.local_dir)
        shortest = min(
            (str(d), "~/" + str(_relative(d, pathlib.Path.home())), "./" + str(_relative(d, pathlib.Path.cwd()))),
            key=len,
        )
        return "{}(local_dir={}, state={})".format(type(self).__name__, shortest, self._state)

    def initialize(self):
        """Makes the pool's directory and writes the configuration given as
        ``config`` / ``raw_config`` (``INITIALIZED``). ``start`` does this."""
        if self._state in (PersonalPoolState.INITIALIZED, PersonalPoolState.STARTING, PersonalPoolState.READY):
            return self
        os.makedirs(self.local_dir, exist_ok=True)
        extra = os.path.join(self.local_dir, _EXTRA)
        if self._extra:
            os.makedirs(os.path.dirname(extra), exist_ok=True)
            with open(extra, "w") as f:
                f.write(self._extra)
        elif os.path.exists(extra):
            os.remove(extra)
        self._state = PersonalPoolState.INITIALIZED
        return self

    def start(self):
        """Starts the pool and waits until it is ready (``READY``). A ready
        pool is left as it is."""
        if self._state == PersonalPoolState.READY:
            return self
        self.initialize()
        self._state = PersonalPoolState.STARTING
        andes = _andes_bin()
        cmd = [andes, "pool", "up", "--dir", self.local_dir]
        if self.slots is not None:
            cmd += ["--slots", str(self.slots)]
        if self.plaintext:
            cmd.append("--plaintext")
        out_path = os.path.join(self.local_dir, _OUT)
        with open(out_path, "w") as out:
            # A session of its own: Ctrl-C in a terminal reaches Python, which
            # stops the pool, and not the pool behind its back.
            proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        with open(os.path.join(self.local_dir, _PID), "w") as f:
            f.write(f"{proc.pid}\n")
        self._running = _Running(andes, os.fspath(self.config_file), proc=proc, tmp=self._tmp)
        self._track()
        try:
            self.config = self._wait_ready(proc, out_path)
        except BaseException:
            self._halt()
            raise
        self._running.config = self.config
        self._state = PersonalPoolState.READY
        return self

    def _wait_ready(self, proc, out_path):
        deadline = time.monotonic() + self.ready_timeout
        while True:
            with open(out_path) as f:
                lines = f.read().splitlines()
            if "pool ready" in (line.strip() for line in lines):
                for line in lines:
                    if line.startswith("export ANDES_CONFIG="):
                        return line.split("=", 1)[1].strip()
            if proc.poll() is not None:
                why = [line for line in lines if line.strip()][-5:]
                raise HTCondorException(
                    f"the personal pool in {self.local_dir} did not start (andes pool up exited "
                    f"{proc.returncode}): " + " | ".join(why)
                )
            if time.monotonic() > deadline:
                raise HTCondorException(
                    f"the personal pool in {self.local_dir} did not start in {self.ready_timeout} s "
                    f"(its output: {out_path})"
                )
            time.sleep(0.1)

    def _track(self):
        """Stops the pool when this object goes or the interpreter exits,
        unless detached."""
        if self._finalizer is not None:
            self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _stop, self._running)
        if self._detach:
            self._finalizer.detach()

    @property
    def schedd(self):
        """The pool's schedd."""
        from . import Schedd

        return Schedd(config=self._ready_config())

    @property
    def collector(self):
        """The pool's collector."""
        from . import Collector

        return Collector(config=self._ready_config())

    def _ready_config(self):
        if self.config is None:
            raise HTCondorException(f"{self!r} has not been started: call start() (or use it in a with block)")
        return self.config

    def use_config(self):
        """Points ``ANDES_CONFIG`` (and so every ``Schedd()`` and ``andes``
        command of this process and its children) at this pool."""
        os.environ["ANDES_CONFIG"] = self._ready_config()
        return self

    def get_config_val(self, macro, default=None):
        """The value of the knob ``macro`` in the pool's configuration,
        expanded as ``andes config-val`` prints it; ``default`` when it has
        none (a ``KeyError`` when ``default`` is ``None``), as htcondor2's."""
        if not isinstance(macro, str) or not macro:
            raise TypeError("macro must be a non-empty string")
        path = self.config or os.fspath(self.config_file)
        if not os.path.exists(path):
            raise HTCondorException(f"{self!r} has no configuration yet ({path}): start it first")
        value = _Config(path).get(macro)
        if not value:
            if default is not None:
                return default
            raise KeyError(macro)
        return value

    def stop(self, timeout=60):
        """Stops the pool (``STOPPED``; its jobs are vacated, as ``andes pool
        down`` does). As in htcondor2, a detached pool is not stopped: it
        runs on until an attached ``PersonalPool`` stops it."""
        if self._state not in (PersonalPoolState.STARTING, PersonalPoolState.READY):
            return self
        if self._detach:
            return self
        return self._halt(timeout)

    def _halt(self, timeout=60):
        self._state = PersonalPoolState.STOPPING
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        running, self._running = self._running, None
        try:
            if running is not None:
                running.stop(timeout)
        finally:
            self._tmp = None
            self._state = PersonalPoolState.STOPPED
        return self

    def detach(self):
        """Leaves the pool running when this object goes or the interpreter
        exits (and makes ``stop`` leave it too); ``PersonalPool.attach``
        finds it again. Returns ``self``."""
        self._detach = True
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        return self

    @classmethod
    def attach(cls, local_dir=None):
        """A ``PersonalPool`` for the pool already running in ``local_dir``
        (one started by a detached ``PersonalPool``, or by ``andes pool up
        --dir local_dir``), ``READY``. As in htcondor2, it is stopped like
        one started here (``stop``, the end of a ``with`` block, the
        interpreter's exit) unless detached. ``local_dir`` defaults to
        the directory of the ``andes.config`` that ``ANDES_CONFIG`` names."""
        if local_dir is None:
            config_dir = os.environ.get("ANDES_CONFIG")
            if not config_dir:
                raise HTCondorException("attach needs the pool's directory (local_dir), or ANDES_CONFIG naming its andes.config")
            local_dir = os.path.dirname(config_dir)
        pool = cls(local_dir=local_dir)
        path = os.fspath(pool.config_file)
        if not os.path.exists(path):
            raise HTCondorException(f"there is no personal pool in {pool.local_dir} (no {path})")
        from . import Schedd

        try:
            Schedd(config=path).query("false")
        except Exception as e:
            raise HTCondorException(f"there is no running personal pool in {pool.local_dir}: {e}") from None
        pid = None
        try:
            with open(os.path.join(pool.local_dir, _PID)) as f:
                pid = int(f.read().strip())
            if not _pid_alive(pid):
                pid = None
        except (OSError, ValueError):
            pass
        pool.config = path
        pool._running = _Running(_andes_bin(), path, pid=pid, collector=_Config(path).get("COLLECTOR_HOST"))
        pool._track()
        pool._state = PersonalPoolState.READY
        return pool

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False


def _relative(path, to):
    try:
        return path.relative_to(to)
    except ValueError:
        return path


def _extra_config(config, raw_config):
    """The text ``config`` (knob names to values) and ``raw_config`` add."""
    lines = []
    for k, v in dict(config or {}).items():
        if not isinstance(k, str) or not _KNOB.fullmatch(k):
            raise ValueError(f"config: {k!r} is not a knob name (letters, digits, _ and .)")
        v = "" if v is None else str(v)
        if "\n" in v:
            raise ValueError(f"config: the value of {k} holds a newline")
        lines.append(f"{k} = {v}")
    text = "\n".join(lines) + ("\n" if lines else "")
    if raw_config:
        if not isinstance(raw_config, str):
            raise TypeError("raw_config must be a string of configuration text")
        text += raw_config if raw_config.endswith("\n") else raw_config + "\n"
    return text
