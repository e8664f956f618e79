"""A built andes wheel, used as a new user would after ``pip install``.

Run by ``cargo xtask wheels`` with the interpreter of the wheel's platform
(under qemu-user for aarch64), the wheel installed where that interpreter finds
it and nowhere else::

    python wheel_smoke.py ANDES_PROGRAM SAMPLES_DIR WORK_DIR

It starts a personal pool from Python (``andes pool up``, the program named),
submits two jobs of the sample ``primes.wasm`` that write files, follows their
event log to their ends, and checks their history and their outputs. It prints
one line naming the machine and the wheel's native module, and exits non-zero
with what failed.
"""

import os
import pathlib
import platform
import shutil
import sys


def main(andes_program: str, samples: str, work: str) -> None:
    os.environ["ANDES_BIN"] = andes_program
    here = pathlib.Path(__file__).resolve().parents[1]
    import andes
    import andes._andes as native
    from andes.personal import PersonalPool

    # The native module must be the wheel's, not something the checkout left.
    native_file = pathlib.Path(native.__file__).resolve()
    if here in native_file.parents:
        sys.exit(f"andes was imported from the checkout ({native_file}), not from the wheel")
    work_dir = pathlib.Path(work)
    work_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(pathlib.Path(samples) / "primes.wasm", work_dir / "primes.wasm")
    os.chdir(work_dir)
    with PersonalPool(local_dir=work_dir / "pool", slots=2, ready_timeout=300) as pool:
        sub = andes.Submit(
            {
                "executable": "primes.wasm",
                "arguments": "1000 $(Process)",
                "output": "out.$(Process)",
                "log": "jobs.log",
            }
        )
        result = pool.schedd.submit(sub, count=2)
        ended = []
        for event in andes.JobEventLog("jobs.log").events(stop_after=300):
            if event.type == andes.JobEventType.JOB_TERMINATED:
                ended.append(event)
                if len(ended) == 2:
                    break
        if len(ended) != 2:
            sys.exit(f"only {len(ended)} of 2 jobs ended within 300 s")
        done = pool.schedd.history(f"ClusterId == {result.cluster()}", ["ProcId", "ExitCode"])
        codes = sorted((int(a["ProcId"]), int(a["ExitCode"])) for a in done)
        if codes != [(0, 0), (1, 0)]:
            sys.exit(f"history of cluster {result.cluster()}: (proc, exit code) {codes}")
        for proc in range(2):
            if not (work_dir / f"out.{proc}").read_text().strip():
                sys.exit(f"out.{proc} is empty")
    print(
        f"wheel ok on {platform.machine()} (Python {platform.python_version()}): "
        f"{native_file.name}, 2 jobs of cluster {result.cluster()} ran and returned their files"
    )


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: wheel_smoke.py ANDES_PROGRAM SAMPLES_DIR WORK_DIR")
    main(*sys.argv[1:])
