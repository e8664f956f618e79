"""The conformance page of andes's Python package against HTCondor's own.

Compares every public name of HTCondor's ``htcondor2`` and ``classad2``
modules (from the ``htcondor`` package on PyPI), and every public member of
their classes, with ``andes`` and ``andes.classad``, and writes the page
``docs/src/python-conformance.md``: what is present, and for what is absent,
why. ``--check PAGE`` regenerates it in memory and fails when the page on
disk differs (CI runs it, through the manual and the Python tests).

    python3 python/tools/conformance.py docs/src/python-conformance.md
    python3 python/tools/conformance.py --check docs/src/python-conformance.md
"""

import argparse
import fnmatch
import importlib.metadata
import inspect
import sys

import andes
import classad2
import htcondor2
from andes import classad

#: Why a name is absent, by pattern (fnmatch) on ``module.Name`` or
#: ``module.Class.member``; the first that matches says. What no pattern
#: names is shown as not built yet.
REASONS = [
    ("htcondor2.htcondor2_impl", "htcondor2's compiled implementation, not its interface"),
    ("classad2.classad2_impl", "classad2's compiled implementation, not its interface"),
    ("htcondor2.Optional", "`typing.Optional`, which htcondor2's module imports, not its interface"),
    (
        "htcondor2.Cred*",
        "a job gets no credentials: a WebAssembly job sees its sandbox and nothing else, "
        "and users sign their requests with their own keys (`andes keygen`)",
    ),
    ("htcondor2.Submit.issue_credentials", "as `Credd`: jobs get no credentials"),
    ("htcondor2.Schedd.refreshGSIProxy", "as `Credd`: jobs get no credentials (no GSI)"),
    ("htcondor2.Placementd", "andes has no placement daemon"),
    (
        "htcondor2.SecurityContext",
        "each connection is authenticated by its user's key in its TLS handshake; there is no security session to set up",
    ),
    (
        "htcondor2.ping",
        "each connection is authenticated by its user's key in its TLS handshake; there is no security session to test",
    ),
    (
        "htcondor2.*able_debug",
        "the bindings log nothing of their own; each daemon logs to its file",
    ),
    ("htcondor2.enable_log", "the bindings log nothing of their own; each daemon logs to its file"),
    ("htcondor2.log", "the bindings log nothing of their own; each daemon logs to its file"),
    ("htcondor2.LogLevel", "the bindings log nothing of their own; each daemon logs to its file"),
    (
        "htcondor2.*usermap*",
        "andes has no user maps: a request's key names its user (the pool's trust file)",
    ),
    (
        "htcondor2.send_alive",
        "for a daemon a condor_master starts and watches; andes has no master",
    ),
    (
        "htcondor2.set_ready_state",
        "for a daemon a condor_master starts and watches; andes has no master",
    ),
    (
        "htcondor2.JobEventType.EP_*",
        "events of an execute point's own event log (HTCondor 24's startd log); an andes "
        "host keeps its slots' history instead (`startd_history`)",
    ),
    (
        "htcondor2.Schedd.*UserRec",
        "HTCondor's schedd user records; an andes pool's users are the keys in its trust file",
    ),
    (
        "htcondor2.Schedd.*ProjectRec",
        "HTCondor's schedd project records; andes has no projects",
    ),
    ("htcondor2.Schedd.queryUserAds", "HTCondor's schedd user records; andes has none"),
    ("htcondor2.Schedd.queryProjectAds", "HTCondor's schedd project records; andes has none"),
    ("htcondor2.Schedd.*_ocu", "owner-claimed units are not part of andes"),
    (
        "htcondor2.Schedd.*export*",
        "moving jobs through an exported queue file; andes moves jobs between pools by routing",
    ),
]

NOT_YET = "not built yet"


def public(obj):
    return sorted(n for n in dir(obj) if not n.startswith("_"))


def reason(key):
    for pattern, why in REASONS:
        if fnmatch.fnmatchcase(key, pattern):
            return why
    return NOT_YET


def kind(obj):
    if inspect.isclass(obj):
        return "class"
    if callable(obj):
        return "function"
    if inspect.ismodule(obj):
        return "module"
    return "value"


def compare(theirs, ours, module):
    """Rows (key, kind, present, reason) for every public name of ``theirs``
    and of its classes, against ``ours``."""
    names, members = [], []
    for name in public(theirs):
        obj = getattr(theirs, name)
        key = f"{module}.{name}"
        here = hasattr(ours, name)
        names.append((key, kind(obj), here, "" if here else reason(key)))
        if inspect.isclass(obj) and here:
            mine = getattr(ours, name)
            for m in public(obj):
                mkey = f"{key}.{m}"
                has = hasattr(mine, m)
                members.append((mkey, name, has, "" if has else reason(mkey)))
    return names, members


def page():
    version = importlib.metadata.version("htcondor")
    h_names, h_members = compare(htcondor2, andes, "htcondor2")
    c_names, c_members = compare(classad2, classad, "classad2")
    out = []
    w = out.append
    w("# Python conformance: htcondor2 and classad2, member by member")
    w("")
    w("<!-- andes-docs: needs python -->")
    w("")
    w(
        f"Every public name of HTCondor's `htcondor2` and `classad2` modules (`htcondor` "
        f"{version} from PyPI) and every public member of their classes, looked up in "
        "`andes` and `andes.classad`: present, or absent and why. The page is made by "
        "`python/tools/conformance.py` from the installed packages; CI makes it again and fails "
        "when it differs, so it is what the package is:"
    )
    w("")
    w("```sh")
    w('python3 "$ANDES_REPO/python/tools/conformance.py" --check "$ANDES_REPO/docs/src/python-conformance.md"')
    w("```")
    w("")
    w("```text output")
    w("the page is current")
    w("```")
    w("")
    w("Present means the name exists with htcondor2's meaning, tested where the manual's")
    w("Python chapter and `python/tests/` say; it says nothing of arguments andes refuses")
    w("(each refusal is an error that says why).")
    w("")
    w("| | names | present | absent, with a reason | absent, not built yet |")
    w("| --- | --- | --- | --- | --- |")
    for label, rows in [
        ("`htcondor2`", h_names),
        ("members of `htcondor2`'s classes", h_members),
        ("`classad2`", c_names),
        ("members of `classad2`'s classes", c_members),
    ]:
        here = sum(1 for r in rows if r[2])
        why = sum(1 for r in rows if not r[2] and r[3] != NOT_YET)
        yet = sum(1 for r in rows if not r[2] and r[3] == NOT_YET)
        w(f"| {label} | {len(rows)} | {here} | {why} | {yet} |")
    for title, names, members in [
        ("htcondor2", h_names, h_members),
        ("classad2", c_names, c_members),
    ]:
        w("")
        w(f"## {title}")
        w("")
        w("| name | kind | in andes |")
        w("| --- | --- | --- |")
        for key, k, here, why in names:
            w(f"| `{key}` | {k} | {'yes' if here else 'no: ' + why} |")
        w("")
        w(f"### Members of {title}'s classes")
        w("")
        w("| class | present | absent |")
        w("| --- | --- | --- |")
        classes = sorted({r[1] for r in members})
        for c in classes:
            rows = [r for r in members if r[1] == c]
            present = ", ".join(f"`{r[0].rsplit('.', 1)[1]}`" for r in rows if r[2])
            absent = "; ".join(
                f"`{r[0].rsplit('.', 1)[1]}` ({r[3]})" for r in rows if not r[2]
            )
            w(f"| `{c}` | {present or '-'} | {absent or '-'} |")
    return "\n".join(out) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("page", help="the page to write (or, with --check, to compare)")
    p.add_argument("--check", action="store_true", help="fail when the page differs")
    a = p.parse_args()
    text = page()
    if a.check:
        with open(a.page, encoding="utf-8") as f:
            if f.read() != text:
                sys.exit(
                    f"{a.page} is not what python/tools/conformance.py makes now: run "
                    f"`python3 python/tools/conformance.py {a.page}` and commit it"
                )
        print("the page is current")
        return
    with open(a.page, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main()
