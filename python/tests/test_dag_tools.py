"""DAG files written by PyPI's DAG tools run unchanged on andes.

ezdag and htcondor-dags write DAG and submit files with HTCondor's own Python
bindings (the ``htcondor`` wheel, whose module is ``htcondor2``): nothing of
andes is imported to write them. ``andes submit-dag`` then runs the files as
written against a personal pool. Each DAG fans out and back in, its data going
from node to node through files: the Wasm stand-ins of HTCondor's DAG tutorial
(``samples/mandelbrot``: ``goatbrot`` draws a PPM, ``montage`` lays PPMs side by
side into a PNG) and ``copyfile``.

The files are named without directories: ezdag writes
``preserve_relative_paths`` and ``transfer_output_remaps`` into its submit
files, which andes submit does not implement yet (it warns that they are
unused); with plain names they ask for nothing.

A tool missing fails its test (``cargo xtask python`` installs both): it
reports NOT RUN only under ``ANDES_ALLOW_NOT_RUN=1``.
"""

import os
import pathlib
import shutil
import subprocess
import sys
from typing import Union

import pytest
from images import read_png, read_ppm, tile_of
from needs import needed

from andes.personal import PersonalPool

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def wasm(tmp_path: pathlib.Path) -> tuple[pathlib.Path, dict[str, str]]:
    """The stand-ins, copied into the directory the DAG is written to."""
    samples = pathlib.Path(os.environ.get("ANDES_SAMPLES", ROOT / "samples/target/wasm32-wasip1/release"))
    dag_dir = tmp_path / "dag"
    dag_dir.mkdir()
    paths = {}
    for name in ("goatbrot", "copyfile", "montage"):
        if not (samples / f"{name}.wasm").exists():
            pytest.fail(f"the sample jobs are not built in {samples}: run `cargo xtask samples`")
        paths[name] = str(shutil.copy(samples / f"{name}.wasm", dag_dir / f"{name}.wasm"))
    return dag_dir, paths


def submit_dag(pool: PersonalPool, andes_bin: str, dag_file: pathlib.Path, timeout: int = 180) -> int:
    """``andes submit-dag`` of the DAG file as written, from its directory, and
    waits for its DAGMan job; returns the DAGMan job's cluster."""
    assert pool.config is not None
    env = dict(os.environ, ANDES_CONFIG=pool.config)
    cwd = dag_file.parent
    out = subprocess.run(
        [andes_bin, "submit-dag", dag_file.name], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stdout + out.stderr
    cluster = int(out.stdout.split("submitted to cluster ")[1].split(".")[0])
    log = f"{dag_file.name}.dagman.log"
    wait = subprocess.run(
        [andes_bin, "wait", "--wait", str(timeout), log],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout + 30,
    )
    progress = (cwd / f"{dag_file.name}.dagman.out").read_text()
    assert wait.returncode == 0, f"the DAGMan job did not end in {timeout} s:\n{progress}"
    assert "exiting with status 0" in progress, progress
    return cluster


def node_jobs(pool: PersonalPool, cluster: int) -> list[tuple[str, int]]:
    """The node jobs the DAGMan job ran, by node name, each with its exit code."""
    jobs = pool.schedd.history(f"DAGManJobId == {cluster}", ["DAGNodeName", "ExitCode"])
    return sorted((a["DAGNodeName"], a["ExitCode"]) for a in jobs)


def test_a_dag_written_by_ezdag_runs_unchanged(
    pool: PersonalPool, wasm: tuple[pathlib.Path, dict[str, str]], andes_bin: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    needed("ezdag", "ezdag")
    from ezdag import DAG, Argument, Layer, Node, Option

    dag_dir, exe = wasm
    monkeypatch.chdir(dag_dir)
    # One render, copied three times, the copies laid side by side: ezdag
    # finds the edges itself, from the files each node reads and writes.
    dag = DAG("poster")
    render = Layer(exe["goatbrot"], name="render")
    options: list[tuple[str, Union[int, str]]] = [("i", 200), ("c", "-0.5,0"), ("w", 3), ("s", "48,32")]
    render += Node(
        arguments=[Option(o, v, prefix="-") for o, v in options],
        outputs=Option("o", "full.ppm", prefix="-"),
    )
    dag.attach(render)
    copy = Layer(exe["copyfile"], name="copy")
    copies = [f"copy_{i}.ppm" for i in range(3)]
    for c in copies:
        copy += Node(inputs=Argument("image", "full.ppm"), outputs=Argument("copy", c))
    dag.attach(copy)
    poster = Layer(exe["montage"], name="poster")
    poster += Node(
        arguments=[Option("mode", "Concatenate", prefix="-"), Option("tile", "3x1", prefix="-")],
        inputs=Argument("tiles", copies),
        outputs=Argument("poster", "poster.png"),
    )
    dag.attach(poster)
    dag.write(dag_dir)
    dag_file = dag_dir / "poster.dag"
    text = dag_file.read_text()
    assert "PARENT render:00000 CHILD copy:00000" in text and "CHILD poster:00000" in text, text

    cluster = submit_dag(pool, andes_bin, dag_file)
    names = ["copy:00000", "copy:00001", "copy:00002", "poster:00000", "render:00000"]
    assert node_jobs(pool, cluster) == [(n, 0) for n in names]
    # Each node's data came through files: the render, its copies, the poster.
    w, h, full = read_ppm(dag_dir / "full.ppm")
    assert (w, h) == (48, 32) and full != bytes(len(full))
    assert all((dag_dir / c).read_bytes() == (dag_dir / "full.ppm").read_bytes() for c in copies)
    pw, ph, image = read_png(dag_dir / "poster.png")
    assert (pw, ph) == (3 * w, h)
    assert all(tile_of(image, pw, i, 0, w, h) == full for i in range(3))
    # ezdag's stdout files, in the log directory it made: the job's own words.
    (out,) = (dag_dir / "logs").glob("poster:00000-*.out")
    assert "montage: 3 images, 3x1" in out.read_text()


def test_a_dag_written_by_htcondor_dags_runs_unchanged(
    pool: PersonalPool, wasm: tuple[pathlib.Path, dict[str, str]], andes_bin: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    htcondor2 = needed("htcondor2", "htcondor")
    # htcondor-dags 0.2.0 does `import htcondor`, HTCondor's first bindings,
    # which the htcondor wheel no longer ships (its module is htcondor2);
    # of them it uses only `Submit`, which htcondor2 has, unchanged.
    monkeypatch.setitem(sys.modules, "htcondor", htcondor2)
    dags = needed("htcondor_dags", "htcondor-dags")

    dag_dir, exe = wasm
    # Two halves of a region drawn; two frames each join both halves (a
    # many-to-many edge: htcondor-dags puts a NOOP join node between the
    # layers); a poster stacks the frames.
    dag = dags.DAG()
    halves = dag.layer(
        name="half",
        submit_description=htcondor2.Submit(
            executable=exe["goatbrot"],
            arguments="-i 200 -c $(x),0 -w 1.5 -s 24,32 -o $(side).ppm",
            output="$(side).out",
            log="poster.log",
        ),
        vars=[{"side": "left", "x": "-1.25"}, {"side": "right", "x": "0.25"}],
    )
    frames = halves.child_layer(
        name="frame",
        submit_description=htcondor2.Submit(
            executable=exe["montage"],
            arguments="left.ppm right.ppm -mode Concatenate -tile 2x1 frame_$(n).ppm",
            transfer_input_files="left.ppm, right.ppm",
            output="frame_$(n).out",
            log="poster.log",
        ),
        vars=[{"n": "0"}, {"n": "1"}],
        edge=dags.ManyToMany(),
    )
    frames.child_layer(
        name="poster",
        submit_description=htcondor2.Submit(
            executable=exe["montage"],
            arguments="frame_0.ppm frame_1.ppm -mode Concatenate -tile 1x2 poster.png",
            transfer_input_files="frame_0.ppm, frame_1.ppm",
            output="poster.out",
            log="poster.log",
        ),
    )
    dag_file = dags.write_dag(dag, dag_dir)
    lines = dag_file.read_text().splitlines()
    assert "JOB __JOIN__:0 __JOIN__.sub NOOP" in lines and "PARENT __JOIN__:0 CHILD frame:0 frame:1" in lines
    # htcondor-dags writes each submit file as `str(submit) + "\nqueue"`, and
    # htcondor2's str already ends in `queue`: two queue statements, so each
    # node is a cluster of two jobs, as condor_submit would make it. The join
    # node (NOOP, its submit file empty) runs none.
    assert (dag_dir / "half.sub").read_text().count("queue") == 2

    cluster = submit_dag(pool, andes_bin, dag_file)
    names = ["frame:0", "frame:1", "half:0", "half:1", "poster:0"]
    assert node_jobs(pool, cluster) == [(n, 0) for n in names for _ in range(2)]
    w, h, left = read_ppm(dag_dir / "left.ppm")
    assert (w, h) == (24, 32)
    right = read_ppm(dag_dir / "right.ppm")[2]
    assert left != right
    for n in range(2):
        fw, fh, frame = read_ppm(dag_dir / f"frame_{n}.ppm")
        assert (fw, fh) == (48, 32)
        assert tile_of(frame, fw, 0, 0, w, h) == left and tile_of(frame, fw, 1, 0, w, h) == right
    pw, ph, image = read_png(dag_dir / "poster.png")
    assert (pw, ph) == (48, 64)
    assert image[: len(image) // 2] == image[len(image) // 2 :] == frame
    assert "montage: 2 images, 1x2, 48x64 pixels: wrote poster.png" in (dag_dir / "poster.out").read_text()
