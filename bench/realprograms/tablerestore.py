#!/usr/bin/env python3
"""The Lua table job (lua/table.lua) killed and resumed, end to end, on chains of
incremental snapshots.

The job builds a table of MIB MiB, then changes PCT % of its 64 KiB pages a
round for ROUNDS rounds and prints the table's sum. Compiled by `andes compile`,
it runs under `andes run` with a snapshot every EVERY into one checkpoint
directory (keeping the default 10, so older snapshots and the packs only they
name are pruned as it goes). Each run is killed with SIGKILL at a random moment
once it has written enough snapshots (the first run at least 12: one full and
a chain of at least 10 after it), and the next run starts in a new, empty
sandbox with no --restore: it resumes from the newest snapshot the directory
holds, its memory from the packs of every snapshot before it that the chain
still needs. After KILLS kills the last run goes to the end; its output must
end with the line the native build prints for the same arguments, and the
first run must have printed the native build's first line.

Printed: each snapshot's own bytes (the file and the packs that no earlier
snapshot named), the later ones as a share of the first's, and every run's
end. Exits non-zero, saying why, on any difference.

    bench/realprograms/tablerestore.py [MIB PCT ROUNDS KILLS]   (default 256 1 20000 3)

Environment: ANDES (default <repo>/target/release/andes), OUT (default
<repo>/target/realprograms, made by build.sh), EVERY (default 500ms), SEED.
"""
import json
import os
import pathlib
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent.parent
OUT = pathlib.Path(os.environ.get("OUT", REPO / "target/realprograms"))
ANDES = os.environ.get("ANDES", str(REPO / "target/release/andes"))
EVERY = os.environ.get("EVERY", "500ms")
SCRIPT = HERE / "lua/table.lua"


def fail(why):
    sys.exit(f"tablerestore.py: FAILED: {why}")


def snapshots(d):
    return sorted(d.glob("snapshot-*"))


def header(path):
    """The snapshot's header, or None while it cannot be read (pruned)."""
    r = subprocess.run([ANDES, "snapshot", "inspect", "--json", path],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None
    return json.loads(r.stdout)


class Seen:
    """Every snapshot seen while the runs went on, and what each added."""

    def __init__(self):
        self.names = set()
        self.packs = set()
        self.added = []  # (name, bytes of its own, taken once the table was built)

    def look(self, ckpt, built_at):
        for p in snapshots(ckpt):
            if p.name in self.names:
                continue
            try:
                size = p.stat().st_size
            except FileNotFoundError:
                continue
            h = header(p)
            if h is None:
                continue
            self.names.add(p.name)
            own = size
            for pack in h["header"]["packs"]:
                if pack["blake3"] not in self.packs:
                    self.packs.add(pack["blake3"])
                    own += pack["size"]
            # Taken (its header's time) after the table was seen built.
            steady = built_at is not None and h["header"]["created_ms"] / 1000 > built_at
            self.added.append((p.name, own, steady))


def main():
    a = sys.argv[1:]
    mib, pct, rounds, kills = (int(x) for x in (a + ["256", "1", "20000", "3"][len(a):]))
    rng = random.Random(int(os.environ.get("SEED", time.time_ns())))
    lua, native = OUT / "wasm/lua.wasm", OUT / "native/lua"
    if not lua.exists() or not native.exists():
        fail(f"{lua} or {native} is missing: run bench/realprograms/build.sh first")
    compiled = OUT / "killrestore/compiled"
    compiled.mkdir(parents=True, exist_ok=True)
    mod = compiled / "lua.wasm"
    if not mod.exists():
        subprocess.run([ANDES, "compile", lua, "-o", mod], check=True, stdout=subprocess.DEVNULL)
    args = ["table.lua", str(mib), str(pct), "1", str(rounds)]
    memory = f"{mib + mib // 2 + 64}M"
    with tempfile.TemporaryDirectory(prefix="tablerestore-") as tmp:
        tmp = pathlib.Path(tmp)
        ref = tmp / "native"
        ref.mkdir()
        shutil.copy(SCRIPT, ref / "table.lua")
        t0 = time.monotonic()
        want = subprocess.run([native, *args], cwd=ref, capture_output=True, check=True).stdout
        print(f"native: {want.decode().strip()!r} in {time.monotonic() - t0:.1f} s", flush=True)
        want_lines = want.decode().splitlines()
        ckpt = tmp / "ckpt"
        seen = Seen()
        outs = []
        built_at = None  # when the first run was seen to have built its table
        for run in range(kills + 1):
            sandbox = tmp / f"sandbox-{run}"
            sandbox.mkdir()
            if run == 0:
                shutil.copy(SCRIPT, sandbox / "table.lua")
            if run == kills:
                # What pruning left, before the job's end removes it all.
                left = snapshots(ckpt)
                blobs = sum(p.stat().st_size for p in (ckpt / "blobs").iterdir())
            before = len(seen.added)
            out, err = tmp / f"out-{run}", tmp / f"err-{run}"
            with open(out, "wb") as o, open(err, "wb") as e:
                child = subprocess.Popen(
                    [ANDES, "run", "--memory", memory, "--dir", sandbox, "--checkpoint-dir", ckpt,
                     "--checkpoint-every", EVERY, mod, *args],
                    stdout=o, stderr=e)
                need = 12 if run == 0 else 3
                deadline = time.monotonic() + 900
                while child.poll() is None:
                    if built_at is None and b"built" in out.read_bytes():
                        built_at = time.time()
                    seen.look(ckpt, built_at) if ckpt.exists() else None
                    if run < kills and len(seen.added) - before >= need:
                        break
                    if time.monotonic() > deadline:
                        child.kill()
                        fail(f"run {run} wrote {len(seen.added) - before} snapshots in 900 s")
                    time.sleep(0.05)
                if run < kills:
                    if child.poll() is not None:
                        fail(f"run {run} ended before it was killed (give it more ROUNDS):\n"
                             f"{err.read_text()[-2000:]}")
                    # Somewhere in the next snapshot's taking or writing.
                    time.sleep(rng.uniform(0, 0.6))
                    child.send_signal(signal.SIGKILL)
                child.wait()
            seen.look(ckpt, built_at)
            stderr = err.read_text()
            resumed = [ln for ln in stderr.splitlines() if "resumes from its snapshot" in ln]
            if run > 0 and not resumed:
                fail(f"run {run} did not resume from a snapshot:\n{stderr[-2000:]}")
            outs.append(out.read_bytes())
            what = resumed[0].split("snapshot ")[1].split(" (")[0] if resumed else "the start"
            end = "killed" if run < kills else f"exit {child.returncode}"
            print(f"run {run}: from {pathlib.Path(what).name}, "
                  f"{len(seen.added) - before} snapshots seen, {end}", flush=True)
        if child.returncode != 0 or "job exited normally with return value 0" not in stderr:
            fail(f"the last run did not end normally:\n{stderr[-2000:]}")
        last = outs[-1].decode().splitlines()
        if not last or last[-1] != want_lines[-1]:
            fail(f"the last run ended with {last[-1:]!r}, the native build with "
                 f"{want_lines[-1:]!r}")
        if outs[0].decode().splitlines()[:1] != want_lines[:1]:
            fail(f"the first run printed {outs[0][:80]!r}, not {want_lines[0]!r}")
        print("bytes each snapshot added: " + ", ".join(f"{b:,}" for _, b, _ in seen.added))
        # Those taken while the table was being built add what was built since;
        # the whole image is what they and the first taken after it wrote
        # (a snapshot taken within a poll of the table's end counts as one of
        # them: the image the larger for it, never the later ones).
        steady = [i for i, (_, _, b) in enumerate(seen.added) if b]
        if len(steady) < 3:
            fail("fewer than three snapshots were taken once the table was built")
        image = sum(b for _, b, _ in seen.added[: steady[0] + 1])
        later = [seen.added[i][1] for i in steady[1:]]
        print(f"the image: {image:,} bytes (snapshots 1 to {steady[0] + 1}); the {len(later)} "
              f"after it: median {statistics.median(later):,.0f} "
              f"({statistics.median(later) / image:.2%} of the image), largest {max(later):,} "
              f"({max(later) / image:.2%})")
        print(f"in the checkpoint directory at the last resume: {len(left)} snapshots "
              f"({left[0].name} to {left[-1].name}), {blobs:,} bytes of packs and files")
        print(f"tablerestore.py: {kills} kills, the resumed job's output is the native build's "
              f"({want_lines[-1]})")


if __name__ == "__main__":
    main()
