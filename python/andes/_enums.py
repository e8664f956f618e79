"""htcondor2's enumerations, with its member names and values, each also
under the plural name htcondor2 exports it by (``AdTypes`` is ``AdType``).

The values are HTCondor's: a script that stores or compares them as numbers
sees the numbers it saw with htcondor2.
"""

import enum
from typing import Optional


class AdType(enum.IntEnum):
    """Which ads ``Collector.query`` asks for (``htcondor2.AdType``). andes's
    collector holds slot ads (``Startd``, ``Slot``: ``MyType`` ``Machine``),
    ``Schedd``, ``Submitter`` and ``Negotiator`` ads; a query for another
    type finds none."""

    Startd = 0
    Schedd = 1
    Master = 2
    StartdPrivate = 5
    Submitter = 6
    Collector = 7
    License = 8
    Any = 10
    Negotiator = 13
    HAD = 14
    Generic = 15
    Credd = 16
    Grid = 19
    Placementd = 20
    Defrag = 22
    Accounting = 23
    Slot = 24
    StartDaemon = 25

    @staticmethod
    def from_MyType(my_type: str) -> Optional["AdType"]:
        """The ad type whose ads have ``MyType == my_type`` (``None``: none)."""
        return _MY_TYPE_TO_AD_TYPE.get(my_type)


# htcondor2's table, AdType.from_MyType's (Slot and Startd share "Machine":
# the later, Slot, wins, as in htcondor2).
_AD_TYPE_TO_MY_TYPE = {
    AdType.Startd: "Machine",
    AdType.Schedd: "Scheduler",
    AdType.Master: "DaemonMaster",
    AdType.StartdPrivate: "MachinePrivate",
    AdType.Submitter: "Submitter",
    AdType.Collector: "Collector",
    AdType.License: "License",
    AdType.Any: "Any",
    AdType.Negotiator: "Negotiator",
    AdType.HAD: "HAD",
    AdType.Generic: "Generic",
    AdType.Credd: "CredD",
    AdType.Grid: "Grid",
    AdType.Placementd: "PlacementD",
    AdType.Accounting: "Accounting",
    AdType.Slot: "Machine",
    AdType.StartDaemon: "StartD",
}
_MY_TYPE_TO_AD_TYPE = {v: k for k, v in _AD_TYPE_TO_MY_TYPE.items()}


class DaemonType(enum.IntEnum):
    """Kinds of daemon, for ``Collector.locate`` (``htcondor2.DaemonType``)."""

    none = 0
    Any = 1
    Master = 2
    Schedd = 3
    Startd = 4
    Collector = 5
    Negotiator = 6
    Credd = 13
    Placementd = 15
    HAD = 17
    Generic = 18


class QueryOpt(enum.IntFlag):
    """Options of ``Schedd.query`` (``htcondor2.QueryOpt``)."""

    Default = 0x00
    AutoCluster = 0x01
    GroupBy = 0x02
    DefaultMyJobsOnly = 0x04
    SummaryOnly = 0x08
    IncludeClusterAd = 0x10
    IncludeJobsetAds = 0x20


class TransactionFlag(enum.IntFlag):
    """Flags of a queue transaction (``htcondor2.TransactionFlag``)."""

    Default = 0
    NonDurable = 1 << 0
    SetDirty = 1 << 2
    ShouldLog = 1 << 3


class DrainType(enum.IntEnum):
    """How a startd drains (``htcondor2.DrainType``)."""

    Graceful = 0
    Quick = 10
    Fast = 20


class VacateType(enum.IntEnum):
    """How a startd vacates its jobs (``htcondor2.VacateType``): Graceful
    lets them retire and leave, Fast hard-kills them."""

    Graceful = 0
    Fast = 1


class CompletionType(enum.IntEnum):
    """What a startd does once drained (``htcondor2.CompletionType``)."""

    Nothing = 0
    Resume = 1
    Exit = 2
    Restart = 3
    Reconfig = 4


class CredType(enum.IntEnum):
    """Kinds of credential a credd holds (``htcondor2.CredType``)."""

    Password = 0x24
    Kerberos = 0x20
    OAuth = 0x28


class DaemonCommand(enum.IntEnum):
    """Commands to daemons (``htcondor2.DaemonCommand``; ``DaemonOffPeaceful``
    is ``DaemonOn``'s number there too)."""

    DaemonOn = 469
    DaemonOff = 467
    DaemonOffFast = 468
    DaemonOffPeaceful = 469
    DaemonsOn = 483
    DaemonsOff = 454
    DaemonsOffFast = 461
    DaemonsOffPeaceful = 484
    OffFast = 60006
    OffForce = 60042
    OffGraceful = 60005
    OffPeaceful = 60015
    Reconfig = 60004
    Restart = 453
    RestartPeaceful = 485
    SetForceShutdown = 60041
    SetPeacefulShutdown = 60016


class SubsystemType(enum.IntEnum):
    """Kinds of subsystem, for ``set_subsystem`` (``htcondor2.SubsystemType``)."""

    Master = 1
    Collector = 2
    Negotiator = 3
    Schedd = 4
    Shadow = 5
    Startd = 6
    Starter = 7
    GAHP = 8
    Dagman = 9
    SharedPort = 10
    Daemon = 11
    Tool = 12
    Submit = 13
    Job = 14
    Auto = 15


class JobAction(enum.IntEnum):
    """What ``Schedd.act`` does to jobs (``htcondor2.JobAction``)."""

    Hold = 1
    Release = 2
    Remove = 3
    RemoveX = 4
    Vacate = 5
    VacateFast = 6
    Suspend = 8
    Continue = 9


# htcondor2's plural names for the same enumerations.
AdTypes = AdType
DaemonTypes = DaemonType
QueryOpts = QueryOpt
TransactionFlags = TransactionFlag
DrainTypes = DrainType
CredTypes = CredType
DaemonCommands = DaemonCommand
