"""The native module (python/src/lib.rs): what the pure-Python modules build on."""

import os
from typing import Optional, Union, final

from .classad import ClassAd as ClassAd
from .classad import ClassAdException as ClassAdException
from .classad import ExprTree as ExprTree

__all__ = [
    "ClassAd",
    "ClassAdException",
    "Config",
    "EventLog",
    "ExprTree",
    "HTCondorException",
    "Session",
    "parse_ads",
    "quote",
    "submit_expand",
    "submit_itemdata",
    "submit_jobs",
    "submit_parts",
    "unquote",
    "user_name",
]

_Path = Union[str, os.PathLike[str]]

class HTCondorException(Exception): ...

@final
class Session:
    def __new__(cls, daemon: str, config: Optional[_Path] = None, address: Optional[str] = None) -> Session: ...
    @property
    def url(self) -> str: ...
    def submit(self, text: str, iwd: str, spool: bool = False) -> tuple[int, int, ClassAd]: ...
    def command(self, path: str, body: str) -> str: ...
    def get_json(self, path: str) -> str: ...
    def post_json(self, path: str, body: str) -> None: ...
    def retrieve(
        self, ids: list[str] = ..., constraint: Optional[str] = None
    ) -> tuple[list[tuple[str, int]], list[tuple[str, str]]]: ...
    def submit_dag(self, dag: _Path, iwd: _Path, options: list[tuple[str, str]] = ...) -> tuple[int, ClassAd]: ...
    def query(
        self,
        constraint: Optional[str] = None,
        projection: list[str] = ...,
        limit: Optional[int] = None,
        ids: list[str] = ...,
        mine: bool = False,
        group_by: Optional[list[str]] = None,
    ) -> list[ClassAd]: ...
    def history(
        self, constraint: Optional[str] = None, projection: list[str] = ..., limit: Optional[int] = None
    ) -> list[ClassAd]: ...
    def change(
        self,
        action: str,
        ids: list[str] = ...,
        constraint: Optional[str] = None,
        reason: Optional[str] = None,
        attr: Optional[str] = None,
        value: Optional[str] = None,
    ) -> tuple[list[str], list[tuple[str, str]]]: ...
    def collector_query(
        self, my_type: Optional[str] = None, constraint: Optional[str] = None, projection: list[str] = ...
    ) -> list[ClassAd]: ...

# An event as the log holds it: type number, cluster, proc, seconds since
# the epoch, HTCondor's event ClassAd, its text in the user log.
_RawEvent = tuple[int, int, int, int, ClassAd, str]

@final
class EventLog:
    def __new__(cls, path: _Path) -> EventLog: ...
    def poll(self) -> list[_RawEvent]: ...

@final
class Config:
    def __new__(cls, config: Optional[_Path] = None, subsystem: Optional[str] = None) -> Config: ...
    def get(self, name: str) -> Optional[str]: ...
    def set(self, name: str, value: str) -> None: ...
    def names(self) -> list[str]: ...
    def set_subsystem(self, subsystem: Optional[str] = None) -> None: ...

def parse_ads(text: str, parser: int = -1) -> list[ClassAd]: ...
def quote(s: str) -> str: ...
def unquote(s: str) -> str: ...
def submit_parts(
    text: str,
) -> tuple[list[tuple[str, str]], Optional[tuple[str, list[str], str, list[str]]]]: ...
def submit_expand(text: str, name: str, iwd: str) -> Optional[str]: ...
def submit_itemdata(text: str, iwd: str) -> Optional[tuple[list[str], list[list[str]]]]: ...
def submit_jobs(
    text: str, iwd: str, cluster: int = 1, qdate: int = 0, owner: Optional[str] = None
) -> tuple[list[ClassAd], list[ClassAd]]: ...
def user_name() -> Optional[str]: ...
