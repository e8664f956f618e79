"""ClassAds, in the shape of HTCondor's ``classad2`` module.

``from andes import classad`` stands in for ``import classad2 as classad``::

    ad = classad.ClassAd("[Cpus = 4; Memory = Cpus * 1024]")
    ad["Memory"]            # ExprTree('Cpus * 1024'): not a literal
    ad.eval("Memory")       # 4096
    ad["Name"] = "slot1"    # Python values become literals
    classad.ExprTree("Memory > 2048").eval(ad)   # True

Parsing and evaluation are andes's own ClassAd implementation (the ``classad``
crate), the same the schedd, the negotiator and the commands use.
"""

import enum

from ._andes import ClassAd, ClassAdException, ExprTree
from ._andes import parse_ads as _parse_ads
from ._andes import quote, unquote

__all__ = [
    "ClassAd",
    "ClassAdException",
    "ExprTree",
    "ParserType",
    "Value",
    "parseAds",
    "parseOne",
    "parseNext",
    "quote",
    "unquote",
]


class Value(enum.IntEnum):
    """The two ClassAd values Python has no value for, numbered as in
    classad2: ``Error`` is 1, ``Undefined`` 2 (so, as there, both are
    true in a test: compare with ``is Value.Undefined``)."""

    Error = 1 << 0
    Undefined = 1 << 1

    @property
    def _classad_special(self):
        return self.name


class ParserType(enum.IntEnum):
    """How ``parseAds``, ``parseOne`` and ``parseNext`` read their text
    (``classad2.ParserType``): ``Auto`` new or old syntax, whichever the text
    starts as; ``Old`` ads of ``Name = Expr`` lines separated by blank lines;
    ``New`` ``[ ... ]`` ads; ``JSON`` an object or an array of them;
    ``FileAuto`` JSON when the text starts with ``{``, else as ``Auto``.
    ``XML`` is refused."""

    Auto = -1
    Old = 0
    XML = 1
    JSON = 2
    New = 3
    FileAuto = 4


def _parser(parser):
    if parser is None:
        return ParserType.Auto
    if isinstance(parser, bool) or not isinstance(parser, int):
        raise TypeError(f"parser must be a ParserType, not {type(parser).__name__}")
    try:
        return ParserType(parser)
    except ValueError:
        raise ValueError(f"parser {parser} is no ParserType (Auto -1, Old 0, XML 1, JSON 2, New 3, FileAuto 4)") from None


def parseAds(text, parser=ParserType.Auto):
    """Every ad in ``text`` (a string or a file), read as ``parser`` (a
    ``ParserType``) says, as a list."""
    if hasattr(text, "read"):
        text = text.read()
    return list(_parse_ads(text, int(_parser(parser))))


def parseOne(text, parser=ParserType.Auto):
    """The ads in ``text`` merged into one (later attributes win)."""
    out = ClassAd()
    for ad in parseAds(text, parser):
        out.update(ad)
    return out


def parseNext(text, parser=ParserType.Auto):
    """The first ad in ``text`` (``StopIteration`` when it has none)."""
    ads = parseAds(text, parser)
    if not ads:
        raise StopIteration
    return ads[0]
