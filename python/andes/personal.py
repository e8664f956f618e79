"""A personal pool run from Python, as ``htcondor.personal.PersonalPool`` does.

::

    from andes.personal import PersonalPool

    with PersonalPool(local_dir="my-pool", slots=2) as pool:
        result = pool.schedd.submit(sub, count=4)

It runs ``andes pool up`` (the central manager, a schedd and an execute host in
one process) and stops it with ``andes pool down``. The ``andes`` program is
``ANDES_BIN`` when set, else ``andes`` on ``PATH``.
"""

import os
import shutil
import subprocess
import tempfile
import threading
import time

from ._andes import HTCondorException

__all__ = ["PersonalPool"]


def _andes_bin():
    exe = os.environ.get("ANDES_BIN") or shutil.which("andes")
    if not exe:
        raise HTCondorException(
            "the andes program is not on PATH (install it with `cargo install --path .` "
            "from the andes checkout, or set ANDES_BIN)"
        )
    return exe


class PersonalPool:
    """A pool of one machine: its directory holds the configuration, keys,
    queue and sandboxes. ``slots``: execute slots (default: one per CPU)."""

    def __init__(self, local_dir=None, slots=None, plaintext=False, ready_timeout=120):
        self._tmp = None
        if local_dir is None:
            self._tmp = tempfile.mkdtemp(prefix="andes-pool-")
            local_dir = self._tmp
        self.local_dir = os.path.abspath(os.fspath(local_dir))
        self.slots = slots
        self.plaintext = plaintext
        self.ready_timeout = ready_timeout
        self._proc = None
        self._lines = []
        self.config = None

    def start(self):
        """Starts the pool and waits until it is ready."""
        if self._proc is not None:
            return self
        os.makedirs(self.local_dir, exist_ok=True)
        cmd = [_andes_bin(), "pool", "up", "--dir", self.local_dir]
        if self.slots is not None:
            cmd += ["--slots", str(self.slots)]
        if self.plaintext:
            cmd.append("--plaintext")
        self._log = open(os.path.join(self.local_dir, "pool-up.out"), "w")
        self._proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=self._log, text=True, start_new_session=True
        )
        ready = threading.Event()

        def read():
            for line in self._proc.stdout:
                self._lines.append(line.rstrip("\n"))
                if line.startswith("export ANDES_CONFIG="):
                    self.config = line.split("=", 1)[1].strip()
                if line.strip() == "pool ready":
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + self.ready_timeout
        while not ready.wait(0.1):
            if time.monotonic() > deadline:
                self.stop()
                raise HTCondorException(f"the personal pool in {self.local_dir} did not start in {self.ready_timeout} s")
        if self.config is None or self._proc.poll() is not None:
            self._log.flush()
            with open(os.path.join(self.local_dir, "pool-up.out")) as f:
                why = f.read().strip().splitlines()[-5:]
            self.stop()
            raise HTCondorException("the personal pool did not start: " + " | ".join(why))
        return self

    @property
    def schedd(self):
        """The pool's schedd."""
        from . import Schedd

        return Schedd(config=self.config)

    @property
    def collector(self):
        """The pool's collector."""
        from . import Collector

        return Collector(config=self.config)

    def use_config(self):
        """Points ``ANDES_CONFIG`` (and so every ``Schedd()`` and ``andes``
        command of this process and its children) at this pool."""
        os.environ["ANDES_CONFIG"] = self.config
        return self

    def stop(self, timeout=60):
        """Stops the pool (its jobs are vacated, as ``andes pool down`` does)."""
        if self._proc is None:
            return
        if self._proc.poll() is None and self.config:
            env = dict(os.environ, ANDES_CONFIG=self.config)
            subprocess.run([_andes_bin(), "pool", "down"], env=env, capture_output=True, timeout=timeout)
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._proc = None
        self._log.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
        return False
