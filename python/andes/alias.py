"""Tools written for HTCondor's bindings, driving andes unchanged.

``andes.alias_htcondor()``, called before such a tool is imported, makes
``import htcondor2`` (and ``import htcondor``) give ``andes``,
``htcondor2.dags`` give ``andes.dags``, and ``import classad2`` (and
``import classad``) give ``andes.classad``: a script's one line, and the
tool's own source stays as it was.
"""

import sys

#: The module names HTCondor's bindings answer to, and what andes puts there.
_NAMES = {
    "htcondor2": "andes",
    "htcondor": "andes",
    "htcondor2.dags": "andes.dags",
    "htcondor.dags": "andes.dags",
    "classad2": "andes.classad",
    "classad": "andes.classad",
}


def alias_htcondor() -> None:
    """Makes HTCondor's binding modules (``htcondor2``, ``htcondor``,
    ``classad2``, ``classad`` and ``htcondor2.dags``) this package's, for
    this interpreter. Call it before importing the tool that uses them: a
    module already imported under one of those names, and not andes's, is
    an error, since what imported it holds the real one."""
    import importlib

    taken = [
        n
        for n, ours in _NAMES.items()
        if n in sys.modules and sys.modules[n] is not importlib.import_module(ours)
    ]
    if taken:
        raise RuntimeError(
            "alias_htcondor() must come before anything imports "
            + ", ".join(sorted(taken))
            + ": they are imported already, as HTCondor's own"
        )
    for name, ours in _NAMES.items():
        sys.modules[name] = importlib.import_module(ours)
