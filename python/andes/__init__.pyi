import enum
import os
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Union

from . import classad as classad
from . import personal as personal
from .classad import ClassAd, ExprTree

class HTCondorException(Exception): ...

class JobAction(enum.IntEnum):
    Hold = 0
    Release = 1
    Remove = 2
    RemoveX = 3
    Vacate = 4
    VacateFast = 5
    Suspend = 6
    Continue = 7

class AdType(enum.IntEnum):
    Any = 0
    Startd = 1
    Schedd = 2
    Submitter = 3
    Negotiator = 4
    Slot = 5

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
    def __init__(self, input: Union[str, Mapping[str, Any], None] = None, **kwargs: Any) -> None: ...
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
    @classmethod
    def from_dag(cls, filename: str, options: Optional[Mapping[str, Any]] = None) -> "Submit": ...

class Schedd:
    def __init__(self, location_ad: None = None, config: Optional[PathLike] = None) -> None: ...
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
        opts: Any = None,
    ) -> list[Any]: ...
    def history(
        self,
        constraint: Union[str, ExprTree, None] = None,
        projection: list[str] = [],
        match: int = -1,
        since: Union[int, str, ExprTree, None] = None,
    ) -> list[ClassAd]: ...
    def act(self, action: JobAction, job_spec: JobSpec, reason: Optional[str] = None) -> ClassAd: ...
    def edit(self, job_spec: JobSpec, attr: str, value: Union[str, ExprTree, int, float], flags: Any = None) -> int: ...

class Collector:
    def __init__(self, pool: None = None, config: Optional[PathLike] = None) -> None: ...
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
    def events(self, stop_after: Optional[float] = None) -> Iterator[JobEvent]: ...
    def __iter__(self) -> Iterator[JobEvent]: ...
    def close(self) -> None: ...

from . import dags as dags
