"""Daemon administration in htcondor2's shape: ``send_command``, ``Startd``,
``Negotiator`` and ``RemoteParam``, mapped onto what andes's daemons do.

The requests are the ``andes`` commands' own (``andes reconfig``, ``andes host
off``, ``andes drain``, ``andes vacate``, ``andes userprio -setfactor``), sent
by the same client code; what has no andes meaning raises an
``HTCondorException`` naming the andes way to do it.
"""

import json
import os
from typing import NoReturn, Optional, Union

from . import _address, _path, classad
from ._andes import HTCondorException
from ._andes import Session as _Session
from ._enums import CompletionType, DaemonCommand, DrainType, VacateType

_PathLike = Union[str, os.PathLike[str]]

# andes has no condor_master: each daemon is a process of its own.
_NO_MASTER = (
    "andes has no master daemon: each daemon is a process of its own (`andes schedd`, "
    "`andes host`, `andes central-manager`, or `andes pool up` for a whole pool), started "
    "and stopped by your service manager or PersonalPool; send the command to the daemon's "
    "own ad (Collector.locate(DaemonType.Startd), ...)"
)

# The commands a condor_master takes, and nothing else does.
_MASTER_COMMANDS = {
    DaemonCommand.DaemonsOn,
    DaemonCommand.DaemonsOff,
    DaemonCommand.DaemonsOffFast,
    DaemonCommand.DaemonsOffPeaceful,
    DaemonCommand.Restart,
    DaemonCommand.RestartPeaceful,
    DaemonCommand.SetForceShutdown,
    DaemonCommand.SetPeacefulShutdown,
}

# The shutdowns an andes host makes of each off command (469 is both
# DaemonOn and DaemonOffPeaceful in htcondor2: HTCondor's DAEMON_OFF_PEACEFUL).
_OFF_MODES = {
    DaemonCommand.DaemonOff: "graceful",
    DaemonCommand.OffGraceful: "graceful",
    DaemonCommand.DaemonOffFast: "fast",
    DaemonCommand.OffFast: "fast",
    DaemonCommand.OffForce: "fast",
    DaemonCommand.DaemonOffPeaceful: "peaceful",
    DaemonCommand.OffPeaceful: "peaceful",
}

# How each daemon that is no host stops.
_STOPPING = (
    "andes's {what} stops when its process is stopped (SIGTERM: a graceful stop), "
    "or with the pool it belongs to (PersonalPool.stop(), `andes pool down`); only an "
    "execute host (a Machine ad) is turned off by command"
)


def _kind(ad: classad.ClassAd) -> str:
    """The andes daemon a location ad names: ``"schedd"``, ``"startd"`` or
    ``"negotiator"`` (the central manager: collector and negotiator)."""
    if not isinstance(ad, classad.ClassAd):
        raise TypeError(f"the location must be a ClassAd, not {type(ad).__name__}")
    if ad.get("MyAddress") is None:
        raise ValueError("Address not available in location ClassAd.")
    my_type = ad.get("MyType")
    if my_type is None:
        raise ValueError("Daemon type not available in location ClassAd.")
    kinds = {"scheduler": "schedd", "machine": "startd", "slot": "startd", "startd": "startd", "negotiator": "negotiator", "collector": "negotiator"}
    kind = kinds.get(str(my_type).lower())
    if kind is None:
        if str(my_type).lower() == "daemonmaster":
            raise HTCondorException(_NO_MASTER)
        raise ValueError(f"andes has no daemon of MyType {my_type!r}: Scheduler, Machine, Negotiator or Collector")
    return kind


def _session(kind: str, ad: Optional[classad.ClassAd], config: Optional[_PathLike]) -> _Session:
    """A session to the ``kind`` of daemon ``ad`` locates (none: the
    configuration's)."""
    address = None if ad is None else _address(ad.get("MyAddress"))
    return _Session("collector" if kind == "negotiator" else kind, _path(config), address)


def send_command(
    ad: classad.ClassAd,
    dc: DaemonCommand,
    target: Optional[str] = None,
    config: Optional[_PathLike] = None,
) -> None:
    """Sends the daemon ``ad`` locates (an ad ``Collector.locate`` gave)
    the command ``dc`` (``htcondor2.send_command``), as the ``andes``
    commands do: ``Reconfig`` to a schedd, an execute host (a Machine ad) or
    the negotiator (or collector: andes's central manager is both) reads
    its configuration again (``andes reconfig``); ``DaemonOff`` /
    ``OffGraceful``, ``DaemonOffFast`` / ``OffFast`` / ``OffForce`` and
    ``DaemonOffPeaceful`` / ``OffPeaceful`` turn an execute host off that
    way (``andes host off``). Anything else, and ``target`` (the daemon a
    condor_master is to act on), raise an ``HTCondorException`` saying
    what andes does instead. ``config``: the configuration whose keys sign
    the request (none: ``ANDES_CONFIG``'s)."""
    dc = DaemonCommand(dc)
    kind = _kind(ad)
    if target is not None:
        raise HTCondorException(f"send_command(target={target!r}): the target is the daemon a condor_master acts on; {_NO_MASTER}")
    if dc in _MASTER_COMMANDS:
        raise HTCondorException(f"DaemonCommand.{dc.name} is a condor_master's command; {_NO_MASTER}")
    if dc == DaemonCommand.Reconfig:
        path = "/v1/negotiator/reconfig" if kind == "negotiator" else "/v1/reconfig"
        _session(kind, ad, config).command(path, "{}")
        return
    mode = _OFF_MODES[dc]
    if kind != "startd":
        raise HTCondorException(f"DaemonCommand.{dc.name}: " + _STOPPING.format(what=kind))
    _session(kind, ad, config).command("/v1/off", json.dumps({"mode": mode}))


def _slot_number(name: str) -> int:
    """The slot number ``slotN@host``, ``slotN`` or ``N`` names."""
    if not isinstance(name, str):
        raise TypeError(f"slot_name must be a string, not {type(name).__name__}")
    head = name.split("@", 1)[0]
    digits = head[4:] if head.startswith("slot") else head
    if not digits.isdigit() or int(digits) == 0:
        raise ValueError(f"{name!r} is not a slot (expected slotN@host, slotN or N)")
    return int(digits)


class Startd:
    """An execute host's daemon (``htcondor2.Startd``): the one ``location``
    names (an ad ``Collector.locate(DaemonType.Startd)`` gave: its
    ``MyAddress``), else the one the configuration names (as ``andes host``
    finds it). Its commands are an administrator's.

    ``config``: a configuration file to use instead of ``ANDES_CONFIG``.
    """

    def __init__(self, location: Optional[classad.ClassAd] = None, config: Optional[_PathLike] = None) -> None:
        if location is not None:
            if _kind(location) != "startd":
                raise ValueError(f"the location ad is a {location.get('MyType')} ad, not an execute host's (MyType Machine)")
        self._session = _session("startd", location, config)
        self._drain_id: Optional[str] = None

    def drainJobs(
        self,
        drain_type: DrainType = DrainType.Graceful,
        on_completion: CompletionType = CompletionType.Nothing,
        check_expr: Optional[str] = None,
        start_expr: Optional[str] = None,
        reason: Optional[str] = None,
    ) -> str:
        """Drains the host as ``andes drain`` does: it takes no new jobs,
        its running jobs finish (``DrainType.Graceful``: within their
        retirement time) or leave at once, checkpointing where they can
        (``Quick``), and each slot, once empty, is Drained. Returns the
        request id ``cancelDrainJobs`` takes. andes's drain has no hard
        kill (``Fast``: vacate(VacateType.Fast) does it), no check or start
        expression, no reason and no completion but staying drained
        (``CompletionType.Nothing``): asking for one raises an
        ``HTCondorException``."""
        drain_type = DrainType(drain_type)
        on_completion = CompletionType(on_completion)
        if drain_type == DrainType.Fast:
            raise HTCondorException("andes drains gracefully (DrainType.Graceful) or quickly (Quick: jobs checkpoint and leave at once); to hard-kill the jobs, drain, then vacate(VacateType.Fast)")
        if on_completion != CompletionType.Nothing:
            raise HTCondorException(f"CompletionType.{on_completion.name}: an andes host stays drained until cancelDrainJobs (`andes drain --cancel`)")
        for name, value in (("check_expr", check_expr), ("start_expr", start_expr), ("reason", reason)):
            if value is not None:
                raise HTCondorException(f"drainJobs({name}=...): andes's drain takes no {name.replace('_', ' ')}")
        self._session.command("/v1/drain", json.dumps({"fast": drain_type == DrainType.Quick, "cancel": False}))
        self._drain_id = f"drain@{self._session.url}"
        return self._drain_id

    def cancelDrainJobs(self, request_id: Optional[str] = None) -> None:
        """Undoes a drain (``andes drain --cancel``): the host takes jobs
        again. ``request_id``, when given, must be what ``drainJobs`` gave."""
        if request_id is not None and request_id != f"drain@{self._session.url}":
            raise HTCondorException(f"{request_id!r} is no drain request of this host's (drainJobs gives {'drain@' + self._session.url!r})")
        self._session.command("/v1/drain", json.dumps({"fast": False, "cancel": True}))

    def vacate(self, vacate_fast: VacateType = VacateType.Graceful) -> None:
        """Vacates every slot as ``andes vacate`` does: the jobs retire and
        leave (checkpointing where they can), or with ``VacateType.Fast``
        are hard-killed now; they go back to idle in their queues."""
        self._vacate(None, vacate_fast)

    def vacateSlot(self, slot_name: Optional[str] = None, vacate_fast: VacateType = VacateType.Graceful) -> None:
        """Vacates the slot ``slot_name`` (``slotN@host``, ``slotN`` or
        ``N``; none: every slot), as ``vacate`` does."""
        self._vacate(None if slot_name is None else _slot_number(slot_name), vacate_fast)

    def _vacate(self, slot: Optional[int], vacate_fast: Optional[VacateType]) -> None:
        fast = VacateType(VacateType.Graceful if vacate_fast is None else vacate_fast) == VacateType.Fast
        self._session.command("/v1/vacate", json.dumps({"slot": slot, "fast": fast}))

    def rehome(
        self,
        schedd_name: Optional[str] = None,
        schedd_pool: Optional[str] = None,
        timeout: int = 0,
        cancel: bool = False,
        reboot: bool = False,
    ) -> NoReturn:
        """Not in andes: a host serves whichever schedds the pool's
        negotiator matches it with."""
        raise HTCondorException("andes hosts are not homed to a schedd: each serves whichever schedd the negotiator matches it with; move a host to another pool by its COLLECTOR_HOST and `andes reconfig`")

    def history(
        self,
        constraint: Union[str, classad.ExprTree, None] = None,
        projection: list[str] = [],
        match: int = -1,
        since: Union[int, str, classad.ExprTree, None] = None,
    ) -> NoReturn:
        """Not in andes: hosts keep no job history."""
        raise HTCondorException("andes hosts keep no job history: Schedd.history (`andes history`) has every finished job's ad, with the slot it ran on (RemoteHost)")


class Negotiator:
    """The negotiator (``htcondor2.Negotiator``): andes's central manager,
    which is the collector and the negotiator in one. ``location``: an ad
    with its ``MyAddress`` (none: the configuration's collector).

    ``config``: a configuration file to use instead of ``ANDES_CONFIG``.
    """

    def __init__(self, location: Optional[classad.ClassAd] = None, config: Optional[_PathLike] = None) -> None:
        if location is not None and _kind(location) != "negotiator":
            raise ValueError(f"the location ad is a {location.get('MyType')} ad, not a negotiator's or collector's")
        self._session = _session("negotiator", location, config)

    def getPriorities(self, rollup: bool = False) -> list[classad.ClassAd]:
        """One ad per submitter, as ``andes userprio`` lists them: ``Name``,
        ``Priority`` (effective), ``RealPriority``, ``PriorityFactor``,
        ``ResourcesUsed``, ``AccumulatedUsage`` and
        ``WeightedAccumulatedUsage`` (seconds), ``LastUsageTime`` (0:
        never), ``IsAccountingGroup`` (false: andes has no accounting
        groups, so ``rollup`` changes nothing)."""
        if not isinstance(rollup, bool):
            raise TypeError("rollup must be a bool")
        rows = json.loads(self._session.get_json("/v1/negotiator/userprio"))["rows"]
        ads: list[classad.ClassAd] = []
        for r in rows:
            ad = classad.ClassAd()
            ad["Name"] = r["name"]
            ad["Priority"] = float(r["effective_priority"])
            ad["RealPriority"] = float(r["real_priority"])
            ad["PriorityFactor"] = float(r["priority_factor"])
            ad["ResourcesUsed"] = int(r["in_use"])
            ad["AccumulatedUsage"] = float(r["usage_hours"]) * 3600
            ad["WeightedAccumulatedUsage"] = float(r["usage_hours"]) * 3600
            ad["LastUsageTime"] = int(r["last_usage"] or 0)
            ad["IsAccountingGroup"] = False
            ads.append(ad)
        return ads

    def setFactor(self, user: str, factor: float) -> None:
        """Sets the submitter ``user``'s priority factor (1 or more), as
        ``andes userprio -setfactor`` does (an administrator's). andes names
        submitters by owner (``getPriorities`` gives the names), where
        HTCondor writes ``owner@domain``."""
        _check_user(user)
        if isinstance(factor, bool) or not isinstance(factor, (int, float)):
            raise TypeError("factor must be a number")
        if factor < 1:
            raise ValueError("priority factor must be greater than or equal to 1")
        self._session.post_json("/v1/negotiator/setfactor", json.dumps({"submitter": user, "factor": float(factor)}))

    def _refuse(self, what: str) -> NoReturn:
        raise HTCondorException(f"{what}: andes's negotiator sets priority factors only (Negotiator.setFactor, `andes userprio -setfactor`); usage and real priorities follow from what runs")

    def deleteUser(self, user: str) -> NoReturn:
        """Not in andes (see ``setFactor``)."""
        self._refuse("deleteUser")

    def getResourceUsage(self, user: str) -> NoReturn:
        """Not in andes: ``getPriorities`` gives each submitter's slots in use."""
        raise HTCondorException("getResourceUsage: andes's negotiator lists no per-slot usage; getPriorities gives each submitter's ResourcesUsed, and Collector.query(AdType.Startd, 'RemoteOwner =?= \"...\"') the slots")

    def resetAllUsage(self) -> NoReturn:
        """Not in andes (see ``setFactor``)."""
        self._refuse("resetAllUsage")

    def resetUsage(self, user: str) -> NoReturn:
        """Not in andes (see ``setFactor``)."""
        self._refuse("resetUsage")

    def setBeginUsage(self, user: str, when: int) -> NoReturn:
        """Not in andes (see ``setFactor``)."""
        self._refuse("setBeginUsage")

    def setCeiling(self, user: str, ceiling: int) -> NoReturn:
        """Not in andes (see ``setFactor``)."""
        self._refuse("setCeiling")

    def setLastUsage(self, user: str, when: int) -> NoReturn:
        """Not in andes (see ``setFactor``)."""
        self._refuse("setLastUsage")

    def setPriority(self, user: str, priority: float) -> NoReturn:
        """Not in andes (see ``setFactor``)."""
        self._refuse("setPriority")

    def setUsage(self, user: str, usage: float) -> NoReturn:
        """Not in andes (see ``setFactor``)."""
        self._refuse("setUsage")


def _check_user(user: str) -> None:
    if not isinstance(user, str):
        raise TypeError("user must be a string")
    if not user.strip():
        raise ValueError("user must name a submitter, as getPriorities gives it (andes's are owners' names)")


class RemoteParam:
    """Not in andes (``htcondor2.RemoteParam`` reads and sets a daemon's
    configuration over the network): andes's daemons serve no configuration.
    Making one raises an ``HTCondorException`` saying where to read it."""

    def __init__(self, location: classad.ClassAd) -> None:
        raise HTCondorException(
            "andes's daemons serve no configuration over the network: read it where the daemon "
            "runs (andes.param, `andes config-val`; PersonalPool.get_config_val for a personal "
            "pool), change its files there and send DaemonCommand.Reconfig"
        )
