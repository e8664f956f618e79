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
    "Value",
    "parseAds",
    "parseOne",
    "parseNext",
    "quote",
    "unquote",
]


class Value(enum.Enum):
    """The two ClassAd values Python has no value for."""

    Undefined = "Undefined"
    Error = "Error"

    @property
    def _classad_special(self):
        return self.value

    def __bool__(self):
        return False


def parseAds(text, parser=None):
    """Every ad in ``text`` (new syntax, ``[...]`` one after another, or old
    syntax, ads separated by a blank line), as a list."""
    if hasattr(text, "read"):
        text = text.read()
    return list(_parse_ads(text))


def parseOne(text, parser=None):
    """The ads in ``text`` merged into one."""
    out = ClassAd()
    for ad in parseAds(text, parser):
        out.update(ad)
    return out


def parseNext(text, parser=None):
    """The first ad in ``text``."""
    ads = parseAds(text, parser)
    if not ads:
        raise StopIteration
    return ads[0]
