import enum
import os
from typing import (
    Any,
    Callable,
    Iterable,
    Iterator,
    Literal,
    Mapping,
    MutableMapping,
    Optional,
    TypeVar,
    Union,
    overload,
)

from . import classad as classad
from . import dags as dags
from . import personal as personal
from ._admin import Negotiator as Negotiator
from ._admin import RemoteParam as RemoteParam
from ._admin import Startd as Startd
from ._admin import send_command as send_command
from ._andes import Config as _Config
from ._andes import HTCondorException as HTCondorException
from ._andes import Session as _Session
from ._enums import AdType as AdType
from ._enums import AdTypes as AdTypes
from ._enums import CompletionType as CompletionType
from ._enums import CredType as CredType
from ._enums import CredTypes as CredTypes
from ._enums import DaemonCommand as DaemonCommand
from ._enums import DaemonCommands as DaemonCommands
from ._enums import DaemonType as DaemonType
from ._enums import DaemonTypes as DaemonTypes
from ._enums import DrainType as DrainType
from ._enums import DrainTypes as DrainTypes
from ._enums import JobAction as JobAction
from ._enums import QueryOpt as QueryOpt
from ._enums import QueryOpts as QueryOpts
from ._enums import SubsystemType as SubsystemType
from ._enums import TransactionFlag as TransactionFlag
from ._enums import TransactionFlags as TransactionFlags
from ._enums import VacateType as VacateType
from .alias import alias_htcondor as alias_htcondor
from .classad import ClassAd, ExprTree

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

_T = TypeVar("_T")

# A job id "C.P", a cluster "C" or int, a list of ids, or a constraint (an
# ExprTree, or any other string).
_JobSpec = Union[str, int, ExprTree, list[str], tuple[str, ...]]
_PathLike = Union[str, os.PathLike[str]]
# Schedd.submit's and Submit.jobs's items: strings, or dicts of the
# variables by name.
_ItemData = Iterable[Union[str, Mapping[str, object]]]

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

class SubmitResult:
    def __init__(self, cluster: int, num_procs: int, cluster_ad: ClassAd, spooled: bool = False) -> None: ...
    def cluster(self) -> int: ...
    def first_proc(self) -> int: ...
    def num_procs(self) -> int: ...
    def clusterad(self) -> ClassAd: ...

class Submit(MutableMapping[str, str]):
    def __init__(
        self, input: Union[str, Mapping[str, object], None] = None, queue: Optional[str] = None, **kwargs: object
    ) -> None: ...
    def __getitem__(self, name: str) -> str: ...
    # Any value is stored as its str (a bool as true or false).
    def __setitem__(self, name: str, value: object) -> None: ...
    def __delitem__(self, name: str) -> None: ...
    def __iter__(self) -> Iterator[str]: ...
    def __len__(self) -> int: ...
    @classmethod
    def from_dag(cls, filename: _PathLike, options: Optional[Mapping[str, object]] = None) -> Submit: ...
    def getQArgs(self) -> str: ...
    def setQArgs(self, args: str) -> None: ...
    def expand(self, attr: str) -> str: ...
    def itemdata(self, qargs: Optional[str] = None) -> Optional[Iterator[dict[str, str]]]: ...
    def jobs(
        self,
        count: int = 0,
        itemdata: Optional[_ItemData] = None,
        clusterid: int = 1,
        procid: int = 0,
        qdate: int = 0,
        owner: str = "",
    ) -> Iterator[ClassAd]: ...
    def procs(
        self,
        count: int = 0,
        itemdata: Optional[_ItemData] = None,
        clusterid: int = 1,
        procid: int = 0,
        qdate: int = 0,
        owner: str = "",
    ) -> Iterator[ClassAd]: ...
    # The submit file Schedd.submit sends.
    def _text(self, count: int = 0, itemdata: Optional[_ItemData] = None, queue: Optional[str] = None) -> str: ...

_Constraint = Union[str, ExprTree, bool, None]

class Schedd:
    _session: _Session
    def __init__(self, location_ad: Optional[ClassAd] = None, config: Optional[_PathLike] = None) -> None: ...
    def submit(
        self,
        description: Union[Submit, str],
        count: int = 0,
        spool: bool = False,
        itemdata: Optional[_ItemData] = None,
        queue: Optional[str] = None,
    ) -> SubmitResult: ...
    def spool(self, result: SubmitResult) -> None: ...
    def retrieve(self, job_spec: _JobSpec) -> None: ...
    def reschedule(self) -> None: ...
    # The ads, or what callback maps them to (the None it gives left out).
    @overload
    def query(
        self,
        constraint: _Constraint = "true",
        projection: list[str] = [],
        callback: None = None,
        limit: int = -1,
        opts: Union[QueryOpt, int, None] = QueryOpt.Default,
    ) -> list[ClassAd]: ...
    @overload
    def query(
        self,
        constraint: _Constraint,
        projection: list[str],
        callback: Callable[[ClassAd], Optional[_T]],
        limit: int = -1,
        opts: Union[QueryOpt, int, None] = QueryOpt.Default,
    ) -> list[_T]: ...
    @overload
    def query(
        self,
        constraint: _Constraint = "true",
        projection: list[str] = [],
        *,
        callback: Callable[[ClassAd], Optional[_T]],
        limit: int = -1,
        opts: Union[QueryOpt, int, None] = QueryOpt.Default,
    ) -> list[_T]: ...
    def history(
        self,
        constraint: _Constraint = None,
        projection: list[str] = [],
        match: int = -1,
        since: Union[int, str, ExprTree, None] = None,
        limit: Optional[int] = None,
    ) -> list[ClassAd]: ...
    def act(self, action: JobAction, job_spec: _JobSpec, reason: Optional[str] = None) -> ClassAd: ...
    def edit(
        self, job_spec: _JobSpec, attr: str, value: Union[str, ExprTree, int, float], flags: object = None
    ) -> int: ...

class Collector:
    default: bool
    _session: _Session
    def __init__(
        self, pool: Union[str, ClassAd, list[str], tuple[str, ...], None] = None, config: Optional[_PathLike] = None
    ) -> None: ...
    def query(
        self,
        ad_type: AdType = AdType.Any,
        constraint: _Constraint = None,
        projection: Optional[list[str]] = None,
        statistics: Optional[str] = None,
    ) -> list[ClassAd]: ...
    # None: no daemon of that name (or, for a collector given by address
    # and no name, none the collector knows).
    def locate(self, daemon_type: DaemonType, name: Optional[str] = None) -> Optional[ClassAd]: ...
    def locateAll(self, daemon_type: DaemonType) -> list[ClassAd]: ...

class JobEvent(Mapping[str, Any]):
    def __init__(
        self, number: int, cluster: int, proc: int, timestamp: int, ad: ClassAd, text: Optional[str] = None
    ) -> None: ...
    # An int when the log holds an event number JobEventType has no member for.
    @property
    def type(self) -> Union[JobEventType, int]: ...
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
    def __init__(self, filename: _PathLike) -> None: ...
    def events(self, stop_after: Optional[float] = None) -> JobEventLog: ...
    def __iter__(self) -> JobEventLog: ...
    def __next__(self) -> JobEvent: ...
    def close(self) -> None: ...
    def __enter__(self) -> JobEventLog: ...
    def __exit__(self, *exc: object) -> Literal[False]: ...

def _path(p: Optional[_PathLike]) -> Optional[str]: ...
def _user_name() -> Optional[str]: ...
def _address(addr: str) -> str: ...

class _Param(MutableMapping[str, str]):
    # The file reload_config was given, the subsystem set_subsystem set, and
    # the table, read when first used.
    _root: Optional[str]
    _subsystem: Optional[str]
    _table: Optional[_Config]
    def __getitem__(self, key: str) -> str: ...
    def __setitem__(self, key: str, value: str) -> None: ...
    def __delitem__(self, key: str) -> None: ...
    def __iter__(self) -> Iterator[str]: ...
    def __len__(self) -> int: ...

param: _Param

def reload_config(root_config_file: Optional[_PathLike] = None) -> None: ...
def set_subsystem(name: str, daemon_type: SubsystemType = SubsystemType.Auto) -> None: ...
