import enum
import os
from typing import Any, Callable, Iterable, Iterator, Mapping, MutableMapping, Optional, Union

from . import classad as classad
from . import personal as personal
from .classad import ClassAd, ExprTree

class HTCondorException(Exception): ...

class JobAction(enum.IntEnum):
    Hold = 1
    Release = 2
    Remove = 3
    RemoveX = 4
    Vacate = 5
    VacateFast = 6
    Suspend = 8
    Continue = 9

class AdType(enum.IntEnum):
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
    def from_MyType(my_type: str) -> Optional[AdType]: ...

class DaemonType(enum.IntEnum):
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
    Default = 0x00
    AutoCluster = 0x01
    GroupBy = 0x02
    DefaultMyJobsOnly = 0x04
    SummaryOnly = 0x08
    IncludeClusterAd = 0x10
    IncludeJobsetAds = 0x20

class TransactionFlag(enum.IntFlag):
    Default = 0
    NonDurable = 1
    SetDirty = 4
    ShouldLog = 8

class DrainType(enum.IntEnum):
    Graceful = 0
    Quick = 10
    Fast = 20

class VacateType(enum.IntEnum):
    Graceful = 0
    Fast = 1

class CompletionType(enum.IntEnum):
    Nothing = 0
    Resume = 1
    Exit = 2
    Restart = 3
    Reconfig = 4

class CredType(enum.IntEnum):
    Password = 0x24
    Kerberos = 0x20
    OAuth = 0x28

class DaemonCommand(enum.IntEnum):
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

AdTypes = AdType
DaemonTypes = DaemonType
QueryOpts = QueryOpt
TransactionFlags = TransactionFlag
DrainTypes = DrainType
CredTypes = CredType
DaemonCommands = DaemonCommand

class JobStatus(enum.IntEnum):
    IDLE = 1
    RUNNING = 2
    REMOVED = 3
    COMPLETED = 4
    HELD = 5
    TRANSFERRING_OUTPUT = 6
    SUSPENDED = 7

class JobEventType(enum.IntEnum):
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
    REMOTE_ERROR = 21
    JOB_DISCONNECTED = 22
    JOB_RECONNECTED = 23
    JOB_RECONNECT_FAILED = 24
    JOB_AD_INFORMATION = 28
    ATTRIBUTE_UPDATE = 33
    CLUSTER_SUBMIT = 35
    CLUSTER_REMOVE = 36

JobSpec = Union[str, int, list[str], ExprTree]
PathLike = Union[str, os.PathLike[str]]

class SubmitResult:
    def cluster(self) -> int: ...
    def first_proc(self) -> int: ...
    def num_procs(self) -> int: ...
    def clusterad(self) -> ClassAd: ...

class Submit:
    def __init__(
        self, input: Union[str, Mapping[str, Any], None] = None, queue: Optional[str] = None, **kwargs: Any
    ) -> None: ...
    def __getitem__(self, name: str) -> str: ...
    def __setitem__(self, name: str, value: Any) -> None: ...
    def __delitem__(self, name: str) -> None: ...
    def __iter__(self) -> Iterator[str]: ...
    def __len__(self) -> int: ...
    def keys(self) -> Any: ...
    def items(self) -> Any: ...
    def get(self, name: str, default: Any = None) -> Any: ...
    def getQArgs(self) -> str: ...
    def setQArgs(self, args: str) -> None: ...
    def expand(self, attr: str) -> str: ...
    def itemdata(self, qargs: Optional[str] = None) -> Optional[Iterator[dict[str, str]]]: ...
    def jobs(
        self,
        count: int = 0,
        itemdata: Optional[Iterable[Union[str, Mapping[str, Any]]]] = None,
        clusterid: int = 1,
        procid: int = 0,
        qdate: int = 0,
        owner: str = "",
    ) -> Iterator[ClassAd]: ...
    def procs(
        self,
        count: int = 0,
        itemdata: Optional[Iterable[Union[str, Mapping[str, Any]]]] = None,
        clusterid: int = 1,
        procid: int = 0,
        qdate: int = 0,
        owner: str = "",
    ) -> Iterator[ClassAd]: ...
    @classmethod
    def from_dag(cls, filename: str, options: Optional[Mapping[str, Any]] = None) -> "Submit": ...

class Schedd:
    def __init__(self, location_ad: Optional[ClassAd] = None, config: Optional[PathLike] = None) -> None: ...
    def submit(
        self,
        description: Union[Submit, str],
        count: int = 0,
        spool: bool = False,
        itemdata: Optional[Iterable[Union[str, Mapping[str, Any]]]] = None,
        queue: Optional[str] = None,
    ) -> SubmitResult: ...
    def query(
        self,
        constraint: Union[str, ExprTree, bool] = "true",
        projection: list[str] = [],
        callback: Optional[Callable[[ClassAd], Any]] = None,
        limit: int = -1,
        opts: Union[QueryOpt, int, None] = QueryOpt.Default,
    ) -> list[Any]: ...
    def history(
        self,
        constraint: Union[str, ExprTree, None] = None,
        projection: list[str] = [],
        match: int = -1,
        since: Union[int, str, ExprTree, None] = None,
        limit: Optional[int] = None,
    ) -> list[ClassAd]: ...
    def act(self, action: JobAction, job_spec: JobSpec, reason: Optional[str] = None) -> ClassAd: ...
    def edit(self, job_spec: JobSpec, attr: str, value: Union[str, ExprTree, int, float], flags: Any = None) -> int: ...
    def spool(self, result: SubmitResult) -> None: ...
    def retrieve(self, job_spec: JobSpec) -> None: ...
    def reschedule(self) -> None: ...

class Collector:
    default: bool
    def __init__(
        self, pool: Union[str, ClassAd, list[str], tuple[str, ...], None] = None, config: Optional[PathLike] = None
    ) -> None: ...
    def locate(self, daemon_type: DaemonType, name: Optional[str] = None) -> Optional[ClassAd]: ...
    def locateAll(self, daemon_type: DaemonType) -> list[ClassAd]: ...
    def query(
        self,
        ad_type: AdType = AdType.Any,
        constraint: Union[str, ExprTree, None] = None,
        projection: Optional[list[str]] = None,
        statistics: Optional[str] = None,
    ) -> list[ClassAd]: ...

class JobEvent(Mapping[str, Any]):
    @property
    def type(self) -> JobEventType: ...
    @property
    def cluster(self) -> int: ...
    @property
    def proc(self) -> int: ...
    @property
    def timestamp(self) -> int: ...
    def __getitem__(self, key: str) -> Any: ...
    def __iter__(self) -> Iterator[str]: ...
    def __len__(self) -> int: ...

class JobEventLog:
    def __init__(self, filename: PathLike) -> None: ...
    def events(self, stop_after: Optional[float] = None) -> JobEventLog: ...
    def __iter__(self) -> JobEventLog: ...
    def __next__(self) -> JobEvent: ...
    def close(self) -> None: ...
    def __enter__(self) -> JobEventLog: ...
    def __exit__(self, *exc: Any) -> bool: ...

class _Param(MutableMapping[str, str]):
    def __getitem__(self, key: str) -> str: ...
    def __setitem__(self, key: str, value: str) -> None: ...
    def __delitem__(self, key: str) -> None: ...
    def __iter__(self) -> Iterator[str]: ...
    def __len__(self) -> int: ...

param: _Param

def reload_config(root_config_file: Optional[PathLike] = None) -> None: ...
def set_subsystem(name: str, daemon_type: SubsystemType = SubsystemType.Auto) -> None: ...

def send_command(
    ad: ClassAd, dc: DaemonCommand, target: Optional[str] = None, config: Optional[PathLike] = None
) -> None: ...

class Startd:
    def __init__(self, location: Optional[ClassAd] = None, config: Optional[PathLike] = None) -> None: ...
    def drainJobs(
        self,
        drain_type: DrainType = DrainType.Graceful,
        on_completion: CompletionType = CompletionType.Nothing,
        check_expr: Optional[str] = None,
        start_expr: Optional[str] = None,
        reason: Optional[str] = None,
    ) -> str: ...
    def cancelDrainJobs(self, request_id: Optional[str] = None) -> None: ...
    def vacate(self, vacate_fast: VacateType = VacateType.Graceful) -> None: ...
    def vacateSlot(self, slot_name: Optional[str] = None, vacate_fast: VacateType = VacateType.Graceful) -> None: ...
    def rehome(
        self,
        schedd_name: Optional[str] = None,
        schedd_pool: Optional[str] = None,
        timeout: int = 0,
        cancel: bool = False,
        reboot: bool = False,
    ) -> None: ...
    def history(
        self,
        constraint: Union[str, ExprTree, None] = None,
        projection: list[str] = [],
        match: int = -1,
        since: Union[int, str, ExprTree, None] = None,
    ) -> list[ClassAd]: ...

class Negotiator:
    def __init__(self, location: Optional[ClassAd] = None, config: Optional[PathLike] = None) -> None: ...
    def getPriorities(self, rollup: bool = False) -> list[ClassAd]: ...
    def setFactor(self, user: str, factor: float) -> None: ...
    def deleteUser(self, user: str) -> None: ...
    def getResourceUsage(self, user: str) -> list[ClassAd]: ...
    def resetAllUsage(self) -> None: ...
    def resetUsage(self, user: str) -> None: ...
    def setBeginUsage(self, user: str, when: int) -> None: ...
    def setCeiling(self, user: str, ceiling: int) -> None: ...
    def setLastUsage(self, user: str, when: int) -> None: ...
    def setPriority(self, user: str, priority: float) -> None: ...
    def setUsage(self, user: str, usage: float) -> None: ...

class RemoteParam:
    def __init__(self, location: ClassAd) -> None: ...

from . import dags as dags

def alias_htcondor() -> None:
    """Makes ``import htcondor2``/``htcondor`` give andes, ``htcondor2.dags``
    andes.dags and ``classad2``/``classad`` andes.classad, for tools written
    for HTCondor's bindings; call it before importing them."""

