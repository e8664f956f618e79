"""andes.classad against what classad2 users rely on."""

import json
from typing import Any

import pytest

from andes import classad


def test_parse_read_and_evaluate() -> None:
    ad = classad.ClassAd("[Cpus = 4; Memory = Cpus * 1024; L = {1, 2}; S = \"x\"]")
    assert ad["Cpus"] == 4
    assert isinstance(ad["Memory"], classad.ExprTree)
    assert str(ad["Memory"]) == "Cpus * 1024"
    assert ad.eval("Memory") == 4096
    assert ad["L"] == [1, 2]
    assert ad["s"] == "x", "attribute names are case-insensitive"
    assert "MEMORY" in ad and len(ad) == 4
    assert ad.get("Nope", 7) == 7
    with pytest.raises(KeyError):
        ad["Nope"]


def test_old_syntax_dicts_and_python_values() -> None:
    ad = classad.ClassAd("A = 1\nB = A + 1\n")
    assert ad.eval("B") == 2
    ad = classad.ClassAd({"Name": "slot1", "On": True, "Load": 0.5, "Tags": ["a", "b"], "U": None})
    assert ad["Name"] == "slot1" and ad["On"] is True and ad["Load"] == 0.5
    assert ad["Tags"] == ["a", "b"]
    assert ad["U"] is classad.Value.Undefined
    ad["Expr"] = classad.ExprTree("Load * 2")
    assert ad.eval("Expr") == 1.0
    del ad["Expr"]
    assert "Expr" not in ad
    assert sorted(ad.keys()) == ["Load", "Name", "On", "Tags", "U"]


def test_undefined_and_error_values() -> None:
    ad = classad.ClassAd("[A = 1]")
    assert classad.ExprTree("Missing").eval(ad) is classad.Value.Undefined
    assert classad.ExprTree("1/0").eval() is classad.Value.Error
    assert classad.ExprTree("A == 1").eval(ad) is True


def test_matching_and_targets() -> None:
    job = classad.ClassAd("[Requirements = TARGET.Memory >= 1024; RequestMemory = 1024]")
    slot = classad.ClassAd("[Memory = 2048; Requirements = TARGET.RequestMemory <= MY.Memory]")
    assert slot.matches(job)
    assert job.symmetricMatch(slot)
    small = classad.ClassAd("[Memory = 512; Requirements = true]")
    assert not small.matches(job)
    assert classad.ExprTree("TARGET.Memory").eval(job, slot) == 2048


def test_printing_round_trips() -> None:
    ad = classad.ClassAd("[A = 1; B = \"two\"; C = A + 1]")
    again = classad.ClassAd(ad.printOld())
    assert again == ad
    j = json.loads(ad.printJson())
    assert j["A"] == 1 and j["B"] == "two"
    assert classad.parseAds(ad.printOld() + "\n" + ad.printOld()) == [ad, ad]
    assert classad.parseOne("A = 1\n\nB = 2\n")["B"] == 2


def test_quote_and_unquote() -> None:
    s = 'a "quoted" \\ string'
    assert classad.unquote(classad.quote(s)) == s
    with pytest.raises(classad.ClassAdException):
        classad.unquote("not a literal")


def test_bad_text_is_an_exception_that_says_where() -> None:
    with pytest.raises(classad.ClassAdException, match="line 1, column 6"):
        classad.ClassAd("[a = ]")
    with pytest.raises(classad.ClassAdException):
        classad.ExprTree("1 +")
    with pytest.raises(classad.ClassAdException):
        classad.ClassAd()["bad name!"] = 1
    with pytest.raises(TypeError):
        classad.ClassAd({"A": object()})


def test_hostile_values_are_bounded() -> None:
    deep: list[Any] = []
    for _ in range(200):
        deep = [deep]
    with pytest.raises(TypeError, match="nested too deeply"):
        classad.ClassAd({"A": deep})
    with pytest.raises(classad.ClassAdException):
        classad.ExprTree("(" * 100000 + "1" + ")" * 100000)
    with pytest.raises(TypeError):
        classad.ClassAd({"A": 2**70})


def test_a_submit_cannot_be_made_to_say_more_than_its_commands() -> None:
    import andes

    sub = andes.Submit({"executable": "a.wasm", "+Team": '"blue"', "MY.Rank": "1"})
    assert str(sub) == 'executable = a.wasm\n+Team = "blue"\nMY.Rank = 1\nqueue\n'
    for name in ["a\nqueue 1000", "x = y", "", "1abc", "a b"]:
        with pytest.raises(ValueError):
            sub[name] = "1"
    with pytest.raises(ValueError):
        sub["arguments"] = "1\nqueue 1000"
    with pytest.raises(andes.HTCondorException):
        sub._text(itemdata=["ok", "bad\nqueue 5"])
