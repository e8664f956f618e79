#!/usr/bin/env python3
"""Full-size correctness run of transparent checkpoints on the real programs.

For each program that build.sh made (at its full benchmark input): compile it
with `andes compile`, run it with a snapshot every EVERY, SIGKILL it once it
has taken at least three, restore the middle snapshot in a fresh process with
an empty sandbox, and check that the two runs together give the native
build's output byte for byte: the restored run's standard output must be
what the native build prints from some point on, and everything the native
build prints before that point must be what the first run had printed
(`andes run` passes standard output through, so the snapshot cannot say
how much of it was written). The native output is checked against its
sha256 in expected/ first. A restored run that differs fails loudly.

    bench/realprograms/killrestore.py [PROGRAM...]

Environment: ANDES (default <repo>/target/release/andes), OUT (default
<repo>/target/realprograms), EVERY (default 500ms).
"""
import hashlib
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent.parent
OUT = pathlib.Path(os.environ.get("OUT", REPO / "target/realprograms"))
ANDES = os.environ.get("ANDES", str(REPO / "target/release/andes"))
EVERY = os.environ.get("EVERY", "500ms")


def snapshots(d):
    return sorted(p for p in d.glob("snapshot-*"))


def main():
    only = set(sys.argv[1:])
    manifest = OUT / "programs.tsv"
    if not manifest.exists():
        sys.exit("killrestore.py: run build.sh first")
    compiled = OUT / "killrestore/compiled"
    compiled.mkdir(parents=True, exist_ok=True)
    failures = []
    for line in manifest.read_text().splitlines():
        name, module, native, mem, stdin, args = line.split("\t")
        if only and name not in only:
            continue
        mod = compiled / module
        if not mod.exists():
            subprocess.run([ANDES, "compile", OUT / "wasm" / module, "-o", mod], check=True,
                           stdout=subprocess.DEVNULL)
        with tempfile.TemporaryDirectory(prefix="killrestore-") as tmp:
            tmp = pathlib.Path(tmp)
            ref = tmp / "native"
            shutil.copytree(OUT / "run" / name, ref)
            stdin_path = "/dev/null" if stdin == "-" else str(OUT / "run" / name / stdin)
            with open(stdin_path, "rb") as i:
                want = subprocess.run([OUT / "native" / native, *args.split()], cwd=ref,
                                      stdin=i, capture_output=True, check=True).stdout
            expected = (OUT / "expected" / f"{name}.sha256").read_text().strip()
            if hashlib.sha256(want).hexdigest() != expected:
                failures.append(f"{name}: the native build's output is not the recorded one")
                continue
            first, ckpt, fresh = tmp / "first", tmp / "ckpt", tmp / "fresh"
            shutil.copytree(OUT / "run" / name, first)
            fresh.mkdir()
            out1 = tmp / "out1"
            with open(stdin_path, "rb") as i, open(out1, "wb") as o:
                child = subprocess.Popen(
                    [ANDES, "run", "--memory", mem, "--dir", first, "--checkpoint-dir", ckpt,
                     "--checkpoint-every", EVERY, "--checkpoint-keep", "0", mod, *args.split()],
                    stdin=i, stdout=o, stderr=subprocess.DEVNULL)
                deadline = time.monotonic() + 600
                while len(snapshots(ckpt)) < 4 and child.poll() is None:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.05)
                if child.poll() is not None:
                    failures.append(f"{name}: ended before it was killed (make its run longer)")
                    continue
                child.send_signal(signal.SIGKILL)
                child.wait()
            taken = snapshots(ckpt)
            # The last one may be half written when the kill came: take the middle
            # of those before it.
            middle = taken[(len(taken) - 1) // 2]
            out2 = tmp / "out2"
            with open(stdin_path, "rb") as i, open(out2, "wb") as o:
                r = subprocess.run(
                    [ANDES, "run", "--memory", mem, "--dir", fresh, "--checkpoint-dir", ckpt,
                     "--restore", middle, mod, *args.split()],
                    stdin=i, stdout=o, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0 or "job exited normally with return value 0" not in r.stderr:
                failures.append(f"{name}: the restored run failed:\n{r.stderr[-2000:]}")
                continue
            first_out, rest = out1.read_bytes(), out2.read_bytes()
            cut = len(want) - len(rest)
            same = cut >= 0 and want[cut:] == rest and first_out[:cut] == want[:cut]
            status = "same as native" if same else "DIFFERENT"
            print(f"{name}: killed after {len(taken)} snapshots, restored from {middle.name}: "
                  f"{len(first_out)} bytes before the kill, {len(rest)} after the restore; "
                  f"output {status}", flush=True)
            if not same:
                failures.append(f"{name}: the restored run's output does not complete the first's "
                                f"into the native output")
    if failures:
        sys.exit("killrestore.py: FAILED\n" + "\n".join(failures))
    print("killrestore.py: every restored run ended as the native build did")


if __name__ == "__main__":
    main()
