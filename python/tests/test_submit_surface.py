"""Submit.expand, itemdata, jobs, procs and getQArgs round trips, checked
against htcondor2 and against what a real pool queues."""


import pathlib
from typing import Iterator, Optional

import pytest

import andes
from andes.personal import PersonalPool
from needs import needed

TEXT = """executable = primes.wasm
arguments = $(x) $(y)
foo = bar_$(foo2)
foo2 = 7
mem = $INT(half) $(unset:dflt)
half = 32*2
log = surface.log
"""


def test_expand_gives_a_value_with_its_macros_expanded(jobdir: pathlib.Path) -> None:
    sub = andes.Submit(TEXT, queue="x,y from (\n1, a\n2, b\n)")
    assert sub.expand("foo") == "bar_7"
    assert sub.expand("FOO") == "bar_7"
    assert sub.expand("mem") == "64 dflt"
    # As for the first job, before its items are set.
    assert sub.expand("arguments") == " "
    assert (sub.expand("Process"), sub.expand("cluster")) == ("0", "1")
    with pytest.raises(KeyError):
        sub.expand("nonesuch")
    with pytest.raises(TypeError):
        sub.expand(3)  # type: ignore[arg-type]
    with pytest.raises(andes.HTCondorException, match="INT.nope.*not evaluate"):
        andes.Submit({"executable": "primes.wasm", "mem": "$INT(nope)"}).expand("mem")

    htcondor2 = needed("htcondor2", "htcondor")
    theirs = htcondor2.Submit(TEXT, queue="x,y from (\n1, a\n2, b\n)")
    for name in ("foo", "FOO", "mem", "arguments", "Process", "cluster", "executable"):
        assert sub.expand(name) == theirs.expand(name), name
    with pytest.raises(KeyError):
        theirs.expand("nonesuch")


QUEUES = [
    "x,y from (\n1, a\n2, b\n)",
    "item in (a b c)",
    "in (p q)",
    "2 z matching files (*.wasm)",
    "f from items.txt",
    "y, z from (\n1 2\n3 4\n)",
    "w in (\nm\nn\n)",
    "3",
    "",
]


def items_of(items: Optional[Iterator[dict[str, str]]]) -> Optional[list[dict[str, str]]]:
    """``itemdata()``'s items as a list (``None``: it has none)."""
    return None if items is None else list(items)


def test_itemdata_and_get_qargs_round_trip(jobdir: pathlib.Path) -> None:
    (jobdir / "items.txt").write_text("one\ntwo\n")
    for q in QUEUES:
        sub = andes.Submit(TEXT, queue=q)
        again = andes.Submit(str(sub))
        assert again.getQArgs() == sub.getQArgs() == q, q
        assert items_of(sub.itemdata()) == items_of(again.itemdata()), q
    sub = andes.Submit(TEXT, queue="x,y from (\n1, a\n2, b\n)")
    assert items_of(sub.itemdata()) == [{"x": "1", "y": "a"}, {"x": "2", "y": "b"}]
    assert items_of(sub.itemdata("queue f from items.txt")) == [{"f": "one"}, {"f": "two"}]
    assert items_of(sub.itemdata("z matching files *.wasm")) == [{"z": "hello.wasm"}, {"z": "primes.wasm"}]
    assert sub.itemdata("4") is None
    assert andes.Submit(TEXT).itemdata() is None
    with pytest.raises(andes.HTCondorException, match="missing.txt"):
        sub.itemdata("f from missing.txt")

    htcondor2 = needed("htcondor2", "htcondor")
    for q in QUEUES:
        ours = andes.Submit(TEXT, queue=q).itemdata()
        theirs = htcondor2.Submit(TEXT, queue=q).itemdata()
        assert (None if ours is None else list(ours)) == (None if theirs is None else list(theirs)), q
        if "(\n" not in q:  # htcondor2 cuts inline rows off its getQArgs
            assert andes.Submit(str(htcondor2.Submit(TEXT, queue=q))).getQArgs() == q


def test_jobs_and_procs_are_what_the_pool_queues(pool: PersonalPool, jobdir: pathlib.Path) -> None:
    sub = andes.Submit(TEXT, queue="x,y from (\n1, a\n2, b\n)")
    jobs = list(sub.jobs(clusterid=7, qdate=1_700_000_000, owner="someone"))
    assert [(j["ClusterId"], j["ProcId"], j["Args"]) for j in jobs] == [(7, 0, "1 a"), (7, 1, "2 b")]
    assert all(j["QDate"] == 1_700_000_000 and j["Owner"] == "someone" for j in jobs)
    procs = list(sub.procs(clusterid=7))
    assert [dict(p) for p in procs] == [{"ProcId": 0, "Args": "1 a"}, {"ProcId": 1, "Args": "2 b"}]
    assert len(list(andes.Submit(executable="primes.wasm").jobs(count=3))) == 3
    # itemdata from itemdata(), back through Schedd.submit: the pool queues what jobs() said
    # (held, so that none has run and left the queue before it is read).
    result = pool.schedd.submit(andes.Submit(TEXT + "hold = true\n"), itemdata=sub.itemdata())
    queued = sorted(pool.schedd.query(f"ClusterId == {result.cluster()}", ["ProcId", "Args", "Cmd"]), key=lambda a: a["ProcId"])
    items = sub.itemdata()
    assert items is not None
    simulated = list(andes.Submit(TEXT).jobs(itemdata=list(items), clusterid=result.cluster()))
    assert [(a["ProcId"], a["Args"], a["Cmd"]) for a in queued] == [(a["ProcId"], a["Args"], a["Cmd"]) for a in simulated]
    pool.schedd.act(andes.JobAction.Remove, f"ClusterId == {result.cluster()}")

    with pytest.raises(ValueError, match="procid must be 0"):
        list(sub.jobs(procid=3))
    with pytest.raises(TypeError, match="count"):
        sub.jobs(count="2")  # type: ignore[arg-type]
    with pytest.raises(andes.HTCondorException, match="nowhere.wasm"):
        andes.Submit(executable="nowhere.wasm").jobs()

    htcondor2 = needed("htcondor2", "htcondor")
    with pytest.raises(NotImplementedError):
        htcondor2.Submit(TEXT).jobs()


def test_eval_and_string_in_a_description_reach_the_queued_jobs(pool: PersonalPool, jobdir: pathlib.Path) -> None:
    # Held, so that they are still queued when asked for (a job this short
    # may otherwise run and leave the queue before the query).
    text = """executable = primes.wasm
n = 6
answer = $EVAL($(n) * 7)
arguments = $(answer) $STRING(Name,<%s>)
+Tagged = $EVAL($(ProcId) + 10)
hold = true
"""
    sub = andes.Submit(text, queue="Name in (alpha, beta)")
    # Evaluated as the job is made (htcondor2's expand leaves it for queue time).
    assert sub.expand("answer") == "42"
    result = pool.schedd.submit(sub)
    queued = sorted(pool.schedd.query(f"ClusterId == {result.cluster()}", ["ProcId", "Args", "Tagged"]), key=lambda a: a["ProcId"])
    assert [(a["Args"], a["Tagged"]) for a in queued] == [("42 <alpha>", 10), ("42 <beta>", 11)]
    pool.schedd.act(andes.JobAction.Remove, f"ClusterId == {result.cluster()}")
    # An expression that does not evaluate is refused, naming it, before anything is queued.
    with pytest.raises(andes.HTCondorException, match="EVAL"):
        pool.schedd.submit(andes.Submit({"executable": "primes.wasm", "arguments": "$EVAL(1 +)"}))

