"""classad2's ClassAd extras: flatten, externalRefs/internalRefs, simplify,
setdefault/popitem, printing, parsing by ParserType, Value's numbers, each
checked against classad2 itself where it is installed."""

import json

import pytest

from andes import classad
from needs import needed

AD = '[A = 1; B = A + X; C = Y; D = C + 1; M = 2; R = [q = 1]; S = "s"]'


def shown(v: object) -> str:
    """A flatten result as text: an ExprTree's one-line form (andes's
    ``str``, classad2's ``repr``: classad2's ``str`` lays lists out on
    several lines), or a value's ``repr``."""
    if type(v).__name__ != "ExprTree":
        return repr(v)
    return str(v) if isinstance(v, classad.ExprTree) else repr(v)


FLATTEN = {
    "M * 1024 * 1024": 2097152,
    "Zed * 1024 * 1024": "1048576 * Zed",
    "A + X + 2 * 3": "7 + X",
    "B * 2": "2 * B",
    "X + 1 + 2": "3 + X",
    "X - 1 - 2": "X - 1 - 2",
    "A > 0 && X": "X",
    "X && false": False,
    "true || X": True,
    "A == 2 ? X : Y": "Y",
    'strcat(S, "x")': "sx",
    "{A, X}": "{ 1,X }",
    "{A, 2}": "{ 1,2 }",
    "TARGET.A + 1": "1 + TARGET.A",
    "MY.A + 1": "1 + MY.A",
    "R.q": 1,
    "(A + 1) * X": "2 * X",
    "undefined": classad.Value.Undefined,
}


def test_flatten_evaluates_what_the_ad_defines() -> None:
    ad = classad.ClassAd(AD)
    for text, want in FLATTEN.items():
        got = ad.flatten(classad.ExprTree(text))
        if isinstance(want, str) and not text.startswith("strcat"):
            assert isinstance(got, classad.ExprTree) and str(got) == want, text
        else:
            assert got == want and type(got) is type(want), text
    with pytest.raises(TypeError, match="ExprTree"):
        ad.flatten("A + 1")  # type: ignore[arg-type]

    c2 = needed("classad2", "htcondor")
    theirs = c2.ClassAd(AD)
    for text in FLATTEN:
        assert shown(ad.flatten(classad.ExprTree(text))) == shown(theirs.flatten(c2.ExprTree(text))), text


REFS = {
    "B": (["X"], ["A", "B"]),
    "D": (["Y"], ["C", "D"]),
    "C + X": (["X", "Y"], ["C"]),
    "A + X + B + MY.S + TARGET.T + foo.bar": (["foo.bar", "MY.S", "TARGET.T", "X"], ["A", "B"]),
    "R.q": ([""], ["R"]),
    "strcat(S, Q)": (["Q"], ["S"]),
    "[z = Q]": (["Q"], [""]),
    "1": ([""], [""]),
}


def test_external_and_internal_refs() -> None:
    ad = classad.ClassAd(AD)
    for text, want in REFS.items():
        e = classad.ExprTree(text)
        assert (ad.externalRefs(e), ad.internalRefs(e)) == want, text
    with pytest.raises(TypeError, match="ExprTree"):
        ad.externalRefs("A")  # type: ignore[arg-type]

    c2 = needed("classad2", "htcondor")
    theirs = c2.ClassAd(AD)
    for text in REFS:
        e = c2.ExprTree(text)
        assert (theirs.externalRefs(e), theirs.internalRefs(e)) == REFS[text], text


def test_simplify_gives_the_value_as_an_expression() -> None:
    ad = classad.ClassAd(AD)
    one = classad.ExprTree("1 + 2").simplify()
    assert isinstance(one, classad.ExprTree) and str(one) == "3"
    assert str(classad.ExprTree("B").simplify(ad)) == "undefined"
    assert str(classad.ExprTree("MY.A + TARGET.A").simplify(ad, classad.ClassAd({"A": 5}))) == "6"
    assert str(classad.ExprTree('strcat(S, "t")').simplify(ad)) == '"st"'
    with pytest.raises(TypeError):
        classad.ExprTree("1").simplify("not an ad")  # type: ignore[arg-type]

    c2 = needed("classad2", "htcondor")
    for text in ("1 + 2", "B", "R.q", "S", "A * 2.5"):
        assert shown(classad.ExprTree(text).simplify(ad)) == shown(c2.ExprTree(text).simplify(c2.ClassAd(AD))), text


def test_setdefault_and_popitem_as_a_mapping() -> None:
    c2 = needed("classad2", "htcondor")
    for mod in (classad, c2):
        ad = mod.ClassAd("[A = 1; B = A + 1]")
        assert ad.setdefault("a", 7) == 1 and ad["A"] == 1
        assert ad.setdefault("Z", 9) == 9 and ad["Z"] == 9
        assert ad.setdefault("U") is None and ad["U"] is mod.Value.Undefined
        # The first attribute (andes's ads keep their order, classad2's
        # are hash tables: its first is not always the first set).
        assert ad.popitem() == ("A", 1)
        assert sorted(ad) == ["B", "U", "Z"]
        ad.popitem()
        assert len(ad) == 2
        ad.clear()
        with pytest.raises(KeyError):
            ad.popitem()


def test_value_is_numbered_and_true_as_in_classad2() -> None:
    V = classad.Value
    # An IntEnum member equals its number (mypy's strict equality takes the
    # member and the int for types that cannot be equal).
    assert V.Undefined == 2 and V.Error == 1 and bool(V.Undefined) and bool(V.Error)  # type: ignore[comparison-overlap]
    assert classad.ExprTree("Missing").eval() is V.Undefined
    assert classad.ClassAd({"U": V.Undefined, "E": V.Error}).printOld() == "U = undefined\nE = error\n"
    c2 = needed("classad2", "htcondor")
    assert {m.name: int(m) for m in V} == {m.name: int(m) for m in c2.Value}
    assert bool(V.Undefined) == bool(c2.Value.Undefined) and V.Undefined == c2.Value.Undefined


# Attribute names in an order classad2 keeps (its ads are hash tables: it
# prints short names alphabetically, andes in the order they were set).
PRINTED = '[A = 1; B = A + X; F = strcat(S, "x"); L = {1, 2}; N = [x = 1; y = {3}]; S = "s"; T = true; U = undefined]'


def test_str_is_classad2s_layout_and_repr_one_line() -> None:
    ad = classad.ClassAd(PRINTED)
    text = str(ad)
    assert text.startswith("\n    [\n        A = 1; \n        B = A + X; \n")
    assert text.endswith("        U = undefined\n    ]")
    assert "        L = \n           {\n              1,\n              2\n           }; \n" in text
    assert repr(ad).startswith("[ A = 1; B = A + X; ") and "\n" not in repr(ad)
    assert classad.ClassAd(text) == ad, "str(ad) parses back"
    assert str(classad.ClassAd()) == "\n    [\n    ]"

    c2 = needed("classad2", "htcondor")
    theirs = c2.ClassAd(PRINTED)
    assert str(ad) == str(theirs)
    assert repr(ad) == repr(theirs)
    assert ad.printJson() == theirs.printJson()
    assert ad.printOld() == theirs.printOld()
    assert json.loads(ad.printJson())["B"] == "/Expr(A + X)/"


# Reals and empty lists and ads, in an attribute order classad2 keeps.
REALS = "[a = 2.5; b = 1e300; c = 0.1; d = 1.0; e = []; i = 3; l = {1.5, {}}; x = 2.5 + y]"


def test_old_syntax_and_json_print_reals_and_empties_as_classad2() -> None:
    ad = classad.ClassAd(REALS)
    assert ad.printOld().startswith("a = 2.5\nb = 1E+300\nc = 0.1\nd = 1.0\n")
    assert '"e": {\n  },' in ad.printJson()
    assert classad.ClassAd().printJson() == "{\n}"
    c2 = needed("classad2", "htcondor")
    theirs = c2.ClassAd(REALS)
    assert ad.printOld() == theirs.printOld()
    assert ad.printJson() == theirs.printJson()
    assert classad.ClassAd().printOld() == c2.ClassAd().printOld()


def test_parsing_by_parser_type() -> None:
    P = classad.ParserType
    old = "# a comment\nA = 1\nB = 2\n\nA = 3\n"
    assert [dict(a) for a in classad.parseAds(old, P.Old)] == [{"A": 1, "B": 2}, {"A": 3}]
    assert classad.parseAds(old) == classad.parseAds(old, P.Auto) == classad.parseAds(old, P.FileAuto)
    new = "[A = 1][A = 2]"
    assert [a["A"] for a in classad.parseAds(new, P.New)] == [1, 2]
    assert classad.parseAds(new, P.FileAuto) == classad.parseAds(new)
    js = '{"A": 1, "B": "\\/Expr(A + 1)\\/"}'
    (one,) = classad.parseAds(js, P.JSON)
    assert one.eval("B") == 2
    assert classad.parseAds(js, P.FileAuto) == [one]
    assert [a["A"] for a in classad.parseAds('[{"A": 1}, {"A": 2}]', P.JSON)] == [1, 2]
    assert classad.parseOne(old, P.Old)["A"] == 3
    assert classad.parseNext(new, P.New)["A"] == 1

    with pytest.raises(classad.ClassAdException, match="not new-syntax"):
        classad.parseAds("A = 1\n", P.New)
    with pytest.raises(classad.ClassAdException, match="ad 1: line 1"):
        classad.parseAds("[A = 1]\n", P.Old)
    with pytest.raises(classad.ClassAdException, match="XML"):
        classad.parseAds("<classad/>", P.XML)
    with pytest.raises(classad.ClassAdException, match=r"at `\[1\]`"):
        classad.parseAds('[{"A": 1}, 2]', P.JSON)
    with pytest.raises(ValueError, match="no ParserType"):
        classad.parseAds(new, 7)
    with pytest.raises(TypeError):
        classad.parseAds(new, "New")  # type: ignore[arg-type]

    c2 = needed("classad2", "htcondor")
    assert {m.name: int(m) for m in P} == {m.name: int(m) for m in c2.ParserType}
    for text, p in ((old, P.Old), (new, P.New), (js, P.JSON), (old, P.Auto), (new, P.Auto)):
        assert [repr(a) for a in classad.parseAds(text, p)] == [
            repr(a) for a in c2.parseAds(text, c2.ParserType(int(p)))
        ], (text, p)
