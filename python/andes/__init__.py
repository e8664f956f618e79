"""andes from Python, in the shape of HTCondor's ``htcondor2`` bindings.

A script written for HTCondor ports by changing its imports::

    import andes as htcondor          # was: import htcondor2 as htcondor
    from andes import classad         # was: import classad2 as classad

    schedd = htcondor.Schedd()
    sub = htcondor.Submit({"executable": "primes.wasm", "arguments": "$(Process)",
                           "log": "primes.log", "output": "out.$(Process)"})
    result = schedd.submit(sub, count=3)
    for event in htcondor.JobEventLog("primes.log").events(stop_after=60):
        print(event.type, event.cluster, event.proc)

The pool, the keys and the configuration are found as the ``andes`` command
finds them (``ANDES_CONFIG``, else the andes configuration directory), or from
the ``config=`` path every class takes. The work is done by andes's own Rust
crates: the submit is the one ``andes submit`` makes, queries and changes are
the same signed requests, the event log reader is the one ``andes wait`` uses.
"""

import collections
import collections.abc
import enum
import os
import pathlib
import re
import socket
import time

from . import classad
from ._andes import Config as _Config
from ._andes import EventLog as _EventLog
from ._andes import HTCondorException
from ._andes import Session as _Session
from ._andes import submit_expand as _submit_expand
from ._andes import submit_itemdata as _submit_itemdata
from ._andes import submit_jobs as _submit_jobs
from ._andes import submit_parts as _submit_parts
from ._andes import user_name as _user_name
from ._enums import (
    AdType,
    AdTypes,
    CompletionType,
    CredType,
    CredTypes,
    DaemonCommand,
    DaemonCommands,
    DaemonType,
    DaemonTypes,
    DrainType,
    DrainTypes,
    JobAction,
    QueryOpt,
    QueryOpts,
    SubsystemType,
    TransactionFlag,
    TransactionFlags,
    VacateType,
)

__all__ = [
    "AdType",
    "AdTypes",
    "Collector",
    "CompletionType",
    "CredType",
    "CredTypes",
    "DaemonCommand",
    "DaemonCommands",
    "DaemonType",
    "DaemonTypes",
    "DrainType",
    "DrainTypes",
    "HTCondorException",
    "JobAction",
    "JobEvent",
    "JobEventLog",
    "JobEventType",
    "JobStatus",
    "Negotiator",
    "QueryOpt",
    "QueryOpts",
    "RemoteParam",
    "Schedd",
    "Startd",
    "Submit",
    "SubmitResult",
    "SubsystemType",
    "TransactionFlag",
    "TransactionFlags",
    "VacateType",
    "alias_htcondor",
    "classad",
    "param",
    "reload_config",
    "send_command",
    "set_subsystem",
]


_ACTIONS = {
    JobAction.Hold: "hold",
    JobAction.Release: "release",
    JobAction.Remove: "remove",
    JobAction.RemoveX: "remove",
    JobAction.Vacate: "vacate",
    JobAction.VacateFast: "vacate",
}


# The ad types andes's collector holds, by the MyType it asks for (None:
# every type); a query for any other type finds nothing.
_MY_TYPES = {
    AdType.Any: None,
    AdType.Startd: "Machine",
    AdType.Slot: "Machine",
    AdType.Schedd: "Scheduler",
    AdType.Submitter: "Submitter",
    AdType.Negotiator: "Negotiator",
}

# The ads Collector.locate reads for each kind of daemon andes has.
_DAEMON_AD_TYPES = {
    DaemonType.Schedd: AdType.Schedd,
    DaemonType.Startd: AdType.Startd,
    DaemonType.Negotiator: AdType.Negotiator,
}


class JobStatus(enum.IntEnum):
    """A job's ``JobStatus``."""

    IDLE = 1
    RUNNING = 2
    REMOVED = 3
    COMPLETED = 4
    HELD = 5
    TRANSFERRING_OUTPUT = 6
    SUSPENDED = 7


class JobEventType(enum.IntEnum):
    """The kinds of job event, numbered as in the user log."""

    SUBMIT = 0
    EXECUTE = 1
    EXECUTABLE_ERROR = 2
    CHECKPOINTED = 3
    JOB_EVICTED = 4
    JOB_TERMINATED = 5
    IMAGE_SIZE = 6
    SHADOW_EXCEPTION = 7
    GENERIC = 8
    JOB_ABORTED = 9
    JOB_SUSPENDED = 10
    JOB_UNSUSPENDED = 11
    JOB_HELD = 12
    JOB_RELEASED = 13
    NODE_EXECUTE = 14
    NODE_TERMINATED = 15
    POST_SCRIPT_TERMINATED = 16
    GLOBUS_SUBMIT = 17
    GLOBUS_SUBMIT_FAILED = 18
    GLOBUS_RESOURCE_UP = 19
    GLOBUS_RESOURCE_DOWN = 20
    REMOTE_ERROR = 21
    JOB_DISCONNECTED = 22
    JOB_RECONNECTED = 23
    JOB_RECONNECT_FAILED = 24
    GRID_RESOURCE_UP = 25
    GRID_RESOURCE_DOWN = 26
    GRID_SUBMIT = 27
    JOB_AD_INFORMATION = 28
    JOB_STATUS_UNKNOWN = 29
    JOB_STATUS_KNOWN = 30
    JOB_STAGE_IN = 31
    JOB_STAGE_OUT = 32
    ATTRIBUTE_UPDATE = 33
    PRESKIP = 34
    CLUSTER_SUBMIT = 35
    CLUSTER_REMOVE = 36
    FACTORY_PAUSED = 37
    FACTORY_RESUMED = 38
    NONE = 39
    FILE_TRANSFER = 40
    RESERVE_SPACE = 41
    RELEASE_SPACE = 42
    FILE_COMPLETE = 43
    FILE_USED = 44
    FILE_REMOVED = 45
    DATAFLOW_JOB_SKIPPED = 46
    COMMON_FILES = 47


def _job_spec(job_spec):
    """``job_spec`` as the ids and constraint a request takes: ``"C.P"``,
    ``"C"``, a list of those, an ``int`` cluster, or a constraint (an
    ``ExprTree`` or any other string)."""
    if isinstance(job_spec, classad.ExprTree):
        return [], str(job_spec)
    if isinstance(job_spec, int) and not isinstance(job_spec, bool):
        return [str(job_spec)], None
    if isinstance(job_spec, str):
        words = job_spec.replace(",", " ").split()
        if words and all(_is_id(w) for w in words):
            return words, None
        return [], job_spec
    if isinstance(job_spec, (list, tuple)):
        ids = [str(j) for j in job_spec]
        bad = [j for j in ids if not _is_id(j)]
        if bad:
            raise HTCondorException(f"not job ids: {', '.join(bad)} (C.P or C)")
        return ids, None
    raise TypeError(f"a job_spec is a job id, a list of them or a constraint, not {type(job_spec).__name__}")


def _is_id(word):
    parts = word.split(".")
    return 1 <= len(parts) <= 2 and all(p.isdigit() for p in parts)


def _constraint(c):
    if c is None:
        return None
    if isinstance(c, classad.ExprTree):
        return str(c)
    if isinstance(c, bool):
        return "true" if c else "false"
    return str(c)


# QueryOpt flags andes's schedd has nothing for, and why.
_REFUSED_OPTS = {
    QueryOpt.IncludeClusterAd: "andes's schedd serves no cluster ads: each job ad holds its cluster's attributes (SubmitResult.clusterad() has them at submit)",
    QueryOpt.IncludeJobsetAds: "andes has no job sets",
}


def _query_opts(opts):
    """``opts`` as a ``QueryOpt``: a flag andes cannot honour is refused,
    never ignored."""
    if opts is None:
        return QueryOpt.Default
    if isinstance(opts, bool) or not isinstance(opts, int):
        raise TypeError(f"opts must be QueryOpt flags, not {type(opts).__name__}")
    opts = int(opts)
    known = 0
    for flag in QueryOpt:
        known |= int(flag)
    if opts < 0 or opts & ~known:
        raise ValueError(f"opts: {opts:#x} holds bits that are no QueryOpt ({opts & ~known:#x})")
    opts = QueryOpt(opts)
    for flag, why in _REFUSED_OPTS.items():
        if opts & flag:
            raise HTCondorException(f"QueryOpt.{flag.name} is not supported: {why}")
    return opts


def _limit(n, name):
    """A count of ads as a request takes it: ``None`` for all (a negative
    ``n``)."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"{name} must be an int (-1: no limit), not {type(n).__name__}")
    return None if n < 0 else n


class SubmitResult:
    """What ``Schedd.submit`` queued (``htcondor2.SubmitResult``)."""

    def __init__(self, cluster, num_procs, cluster_ad, spooled=False):
        self._cluster = cluster
        self._num_procs = num_procs
        self._cluster_ad = cluster_ad
        self._spooled = spooled

    def cluster(self):
        """The cluster id."""
        return self._cluster

    def first_proc(self):
        """The first proc id (always 0: one submit is one cluster)."""
        return 0

    def num_procs(self):
        """How many jobs were queued."""
        return self._num_procs

    def clusterad(self):
        """The attributes every job of the cluster shares."""
        return self._cluster_ad

    def __repr__(self):
        return f"SubmitResult(cluster={self._cluster}, num_procs={self._num_procs})"

    def __str__(self):
        return f"{self._num_procs} job(s) submitted to cluster {self._cluster}."


# A submit command, a macro, or an attribute for the job ad (+Name, MY.Name).
_NAME = re.compile(r"\+?[A-Za-z_][A-Za-z0-9_.]*")


class Submit(collections.abc.MutableMapping):
    """A submit description (``htcondor2.Submit``): submit commands by name,
    and a ``queue`` statement.

    Made from a dict (``Submit({"executable": "a.wasm"})``), from keywords,
    or from the text of a submit file (its ``queue`` statement is kept and
    can be read with ``getQArgs``). ``str(sub)`` is the submit file.

    ``queue``: the queue statement's arguments (``"3"``, ``"x in (a b)"``;
    a leading ``queue `` is allowed), as ``setQArgs`` takes them. As in
    htcondor2, ``queue`` is no submit command: a dict holding it is refused.
    """

    def __init__(self, input=None, queue=None, **kwargs):
        self._commands = {}
        self._qargs = None
        if isinstance(input, str):
            commands, q = _submit_parts(input)
            for name, value in commands:
                self[name] = value
            if q is not None:
                # The statement's own words, as written.
                self._qargs = _last_queue_args(input) or _qargs_text(*q)
        elif input is not None:
            items = dict(input)
            if any(isinstance(k, str) and k.strip().casefold() == "queue" for k in items):
                raise ValueError("the queue statement can not be specified in a dictionary")
            for name, value in items.items():
                self[name] = value
        for name, value in kwargs.items():
            self[name] = value
        if queue is not None:
            if not isinstance(queue, str):
                raise TypeError("queue must be a string")
            self.setQArgs(queue)

    @staticmethod
    def _key(name):
        if not isinstance(name, str) or not _NAME.fullmatch(name.strip()):
            raise ValueError(f"{name!r} is not a submit command name (letters, digits, _ and ., or +Name)")
        return name.strip().lower()

    def __getitem__(self, name):
        return self._commands[self._key(name)][1]

    def __setitem__(self, name, value):
        if self._key(name) == "queue":
            raise ValueError("queue is the queue statement, not a submit command: pass queue=ARGS or call setQArgs")
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, classad.ExprTree):
            value = str(value)
        elif not isinstance(value, str):
            value = str(value)
        if "\n" in value:
            raise ValueError(f"the value of {name!r} holds a newline")
        self._commands[self._key(name)] = (name.strip(), value)

    def __delitem__(self, name):
        del self._commands[self._key(name)]

    def __iter__(self):
        return iter([n for n, _ in self._commands.values()])

    def __len__(self):
        return len(self._commands)

    @classmethod
    def from_dag(cls, filename, options=None):
        """The DAGMan job of the DAG file ``filename`` (``htcondor2.Submit.from_dag``),
        for ``Schedd.submit``: the DAG is read and checked whole when it is
        submitted. ``options`` are condor_submit_dag's (``force``, ``maxjobs``,
        ``maxpre``, ``maxpost``, ``usedagdir``, ``batch-name``, ``DoRecov``,
        ``AlwaysRunPost``)."""
        path = pathlib.Path(filename)
        if not path.is_file():
            raise HTCondorException(f"no DAG file {filename}")
        opts = []
        for k, v in dict(options or {}).items():
            if isinstance(v, bool):
                v = "true" if v else "false"
            opts.append((str(k), str(v)))
        sub = cls(
            {
                "universe": "scheduler",
                "executable": "condor_dagman",
                "log": f"{path.name}.dagman.log",
                "output": f"{path.name}.lib.out",
                "error": f"{path.name}.lib.err",
            }
        )
        sub._dag = (str(path.absolute()), opts)
        return sub

    def getQArgs(self):
        """The ``queue`` statement's arguments (``""`` when it has none):
        ``Submit(str(sub)).getQArgs() == sub.getQArgs()``."""
        return self._qargs or ""

    def expand(self, attr):
        """The value of the submit command or macro ``attr`` with every
        macro in it expanded (``$(name)``, ``$(name:default)``, ``$ENV()``,
        ``$INT()``, ...), as for the first job: ``$(Process)`` is 0,
        ``$(Cluster)`` 1, the queue statement's variables are not defined.
        ``KeyError`` when nothing defines ``attr``."""
        if not isinstance(attr, str):
            raise TypeError("attr must be a string")
        self._not_a_dag("expand")
        value = _submit_expand(str(self), attr, os.getcwd())
        if value is None:
            raise KeyError(attr)
        return value

    def itemdata(self, qargs=None):
        """The items of the queue statement (or of ``qargs``, a queue
        statement's arguments, which may start with ``"queue "``): an
        iterator of dicts of its variables by name (``Item`` when it names
        none), one per item, as the jobs would get them (item files read,
        ``matching`` globs matched in the current directory); ``None`` when
        it has no items (``queue 3``). Each dict can be passed back as
        ``Schedd.submit``'s ``itemdata``."""
        self._not_a_dag("itemdata")
        if qargs is None:
            text = str(self)
        else:
            if not isinstance(qargs, str):
                raise TypeError("qargs must be a string")
            if qargs.casefold().startswith("queue "):
                qargs = qargs[6:]
            text = self._text(queue=qargs)
        got = _submit_itemdata(text, os.getcwd())
        if got is None:
            return None
        names, rows = got
        return iter([dict(zip(names, row)) for row in rows])

    def jobs(self, count=0, itemdata=None, clusterid=1, procid=0, qdate=0, owner=""):
        """The job ads ``Schedd.submit(self, count, itemdata=itemdata)``
        would queue, made here without a schedd, in cluster ``clusterid``
        with ``QDate`` ``qdate`` (0: now) and ``Owner`` ``owner`` (empty:
        you): an iterator of ClassAds. htcondor2 leaves this unimplemented;
        it is htcondor's (version 1) ``Submit.jobs``."""
        return iter(self._simulate(count, itemdata, clusterid, procid, qdate, owner)[0])

    def procs(self, count=0, itemdata=None, clusterid=1, procid=0, qdate=0, owner=""):
        """As ``jobs``, each job ad without the attributes every job of the
        cluster shares (those are the cluster ad's): what each proc has of
        its own."""
        return iter(self._simulate(count, itemdata, clusterid, procid, qdate, owner)[1])

    def _simulate(self, count, itemdata, clusterid, procid, qdate, owner):
        self._not_a_dag("jobs")
        for name, v in (("count", count), ("clusterid", clusterid), ("procid", procid), ("qdate", qdate)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise TypeError(f"{name} must be a non-negative int, not {v!r}")
        if clusterid < 1:
            raise ValueError("clusterid must be 1 or more")
        if procid != 0:
            raise ValueError("andes numbers a cluster's jobs from ProcId 0: procid must be 0")
        if not isinstance(owner, str):
            raise TypeError("owner must be a string")
        return _submit_jobs(self._text(count, itemdata), os.getcwd(), clusterid, qdate, owner or None)

    def _not_a_dag(self, what):
        if getattr(self, "_dag", None) is not None:
            raise HTCondorException(f"{what}: this Submit is a DAG's (Submit.from_dag): andes reads the DAG when it is submitted")

    def setQArgs(self, args):
        """Sets the ``queue`` statement's arguments (``"3"``, ``"x in (a b)"``,
        ...; they may start with ``"queue "``)."""
        if not isinstance(args, str):
            raise TypeError("args must be a string")
        if args.casefold().startswith("queue "):
            args = args[6:]
        if "\n" in args and "(" not in args:
            raise ValueError("queue arguments are one line, or an inline list in parentheses")
        self._qargs = args

    def __str__(self):
        lines = [f"{name} = {value}" for name, value in self._commands.values()]
        lines.append(f"queue {self.getQArgs()}".rstrip())
        return "\n".join(lines) + "\n"

    def __repr__(self):
        return f"Submit({dict(self)!r})"

    def _text(self, count=0, itemdata=None, queue=None):
        """The submit file ``Schedd.submit`` sends."""
        lines = [f"{name} = {value}" for name, value in self._commands.values()]
        if queue is not None:
            q = queue
        elif itemdata is not None:
            q = _itemdata_queue(count, itemdata, self._qargs)
        elif count:
            q = _with_count(self._qargs, count)
        else:
            q = self.getQArgs()
        lines.append(f"queue {q}".rstrip())
        return "\n".join(lines) + "\n"


def _last_queue_args(text):
    """The arguments of the last ``queue`` statement of ``text``, as written
    (an inline list's lines included)."""
    lines = text.splitlines()
    last, i = None, 0
    while i < len(lines):
        words = lines[i].strip()
        if re.match(r"(?i)queue(\s|$)", words):
            args = words[5:].strip()
            if args.endswith("("):
                block = [args]
                i += 1
                while i < len(lines) and not lines[i].strip().startswith(")"):
                    block.append(lines[i])
                    i += 1
                if i < len(lines):
                    block.append(lines[i].strip())
                args = "\n".join(block)
            last = args
        i += 1
    return last


def _qargs_text(count, vars, kind, items):
    words = [count] if count else []
    if kind:
        words.append(",".join(vars))
    if kind == "in":
        words.append("in (" + " ".join(items) + ")")
    elif kind == "from":
        words.append("from (\n" + "\n".join(items) + "\n)")
    elif kind == "from file":
        words.append("from " + items[0])
    elif kind:
        words.append(kind + " " + " ".join(items))
    return " ".join(words)


def _with_count(qargs, count):
    if not qargs:
        return str(count)
    _, queue = _submit_parts("queue " + qargs)
    c, vars, kind, items = queue
    return _qargs_text(str(count), vars, kind, items)


def _itemdata_queue(count, itemdata, qargs):
    rows = list(itemdata)
    vars = None
    if qargs:
        _, queue = _submit_parts("queue " + qargs)
        if queue[1] and queue[2]:
            vars = list(queue[1])
    lines = []
    for row in rows:
        if isinstance(row, dict):
            if vars is None:
                vars = list(row.keys())
            missing = [v for v in vars if v not in row]
            if missing:
                raise HTCondorException(f"itemdata row {row!r} lacks {', '.join(missing)}")
            values = [str(row[v]) for v in vars]
        else:
            values = [str(row)]
        for v in values:
            if "\n" in v or ")" in v:
                raise HTCondorException(f"itemdata value {v!r} holds a newline or ')'")
        lines.append(", ".join(values) if len(values) > 1 else values[0])
    if vars is None:
        vars = ["Item"]
    head = f"{count} " if count else ""
    return head + ",".join(vars) + " from (\n" + "\n".join(lines) + "\n)"


class Schedd:
    """A schedd (``htcondor2.Schedd``): the one ``location_ad`` names (an ad
    ``Collector.locate`` returned: its ``MyAddress``), else the one the
    configuration names.

    ``config``: a configuration file to use instead of ``ANDES_CONFIG`` (a
    personal pool's ``andes.config``, say): its keys sign the requests.
    """

    def __init__(self, location_ad=None, config=None):
        address = None
        if location_ad is not None:
            if not isinstance(location_ad, classad.ClassAd):
                raise TypeError("location must be a ClassAd")
            my_type = location_ad.get("MyType")
            if my_type is not None and my_type != "Scheduler":
                raise ValueError(f"the location ad is a {my_type} ad, not a schedd's (MyType Scheduler)")
            address = _address(location_ad.get("MyAddress"))
        self._session = _Session("schedd", _path(config), address)

    def submit(self, description, count=0, spool=False, itemdata=None, queue=None):
        """Queues the jobs ``description`` (a ``Submit``, or submit-file text)
        makes: ``count`` per item, the items from ``itemdata`` (strings, or dicts
        of the variables by name) or its queue statement. Relative paths are
        relative to the description's ``initialdir``, else the current directory."""
        if not isinstance(description, Submit):
            description = Submit(description)
        spool = bool(spool)
        dag = getattr(description, "_dag", None)
        if dag is not None:
            if spool:
                raise HTCondorException("a DAG's job is not spooled: andes's DAGMan runs beside the schedd and reads the DAG's files where they are")
            cluster, ad = self._session.submit_dag(dag[0], os.getcwd(), dag[1])
            return SubmitResult(cluster, 1, ad)
        text = description._text(count, itemdata, queue)
        cluster, num, ad = self._session.submit(text, os.getcwd(), spool)
        return SubmitResult(cluster, num, ad, spooled=spool)

    def spool(self, result):
        """Completes a submit made with ``spool=True`` (``result`` is what it
        returned), as htcondor2's ``spool`` uploads the jobs' input files.
        andes sends the input files with the submit itself, so the jobs
        already hold them; this checks that ``result`` is a spooled submit's
        and that its jobs are still in the queue (``HTCondorException`` when
        none is). The output stays in the schedd's spool until ``retrieve``
        fetches it."""
        if not isinstance(result, SubmitResult):
            raise TypeError(f"result must be a SubmitResult, not {type(result).__name__}")
        if not result._spooled:
            raise ValueError("result must have come from submit() with spool set")
        spooled = self._session.query(f"ClusterId == {result.cluster()} && SpooledInput =!= undefined", ["ProcId"], None)
        if not spooled:
            raise HTCondorException(f"no spooled job of cluster {result.cluster()} is in the queue")

    def retrieve(self, job_spec):
        """Fetches the output of the spooled jobs ``job_spec`` names (a job
        id ``"C.P"``, a cluster ``"C"`` or ``int``, a list of ids, or a
        constraint: an ``ExprTree`` or its text) from the schedd's spool,
        as ``andes transfer-data`` does: each job's output files and stdout
        and stderr go where its submit description said, its events are
        appended to its log, and the completed ones then leave the queue. A
        constraint selects among your own completed spooled jobs.
        ``HTCondorException`` when ids are named and none is a spooled job
        of yours."""
        ids, constraint = _job_spec(job_spec)
        self._session.retrieve(ids, constraint)

    def reschedule(self):
        """Asks for a negotiation cycle (htcondor2's ``reschedule``).
        andes's schedd tells the collector of new idle jobs as they are
        queued, and the negotiator starts a cycle as soon as it hears of
        them, so there is nothing to ask for: this checks that the schedd
        answers (``HTCondorException`` when it does not)."""
        self._session.query(None, ["ClusterId"], 0)

    def query(self, constraint="true", projection=[], callback=None, limit=-1, opts=QueryOpt.Default):
        """Job ads in the queue for which ``constraint`` is true, each with only
        the ``projection`` attributes (all when empty), at most ``limit`` of
        them (``-1``: all); ``callback``, when given, maps each ad (``None``
        results are left out).

        ``opts`` (``QueryOpt`` flags): ``DefaultMyJobsOnly`` asks for your
        own jobs only (all jobs for a queue administrator, as condor_q's
        default); ``SummaryOnly`` gives one ``Summary`` ad instead of the
        jobs, as HTCondor's schedd does: ``Jobs``, ``Idle``, ``Running``,
        ``Removed``, ``Held``, ``Completed``, ``Suspended`` count the jobs the
        query selects, ``My...`` your own and ``Allusers...`` the whole
        queue's. ``AutoCluster`` gives an ad per autocluster of the selected
        jobs instead (the schedd's: jobs alike in every attribute a match
        reads and every one the negotiator names significant), ``GroupBy``
        one per group alike in the ``projection`` attributes; each holds
        those attributes, ``JobCount``, ``AutoClusterId`` and
        ``AutoClusterAttrs``, and ``limit`` counts groups. The others are
        refused (an ``HTCondorException`` saying why): andes's schedd has no
        cluster or jobset ads to give."""
        opts = _query_opts(opts)
        limit = _limit(limit, "limit")
        mine = bool(opts & QueryOpt.DefaultMyJobsOnly)
        projection = list(projection)
        group_by = None
        if opts & QueryOpt.AutoCluster and opts & QueryOpt.GroupBy:
            raise ValueError("opts: AutoCluster and GroupBy are two ways to group: give one")
        if opts & QueryOpt.AutoCluster:
            group_by = []
        elif opts & QueryOpt.GroupBy:
            if not projection:
                raise ValueError("QueryOpt.GroupBy groups by the projection: name its attributes")
            group_by, projection = projection, []
        if opts & QueryOpt.SummaryOnly:
            if group_by is not None:
                raise ValueError("opts: SummaryOnly counts jobs and cannot also group them")
            ads = [self._summary(_constraint(constraint), mine)]
        else:
            ads = self._session.query(_constraint(constraint), projection, limit, mine=mine, group_by=group_by)
        if callback is not None:
            return [r for r in (callback(ad) for ad in ads) if r is not None]
        return ads

    def _summary(self, constraint, mine):
        """HTCondor's summary ad (QueryOpt.SummaryOnly), counted from the
        queue's ``JobStatus`` and ``Owner``."""
        what = ["JobStatus", "Owner"]
        everyone = self._session.query(None, what, None)
        selected = self._session.query(constraint, what, None, mine=mine)
        me = _user_name()
        ad = classad.ClassAd()
        ad["MyType"] = "Summary"
        for prefix, ads in (("", selected), ("My", [a for a in everyone if a.get("Owner") == me]), ("Allusers", everyone)):
            counts = collections.Counter(a.get("JobStatus") for a in ads)
            ad[prefix + "Jobs"] = len(ads)
            ad[prefix + "Idle"] = counts[JobStatus.IDLE]
            ad[prefix + "Running"] = counts[JobStatus.RUNNING] + counts[JobStatus.TRANSFERRING_OUTPUT]
            ad[prefix + "Removed"] = counts[JobStatus.REMOVED]
            ad[prefix + "Held"] = counts[JobStatus.HELD]
            ad[prefix + "Completed"] = counts[JobStatus.COMPLETED]
            ad[prefix + "Suspended"] = counts[JobStatus.SUSPENDED]
        return ad

    def history(self, constraint=None, projection=[], match=-1, since=None, limit=None):
        """Ads of jobs that left the queue, newest first, at most ``match``
        (``-1``: all; ``limit`` is the same, by the name ``query`` gives it).
        ``since``: a cluster id (``int``) or job id (``"C.P"``): only jobs
        recorded after it; an expression: jobs until the first it is true
        of."""
        match = _limit(match, "match")
        if limit is not None:
            limit = _limit(limit, "limit")
            if match is not None and match != limit:
                raise ValueError(f"history: match={match} and limit={limit} say different things: give one")
            match = limit
        c = _constraint(constraint)
        if since is not None:
            if isinstance(since, int) and not isinstance(since, bool):
                since_c = f"ClusterId > {since}"
            elif isinstance(since, str) and _is_id(since):
                cl, _, pr = since.partition(".")
                since_c = f"ClusterId > {cl} || (ClusterId == {cl} && ProcId > {pr or -1})"
            else:
                since_c = f"!({_constraint(since)})"
            c = f"({c}) && ({since_c})" if c else since_c
        return self._session.history(c, list(projection), match)

    def act(self, action, job_spec, reason=None):
        """Holds, releases, removes or vacates the jobs ``job_spec`` names; the
        result counts them as ``htcondor2`` does (``TotalSuccess``, ...)."""
        action = JobAction(action)
        if action not in _ACTIONS:
            raise HTCondorException(f"andes does not {action.name.lower()} jobs")
        ids, constraint = _job_spec(job_spec)
        changed, skipped = self._session.change(_ACTIONS[action], ids, constraint, reason)
        result = classad.ClassAd()
        result["TotalSuccess"] = len(changed)
        result["TotalError"] = len(skipped)
        result["TotalJobAds"] = len(changed) + len(skipped)
        result["TotalNotFound"] = 0 if changed or skipped else 1
        return result

    def edit(self, job_spec, attr, value, flags=None):
        """Sets ``attr`` to ``value`` (a ClassAd expression: quote strings, or
        pass an ``ExprTree``) in every job ``job_spec`` names; returns how many."""
        ids, constraint = _job_spec(job_spec)
        expr = str(value) if isinstance(value, classad.ExprTree) else value
        if not isinstance(expr, str):
            expr = str(classad.ExprTree(repr(value) if isinstance(value, (int, float)) else str(value)))
        changed, skipped = self._session.change("edit", ids, constraint, None, attr, expr)
        if not changed and skipped:
            raise HTCondorException("; ".join(f"{i}: {why}" for i, why in skipped))
        return len(changed)


# What Collector.locate projects: htcondor2's list, and MyType.
_FOR_LOCATION = ["MyType", "MyAddress", "AddressV1", "CondorVersion", "CondorPlatform", "Name", "Machine"]


class Collector:
    """A collector (``htcondor2.Collector``): the pool's, as the configuration
    names it, or the one at ``pool``: a ``"host:port"`` address (or
    HTCondor's ``"<host:port?...>"``), a list of them (the first is used), or
    a ClassAd with a ``MyAddress``.

    ``config``: a configuration file to use instead of ``ANDES_CONFIG``.
    """

    def __init__(self, pool=None, config=None):
        self._config = _path(config)
        self.default = pool is None
        address = None
        if isinstance(pool, classad.ClassAd):
            address = pool.get("MyAddress")
            if address is None:
                raise ValueError("if ClassAd, pool must have MyAddress attribute")
        elif isinstance(pool, (list, tuple)):
            if not pool:
                raise ValueError("pool is an empty list")
            address = pool[0]
        elif pool is not None and not isinstance(pool, str):
            raise TypeError("pool is not a string, list (or tuple) of strings, or a ClassAd")
        else:
            address = pool
        self._session = _Session("collector", self._config, None if address is None else _address(address))

    def query(self, ad_type=AdType.Any, constraint=None, projection=None, statistics=None):
        """Ads of ``ad_type`` for which ``constraint`` is true, each with only
        the ``projection`` attributes (all when none). andes's collector
        holds slot, schedd, submitter and negotiator ads: other types have none."""
        ad_type = AdType(ad_type)
        if ad_type not in _MY_TYPES:
            return []
        return self._session.collector_query(
            _MY_TYPES[ad_type], _constraint(constraint), list(projection or [])
        )

    def locate(self, daemon_type, name=None):
        """An ad with the address (``MyAddress``) and ``Name`` of a daemon of
        ``daemon_type``: the one named ``name`` (a startd: by slot name, or by
        machine when ``name`` has no ``@``), else this machine's (the
        configured schedd; for a collector given by address, the first the
        collector knows). The negotiator is the central manager's, at the
        collector's address. ``None`` when no daemon has that name; an
        ``HTCondorException`` when there is no local one."""
        daemon_type = DaemonType(daemon_type)
        if daemon_type == DaemonType.Collector and name is None:
            return self._own_ad()
        if daemon_type == DaemonType.Negotiator and name is None:
            # andes's negotiator is the collector's own central manager.
            ads = self.query(AdType.Negotiator, None, _FOR_LOCATION)
            return ads[0] if ads else self._own_ad("Negotiator")
        ad_type = _DAEMON_AD_TYPES.get(daemon_type)
        if name is not None:
            if ad_type is None:
                return None
            if daemon_type == DaemonType.Startd and "@" not in name:
                constraint = " || ".join(f"Machine == {classad.quote(m)}" for m in _machine_names(name))
            else:
                constraint = f"Name == {classad.quote(name)}"
            ads = self.query(ad_type, constraint, _FOR_LOCATION)
            return ads[0] if ads else None
        if ad_type is None:
            raise HTCondorException(f"andes has no {daemon_type.name} daemon to locate")
        if not self.default:
            ads = self.query(ad_type, None, _FOR_LOCATION)
            return ads[0] if ads else None
        return self._local(daemon_type, ad_type)

    def locateAll(self, daemon_type):
        """Ads with the address of every daemon of ``daemon_type`` the
        collector knows (for startds: one per slot, as htcondor2's)."""
        daemon_type = DaemonType(daemon_type)
        if daemon_type == DaemonType.Collector:
            return [self._own_ad()]
        ad_type = _DAEMON_AD_TYPES.get(daemon_type)
        if ad_type is None:
            return []
        ads = self.query(ad_type, projection=_FOR_LOCATION)
        if not ads and daemon_type == DaemonType.Negotiator:
            return [self._own_ad("Negotiator")]
        return ads

    def _own_ad(self, my_type="Collector"):
        """The location ad of the central manager this collector is: as a
        collector, or as the negotiator it also is."""
        address = self._session.url.split("://", 1)[-1]
        ad = classad.ClassAd()
        ad["MyType"] = my_type
        ad["Name"] = address
        ad["MyAddress"] = address
        ad["Machine"] = address.rsplit(":", 1)[0]
        return ad

    def _local(self, daemon_type, ad_type):
        """This machine's daemon of ``daemon_type``, as the configuration
        names it: its ad in the collector, or (a schedd the collector has not
        heard from yet) an ad made from the configuration."""
        table = _Config(self._config)
        if daemon_type == DaemonType.Schedd:
            name = table.get("SCHEDD_NAME")
            ads = self.query(ad_type, f"Name == {classad.quote(name)}", _FOR_LOCATION) if name else []
            if ads:
                return ads[0]
            address = _Session("schedd", self._config).url.split("://", 1)[-1]
            ad = classad.ClassAd()
            ad["MyType"] = "Scheduler"
            ad["Name"] = name or address
            ad["MyAddress"] = address
            ad["Machine"] = socket.gethostname()
            return ad
        if daemon_type == DaemonType.Startd:
            names = _machine_names(table.get("NETWORK_HOSTNAME") or socket.gethostname())
            constraint = " || ".join(f"Machine == {classad.quote(m)}" for m in names)
        else:
            constraint = None
        ads = self.query(ad_type, constraint, _FOR_LOCATION)
        if not ads:
            raise HTCondorException(f"Unable to locate local daemon: the collector has no {daemon_type.name} ad for this machine")
        return ads[0]


def _machine_names(host):
    """``host`` and its canonical name (a startd's ``Machine`` is either)."""
    names = [host]
    try:
        for *_, canon, _addr in socket.getaddrinfo(host, None, 0, socket.SOCK_STREAM, 0, socket.AI_CANONNAME):
            if canon and canon not in names:
                names.append(canon)
    except OSError:
        pass
    return names


def _address(addr):
    """A daemon's address as ``host:port``, from ``host:port``, HTCondor's
    ``<host:port?params>`` or a URL."""
    if not isinstance(addr, str) or not addr.strip():
        raise ValueError(f"{addr!r} is not a daemon's address (host:port)")
    a = addr.strip()
    if a.startswith("<"):
        a = a[1:].split(">", 1)[0].split("?", 1)[0]
    for scheme in ("http://", "https://"):
        if a.startswith(scheme):
            a = a[len(scheme) :].rstrip("/")
    if not a or any(c.isspace() for c in a) or "/" in a:
        raise ValueError(f"{addr!r} is not a daemon's address (host:port)")
    return a


class JobEvent(collections.abc.Mapping):
    """One event of a job event log (``htcondor2.JobEvent``): its ``type``,
    ``cluster``, ``proc``, ``timestamp`` and, as a mapping, the attributes of
    HTCondor's event ClassAd (``ReturnValue``, ``HoldReason``, ...)."""

    def __init__(self, number, cluster, proc, timestamp, ad, text=None):
        self._type = JobEventType(number) if number in JobEventType._value2member_map_ else number
        self._cluster = cluster
        self._proc = proc
        self._timestamp = timestamp
        self._ad = ad
        self._text = text

    @property
    def type(self):
        return self._type

    @property
    def cluster(self):
        return self._cluster

    @property
    def proc(self):
        return self._proc

    @property
    def timestamp(self):
        return self._timestamp

    def __getitem__(self, key):
        return self._ad[key]

    def __iter__(self):
        return iter(self._ad.keys())

    def __len__(self):
        return len(self._ad)

    def __str__(self):
        """The event as the user log holds it (htcondor2's ``str(event)``):
        its header line and body, dates in local time, without the ``...``."""
        return self._text if self._text is not None else self._ad.printOld()

    def __repr__(self):
        return f"JobEvent(type={self._type}, cluster={self._cluster}, proc={self._proc}, timestamp={self._timestamp})"


class JobEventLog:
    """A job event log (the submit file's ``log``), read as it grows
    (``htcondor2.JobEventLog``): an iterator of its events, and a context
    manager that closes it::

        with JobEventLog("jobs.log") as log:
            first = next(log)          # waits for the first event
            for event in log.events(stop_after=60):
                ...

    ``next(log)`` waits for the next event: for ever, or up to the
    ``stop_after`` of the last ``events()`` call (then ``StopIteration``; the
    log can be read on later, as it grows).
    """

    _POLL = 0.1

    def __init__(self, filename):
        filename = os.fspath(filename)
        if not filename:
            raise ValueError("filename must not be empty")
        self._log = _EventLog(filename)
        self._pending = collections.deque()
        self._stop_after = None
        self._closed = False

    def events(self, stop_after=None):
        """This log, as an iterator of its events that waits for new ones up
        to ``stop_after`` seconds for each (0: only what is there now;
        ``None``: for ever)."""
        if stop_after is not None and (isinstance(stop_after, bool) or not isinstance(stop_after, (int, float))):
            raise TypeError("stop_after must be a number of seconds or None")
        self._stop_after = stop_after
        return self

    def __iter__(self):
        return self

    def __next__(self):
        deadline = None if self._stop_after is None else time.monotonic() + self._stop_after
        while True:
            if self._closed:
                raise StopIteration
            if not self._pending:
                self._pending.extend(JobEvent(*e) for e in self._log.poll())
            if self._pending:
                return self._pending.popleft()
            if deadline is not None and time.monotonic() >= deadline:
                raise StopIteration
            wait = self._POLL
            if deadline is not None:
                wait = max(0.0, min(wait, deadline - time.monotonic()))
            time.sleep(wait)

    def close(self):
        """Stops reading the log: its iterators give no more events."""
        self._closed = True
        self._pending.clear()

    def __enter__(self):
        self._stop_after = None
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _path(p):
    """A configuration file named, else the one ``reload_config`` was given."""
    return param._root if p is None else os.fspath(p)


class _Param(collections.abc.MutableMapping):
    """The configuration (``htcondor2.param``): knob names (any case) to their
    values, expanded as ``andes config-val`` prints them, all strings. It is
    read from ``ANDES_CONFIG`` (else the andes configuration directory's
    ``andes.config``) when first used, and again by ``reload_config``. A knob
    defined empty is missing, as in htcondor2. Setting a knob changes this
    process's table only."""

    def __init__(self):
        self._root = None
        self._subsystem = None
        self._table = None

    def _t(self):
        if self._table is None:
            self._table = _Config(self._root, self._subsystem)
        return self._table

    def __getitem__(self, key):
        if not isinstance(key, str):
            raise TypeError("key must be a string")
        value = self._t().get(key)
        if not value:
            raise KeyError(key)
        return value

    def __setitem__(self, key, value):
        if not isinstance(key, str):
            raise TypeError("key must be a string")
        if not isinstance(value, str):
            raise TypeError("value must be a string")
        self._t().set(key, value)

    def __delitem__(self, key):
        if not isinstance(key, str):
            raise TypeError("key must be a string")
        self._t().set(key, "")

    def _keys(self):
        t = self._t()
        return [k for k in t.names() if t.get(k)]

    def __iter__(self):
        return iter(self._keys())

    def __len__(self):
        return len(self._keys())

    def __repr__(self):
        return f"<andes.param: {len(self)} knobs>"


param = _Param()


def reload_config(root_config_file=None):
    """Reads the configuration again (``param``): from ``root_config_file``
    when given, as if ``ANDES_CONFIG`` named it (``Schedd()`` and
    ``Collector()`` without ``config=`` then use it too), else from
    ``ANDES_CONFIG`` or the default file."""
    param._root = None if root_config_file is None else os.fspath(root_config_file)
    param._table = None
    param._t()


def set_subsystem(name, daemon_type=SubsystemType.Auto):
    """Sets the subsystem ``param`` reads knobs for: ``NAME`` is then
    ``SUBSYSTEM.NAME`` where that is defined, as in HTCondor's daemons."""
    if not isinstance(name, str) or not name:
        raise TypeError("name must be a non-empty string")
    SubsystemType(daemon_type)
    param._subsystem = name
    if param._table is not None:
        param._table.set_subsystem(name)


from ._admin import Negotiator, RemoteParam, Startd, send_command  # noqa: E402

from . import personal  # noqa: E402


from . import dags  # noqa: E402  (htcondor2.dags)
from .alias import alias_htcondor  # noqa: E402
