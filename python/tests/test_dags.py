"""``andes.dags`` (htcondor2.dags) and ``Submit.from_dag``: a DAG described in
Python, written, submitted and run by a real personal pool's schedd."""

import pathlib

import pytest

import andes
from andes import dags
from andes.personal import PersonalPool


def test_write_dag_writes_layers_vars_edges_and_scripts(tmp_path: pathlib.Path) -> None:
    dag = dags.DAG(dagman_config={"DAGMAN_MAX_JOBS_SUBMITTED": 2}, max_jobs_by_category={"big": 1})
    split = dag.layer(
        name="split",
        submit_description=andes.Submit(executable="primes.wasm", arguments="$(n)"),
        vars=[{"n": "10"}, {"n": "20"}],
        retries=2,
        post=dags.Script("check.sh", arguments=["$JOB", "$RETURN"], retry=True, retry_status=5, retry_delay=3),
        category="big",
    )
    join = split.child_layer(
        name="join",
        submit_description=andes.Submit(executable="hello.wasm"),
        vars=[{"tag": 'say "hi"'}, {"tag": "b"}],
        edge=dags.OneToOne(),
        abort=dags.DAGAbortCondition(3, 7),
    )
    dag.final(name="last", submit_description=andes.Submit(executable="hello.wasm"))
    assert [n.name for n in split.children] == ["join"] and len(join) == 2
    assert set(n.name for n in dag.walk()) == {"split", "join"}
    assert "split" in dag.describe() and "NodeLayer" in dag.describe()
    path = dags.write_dag(dag, tmp_path / "d")
    text = path.read_text()
    assert path.name == "dagfile.dag"
    for line in [
        "CONFIG dagman.config",
        "MAXJOBS big 1",
        "JOB split:0 split.sub",
        'VARS split:1 n="20"',
        "RETRY split:0 2",
        "SCRIPT DEFER 5 3 POST split:1 check.sh $JOB $RETURN",
        "CATEGORY split:0 big",
        'VARS join:0 tag="say \\"hi\\""',
        "ABORT-DAG-ON join:1 3 RETURN 7",
        "FINAL last last.sub",
        "PARENT split:0 CHILD join:0",
        "PARENT split:1 CHILD join:1",
    ]:
        assert line in text.splitlines(), f"{line!r} not in\n{text}"
    assert (tmp_path / "d/split.sub").read_text().startswith("executable = primes.wasm")
    assert "DAGMAN_MAX_JOBS_SUBMITTED = 2" in (tmp_path / "d/dagman.config").read_text()


def test_bad_dags_are_refused_in_python(tmp_path: pathlib.Path) -> None:
    dag = dags.DAG()
    a = dag.layer(name="a", submit_description=andes.Submit(executable="x.wasm"), vars=[{}, {}])
    b = dag.layer(name="b", submit_description=andes.Submit(executable="x.wasm"))
    with pytest.raises(ValueError):
        dag.layer(name="a")
    with pytest.raises(ValueError):
        dag.layer(name="has space")
    a.add_children(b, edge=dags.OneToOne())
    with pytest.raises(ValueError):
        dags.write_dag(dag, tmp_path / "d")
    with pytest.raises(andes.HTCondorException):
        andes.Submit.from_dag(str(tmp_path / "nowhere.dag"))


def test_a_dag_holds_its_nodes_and_nothing_else() -> None:
    dag = dags.DAG()
    a = dag.layer(name="a")
    other = dags.DAG().layer(name="a")
    assert a in dag and a in dag.nodes
    assert other not in dag, "a node of another DAG with the same name"
    for thing in (None, "a", 1, object()):
        assert thing not in dag and thing not in dag.nodes, thing


def test_a_dag_from_python_runs_in_the_pool(
    pool: PersonalPool, jobdir: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dag_dir = jobdir / "counting-dag"
    dag = dags.DAG()
    counts = dag.layer(
        name="count",
        submit_description=andes.Submit(
            executable=str(jobdir / "primes.wasm"), arguments="$(n)", output="count_$(n).out"
        ),
        vars=[{"n": "100"}, {"n": "1000"}],
    )
    counts.child_layer(
        name="gather",
        submit_description=andes.Submit(executable=str(jobdir / "hello.wasm"), output="gather.out"),
    )
    dag_file = dags.write_dag(dag, dag_dir)
    # As HTCondor's DAG tutorial does: submit from the DAG's directory.
    monkeypatch.chdir(dag_dir)
    dag_submit = andes.Submit.from_dag(str(dag_file), {"force": 1})
    assert dag_submit["universe"] == "scheduler"
    cluster = pool.schedd.submit(dag_submit).cluster()
    for e in andes.JobEventLog("dagfile.dag.dagman.log").events(stop_after=120):
        if e.type == andes.JobEventType.JOB_TERMINATED:
            assert e.cluster == cluster and e["ReturnValue"] == 0
            break
    else:
        raise AssertionError("the DAGMan job did not end in 120 s")
    nodes = pool.schedd.history(f"DAGManJobId == {cluster}", ["DAGNodeName", "ExitCode"])
    assert sorted(a["DAGNodeName"] for a in nodes) == ["count:0", "count:1", "gather:0"]
    assert all(a["ExitCode"] == 0 for a in nodes)
    assert "primes below 1000: 168" in (dag_dir / "count_1000.out").read_text()
    assert (dag_dir / "dagfile.dag.dagman.out").exists()
