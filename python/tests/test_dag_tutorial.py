"""HTCondor's DAG tutorial runs on andes with its imports changed.

The cells below are the code cells of HTCondor's notebook
``docs/apis/python-bindings/tutorials/DAG-Creation-And-Submission.ipynb``
(github.com/htcondor/htcondor, Apache License 2.0), copied here in order
because CI cannot reach GitHub. They run as the notebook runs them: one
namespace, cell after cell, ``!`` lines through the shell. What differs is
marked ``# andes:`` in the cells, and is only this:

- ``import htcondor2 as htcondor`` and ``from htcondor2 import dags`` import
  andes's (``import andes as htcondor``, ``from andes import dags``);
- the tutorial's programs are Wasm stand-ins (``samples/mandelbrot``):
  ``goatbrot`` draws its tiles as PPMs from goatbrot's own options, and
  ``montage`` lays them side by side into a PNG as ImageMagick's ``montage
  -mode Concatenate`` does; the stand-in ``goatbrot`` sits in the working
  directory, where the tutorial copies it from, and ``montage`` is named by its
  absolute path (``MONTAGE``, which the test sets), as the tutorial names
  ``/usr/bin/montage``;
- its two shell commands run on andes: ``./goatbrot ...`` becomes ``andes run
  goatbrot ...`` and ImageMagick's ``convert test.ppm test.png`` becomes the
  stand-in's ``montage test.ppm -mode Concatenate -tile 1x1 test.png``.

The notebook's display (``IPython.display.Image``, ``graphviz.Digraph``) is
replaced by small recorders, as there is no notebook to show them in.
"""

import os
import pathlib
import shlex
import shutil
import signal
import subprocess
import sys
import types
from typing import Any, NoReturn, Optional

import pytest
from images import read_png, read_ppm, tile_of

import andes
from andes.personal import PersonalPool

# The tutorial's code cells, in order (markdown cells left out).
CELLS = [
    # [3]
    """\
! andes run goatbrot -i 10 -c 0,0 -w 3 -s 500,500 -o test.ppm  # andes: was ./goatbrot
! andes run montage test.ppm -mode Concatenate -tile 1x1 test.png  # andes: was convert test.ppm test.png
""",
    # [5]
    """\
from IPython.display import Image

Image('test.png')
""",
    # [8]
    """\
from graphviz import Digraph
import itertools

num_tiles_per_side = 2

dot = Digraph()

dot.node('montage')
for x, y in itertools.product(range(num_tiles_per_side), repeat = 2):
    n = f'tile_{x}-{y}'
    dot.node(n)
    dot.edge(n, 'montage')

dot
""",
    # [11]
    """\
import andes as htcondor  # andes: was import htcondor2 as htcondor

tile_description = htcondor.Submit(
    executable = 'goatbrot',  # the program we want to run
    arguments = '-i 10000 -c $(x),$(y) -w $(w) -s 500,500 -o tile_$(tile_x)-$(tile_y).ppm',  # the arguments to pass to the executable
    log = 'mandelbrot.log',  # the HTCondor job event log
    output = 'goatbrot.out.$(tile_x)_$(tile_y)',  # stdout from the job goes here
    error = 'goatbrot.err.$(tile_x)_$(tile_y)',   # stderr from the job goes here
    request_cpus = '1',        # resource requests; we don't need much per job for this problem
    request_memory = '128MB',
    request_disk = '1GB',
)

print(tile_description)
""",
    # [13]
    """\
def make_tile_vars(num_tiles_per_side, width = 3):
    width_per_tile = width / num_tiles_per_side
    
    centers = [
        width_per_tile * (n + 0.5 - (num_tiles_per_side / 2)) 
        for n in range(num_tiles_per_side)
    ]
    
    vars = []
    for (tile_y, y), (tile_x, x) in itertools.product(enumerate(centers), repeat = 2):
        var = dict(
            w = width_per_tile,
            x = x,
            y = -y,  # image coordinates vs. Cartesian coordinates
            tile_x = str(tile_x).rjust(5, '0'),
            tile_y = str(tile_y).rjust(5, '0'),
        )
        
        vars.append(var)
        
    return vars
""",
    # [14]
    """\
tile_vars = make_tile_vars(2)
for var in tile_vars:
    print(var)
""",
    # [16]
    """\
tile_vars = make_tile_vars(4)
for var in tile_vars:
    print(var)
""",
    # [18]
    """\
def make_montage_description(tile_vars):
    num_tiles_per_side = int(len(tile_vars) ** .5)
    
    input_files = [f'tile_{d["tile_x"]}-{d["tile_y"]}.ppm' for d in tile_vars]
    
    return htcondor.Submit(
        executable = MONTAGE,  # andes: was '/usr/bin/montage'
        arguments = f'{" ".join(input_files)} -mode Concatenate -tile {num_tiles_per_side}x{num_tiles_per_side} mandelbrot.png',
        transfer_input_files = ', '.join(input_files),
        log = 'mandelbrot.log',
        output = 'montage.out',
        error = 'montage.err',
        request_cpus = '1',
        request_memory = '128MB',
        request_disk = '1GB',
    )
""",
    # [19]
    """\
montage_description = make_montage_description(make_tile_vars(2))

print(montage_description)
""",
    # [21]
    """\
from andes import dags  # andes: was from htcondor2 import dags

num_tiles_per_side = 2

# create the tile vars early, since we need to pass them to multiple places later
tile_vars = make_tile_vars(num_tiles_per_side)

dag = dags.DAG()

# create the tile layer, passing in the submit description for a tile job and the tile vars
tile_layer = dag.layer(
    name = 'tile',
    submit_description = tile_description,
    vars = tile_vars,
)

# create the montage "layer" (it only has one job in it, so no need for vars)
# note that the submit description is created "on the fly"!
montage_layer = tile_layer.child_layer(
    name = 'montage',
    submit_description = make_montage_description(tile_vars),
)
""",
    # [23]
    """\
print(dag.describe())
""",
    # [25]
    """\
from pathlib import Path
import shutil

dag_dir = (Path.cwd() / 'mandelbrot-dag').absolute()

# blow away any old files
shutil.rmtree(dag_dir, ignore_errors = True)

# make the magic happen!
dag_file = dags.write_dag(dag, dag_dir)

# the submit files are expecting goatbrot to be next to them, so copy it into the dag directory
shutil.copy2('goatbrot', dag_dir)

print(f'DAG directory: {dag_dir}')
print(f'DAG description file: {dag_file}')
""",
    # [27]
    """\
dag_submit = htcondor.Submit.from_dag(str(dag_file), {'force': 1})

print(dag_submit)
""",
    # [29]
    """\
import os
os.chdir(dag_dir)

schedd = htcondor.Schedd()
cluster_id = schedd.submit(dag_submit).cluster()

print(f"DAGMan job cluster is {cluster_id}")

os.chdir('..')
""",
    # [31]
    """\
dag_job_log = f"{dag_file}.dagman.log"
print(f"DAG job log file is {dag_job_log}")
""",
    # [32]
    """\
# read events from the log, waiting forever for the next event
dagman_job_events = htcondor.JobEventLog(str(dag_job_log)).events(None)

# this event stream only contains the events for the DAGMan job itself, not the jobs it submits
for event in dagman_job_events:
    print(event)
    
    # stop waiting when we see the terminate event
    if event.type is htcondor.JobEventType.JOB_TERMINATED and event.cluster == cluster_id:
        break
""",
    # [34]
    """\
Image(dag_dir / "mandelbrot.png")
""",
]

ROOT = pathlib.Path(__file__).resolve().parents[2]

# How long the whole notebook may take: cell [32] waits for ever.
TIMEOUT = 300


class _Image:
    """IPython.display.Image, for a test: it records what the notebook shows."""

    shown: list[object] = []

    def __init__(self, filename: object) -> None:
        _Image.shown.append(filename)


class _Digraph:
    """graphviz.Digraph, for a test: it records the graph the notebook draws."""

    def __init__(self) -> None:
        self.nodes: list[str] = []
        self.edges: list[tuple[str, str]] = []

    def node(self, name: str) -> None:
        self.nodes.append(name)

    def edge(self, a: str, b: str) -> None:
        self.edges.append((a, b))


def _shell(command: str, andes_bin: str) -> None:
    """A notebook's ``!`` line; ``andes`` is the andes under test."""
    argv = shlex.split(command, comments=True)
    if argv[0] == "andes":
        argv[0] = andes_bin
    subprocess.run(argv, check=True, timeout=60)


def _alarm(signum: int, frame: Optional[types.FrameType]) -> NoReturn:
    raise TimeoutError(f"the tutorial did not finish in {TIMEOUT} s")


def test_htcondors_dag_tutorial_runs_with_its_imports_changed(
    pool: PersonalPool, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, andes_bin: str
) -> None:
    wasm = pathlib.Path(os.environ.get("ANDES_SAMPLES", ROOT / "samples/target/wasm32-wasip1/release"))
    if not (wasm / "goatbrot.wasm").exists():
        pytest.fail(f"the stand-ins of the tutorial's programs are not built in {wasm}: run `cargo xtask samples`")
    # The tutorial's working directory: goatbrot beside it, where cell [25]
    # copies it from (and cell [3] runs it); montage where cell [18] names it.
    shutil.copy(wasm / "goatbrot.wasm", tmp_path / "goatbrot")
    shutil.copy(wasm / "montage.wasm", tmp_path / "montage")
    monkeypatch.chdir(tmp_path)
    assert pool.config is not None
    monkeypatch.setenv("ANDES_CONFIG", pool.config)
    display = types.ModuleType("IPython.display")
    setattr(display, "Image", _Image)
    graphviz = types.ModuleType("graphviz")
    setattr(graphviz, "Digraph", _Digraph)
    monkeypatch.setitem(sys.modules, "IPython", types.ModuleType("IPython"))
    monkeypatch.setitem(sys.modules, "IPython.display", display)
    monkeypatch.setitem(sys.modules, "graphviz", graphviz)
    _Image.shown.clear()

    notebook: dict[str, Any] = {"__name__": "__main__", "MONTAGE": str(tmp_path / "montage")}
    notebook["_shell"] = lambda command: _shell(command, andes_bin)
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIMEOUT)
    try:
        for n, cell in enumerate(CELLS):
            # As IPython does, a line beginning with ! goes to the shell.
            lines = [f"_shell({line[1:].strip()!r})" if line.startswith("!") else line for line in cell.splitlines()]
            exec(compile("\n".join(lines), f"<tutorial cell {n}>", "exec"), notebook)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)

    # Cell [3]: the stand-ins ran locally, and "convert" made the PPM a PNG.
    w, h, ppm = read_ppm(tmp_path / "test.ppm")
    assert (w, h) == (500, 500)
    assert read_png(tmp_path / "test.png") == (w, h, ppm)
    # The graph of cell [8], and what the notebook showed.
    assert sorted(notebook["dot"].edges) == [(f"tile_{x}-{y}", "montage") for x in range(2) for y in range(2)]
    dag_dir = notebook["dag_dir"]
    assert _Image.shown == ["test.png", dag_dir / "mandelbrot.png"]

    # The DAGMan job ended well, and so did each node's job.
    cluster = notebook["cluster_id"]
    events = list(andes.JobEventLog(f"{notebook['dag_file']}.dagman.log").events(stop_after=0))
    (end,) = [e for e in events if e.type == andes.JobEventType.JOB_TERMINATED]
    assert end.cluster == cluster and end["ReturnValue"] == 0
    nodes = pool.schedd.history(f"DAGManJobId == {cluster}", ["DAGNodeName", "ExitCode"])
    assert sorted(a["DAGNodeName"] for a in nodes) == ["montage:0"] + [f"tile:{i}" for i in range(4)]
    assert all(a["ExitCode"] == 0 for a in nodes)
    assert "exiting with status 0" in (dag_dir / "dagfile.dag.dagman.out").read_text()

    # The tiles came back from their jobs, and the montage is made of them:
    # tile_X-Y at column X, row Y of a 2x2 grid.
    w, h, image = read_png(dag_dir / "mandelbrot.png")
    assert (w, h) == (1000, 1000)
    tiles = {}
    for x in range(2):
        for y in range(2):
            name = f"tile_0000{x}-0000{y}"
            tw, th, tiles[x, y] = read_ppm(dag_dir / f"{name}.ppm")
            assert (tw, th) == (500, 500)
            assert tile_of(image, w, x, y, 500, 500) == tiles[x, y], f"{name} is not where montage puts it"
            assert "500x500 pixels" in (dag_dir / f"goatbrot.out.0000{x}_0000{y}").read_text()
    assert len(set(tiles.values())) == 4
    # The Mandelbrot set, seen from -1.5-1.5i to 1.5+1.5i: -0.5 is in it
    # (black), the corners are not.
    def pixel(x: int, y: int) -> bytes:
        return image[(y * w + x) * 3 : (y * w + x) * 3 + 3]

    assert pixel(333, 500) == b"\0\0\0"
    assert all(pixel(x, y) != b"\0\0\0" for x in (0, 999) for y in (0, 999))
    assert "montage: 4 images, 2x2, 1000x1000 pixels" in (dag_dir / "montage.out").read_text()
