import enum
import os
import pathlib
from typing import Literal, Mapping, Optional, Union

from . import Collector, Schedd

__all__ = ["PersonalPool", "PersonalPoolState"]

class PersonalPoolState(str, enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZED = "INITIALIZED"
    STARTING = "STARTING"
    READY = "READY"
    STOPPING = "STOPPING"
    STOPPED = "STOPPED"

class PersonalPool:
    _state: PersonalPoolState
    local_dir: str
    config: Optional[str]
    slots: Optional[int]
    plaintext: bool
    ready_timeout: float
    def __init__(
        self,
        local_dir: Union[str, os.PathLike[str], None] = None,
        slots: Optional[int] = None,
        plaintext: bool = False,
        ready_timeout: float = 120,
        config: Optional[Mapping[str, Optional[str]]] = None,
        raw_config: Optional[str] = None,
        detach: bool = False,
    ) -> None: ...
    @property
    def state(self) -> PersonalPoolState: ...
    @property
    def config_file(self) -> pathlib.Path: ...
    def initialize(self) -> PersonalPool: ...
    def start(self) -> PersonalPool: ...
    def stop(self, timeout: float = 60) -> PersonalPool: ...
    def detach(self) -> PersonalPool: ...
    @classmethod
    def attach(cls, local_dir: Union[str, os.PathLike[str], None] = None) -> PersonalPool: ...
    def get_config_val(self, macro: str, default: Optional[str] = None) -> str: ...
    @property
    def schedd(self) -> Schedd: ...
    @property
    def collector(self) -> Collector: ...
    def use_config(self) -> PersonalPool: ...
    def __enter__(self) -> PersonalPool: ...
    def __exit__(self, *exc: object) -> Literal[False]: ...
