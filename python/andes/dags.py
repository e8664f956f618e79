"""DAGs from Python, in the shape of ``htcondor2.dags`` (the htcondor-dags API).

A :class:`DAG` holds *layers* of nodes: one layer is one submit description
run once per entry of its ``vars`` (each entry a node), and layers are joined
by *edges* (every parent node to every child node by default). Describe the
workflow, then :func:`write_dag` writes the DAG file and each layer's submit
file into a directory; ``andes.Submit.from_dag`` and ``Schedd.submit`` queue it::

    dag = dags.DAG()
    tiles = dag.layer(name="tile", submit_description=tile_sub,
                      vars=[{"x": str(x)} for x in range(4)])
    tiles.child_layer(name="montage", submit_description=montage_sub)
    dag_file = dags.write_dag(dag, "mandelbrot-dag")
    schedd.submit(andes.Submit.from_dag(str(dag_file), {"force": 1}))

Nodes are named ``LAYER:INDEX`` (:class:`SimpleFormatter`). A sub-DAG
(:meth:`DAG.subdag`) runs under a DAGMan job of its own, as a node.
"""

from __future__ import annotations

import collections.abc
import enum
import os
import pathlib
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Optional, TypeVar, Union

if TYPE_CHECKING:
    from . import Submit

__all__ = [
    "DAG",
    "NodeLayer",
    "SubDAG",
    "FinalNode",
    "Script",
    "DAGAbortCondition",
    "DotConfig",
    "NodeStatusFile",
    "ManyToMany",
    "OneToOne",
    "Grouper",
    "Slicer",
    "SimpleFormatter",
    "WalkOrder",
    "write_dag",
    "DEFAULT_DAG_FILE_NAME",
]

DEFAULT_DAG_FILE_NAME = "dagfile.dag"
CONFIG_FILE_NAME = "dagman.config"

_PathLike = Union[str, os.PathLike[str]]
# What a layer runs: a Submit (or the text of a submit file), or the path
# of a submit file of its own.
_SubmitDescription = Union["Submit", str, pathlib.Path, None]
# Groups of (parent node indices, child node indices) an edge joins.
_EdgeGroups = Iterator[tuple[tuple[int, ...], tuple[int, ...]]]



def _holds(nodes: Mapping[str, object], node: object) -> bool:
    """Whether ``node`` itself (not merely a node of its name) is among ``nodes``;
    never true of what is not a node (``None in dag`` was)."""
    name = getattr(node, "name", None)
    return isinstance(name, str) and nodes.get(name) is node

class WalkOrder(enum.Enum):
    """How :meth:`DAG.walk` visits nodes."""

    DEPTH_FIRST = "DEPTH"
    BREADTH_FIRST = "BREADTH"


class Script:
    """A PRE or POST script: ``executable`` with ``arguments``; with
    ``retry``, an exit of ``retry_status`` runs it again after ``retry_delay``
    seconds (``DEFER``)."""

    def __init__(
        self,
        executable: _PathLike,
        arguments: Optional[Iterable[object]] = None,
        retry: bool = False,
        retry_status: int = 1,
        retry_delay: int = 0,
    ) -> None:
        self.executable = str(executable)
        self.arguments = [str(a) for a in (arguments or [])]
        self.retry = retry
        self.retry_status = int(retry_status)
        self.retry_delay = int(retry_delay)

    def __repr__(self) -> str:
        return f"Script(executable={self.executable!r}, arguments={self.arguments!r})"


class DAGAbortCondition:
    """``ABORT-DAG-ON``: the DAG stops when a node exits ``node_exit_value``,
    and exits ``dag_return_value`` (default: the node's)."""

    def __init__(self, node_exit_value: int, dag_return_value: Optional[int] = None) -> None:
        self.node_exit_value = int(node_exit_value)
        self.dag_return_value = None if dag_return_value is None else int(dag_return_value)


class DotConfig:
    """The ``DOT`` command: a Graphviz file of the DAG."""

    def __init__(
        self, path: _PathLike, update: bool = False, overwrite: bool = True, include_file: Optional[_PathLike] = None
    ) -> None:
        self.path = pathlib.Path(path)
        self.update = update
        self.overwrite = overwrite
        self.include_file = None if include_file is None else pathlib.Path(include_file)


class NodeStatusFile:
    """The ``NODE_STATUS_FILE`` command."""

    def __init__(self, path: _PathLike, update_time: Optional[int] = None, always_update: bool = False) -> None:
        self.path = pathlib.Path(path)
        self.update_time = update_time
        self.always_update = always_update


class SimpleFormatter:
    """Names the nodes of a layer ``NAME{separator}{index}``."""

    def __init__(self, separator: str = ":", index_format: str = "{:d}", offset: int = 0) -> None:
        self.separator = separator
        self.index_format = index_format
        self.offset = offset

    def generate(self, layer_name: str, node_index: int) -> str:
        return f"{layer_name}{self.separator}{self.index_format.format(node_index + self.offset)}"

    def parse(self, node_name: str) -> tuple[str, int]:
        layer, _, index = node_name.rpartition(self.separator)
        return layer, int(index) - self.offset


# ---------------------------------------------------------------- edges


class BaseEdge:
    """How the nodes of a parent layer depend on those of a child layer:
    :meth:`get_edges` gives groups ``(parent indices, child indices)``."""

    def get_edges(self, parent: BaseNode, child: BaseNode) -> _EdgeGroups:
        raise NotImplementedError


class ManyToMany(BaseEdge):
    """Every child node depends on every parent node (the default)."""

    def get_edges(self, parent: BaseNode, child: BaseNode) -> _EdgeGroups:
        yield tuple(range(len(parent))), tuple(range(len(child)))


class OneToOne(BaseEdge):
    """Child node i depends on parent node i (the layers are the same size)."""

    def get_edges(self, parent: BaseNode, child: BaseNode) -> _EdgeGroups:
        if len(parent) != len(child):
            raise ValueError(
                f"OneToOne: {parent.name} has {len(parent)} nodes and {child.name} {len(child)}"
            )
        for i in range(len(parent)):
            yield (i,), (i,)


class Grouper(BaseEdge):
    """The parent nodes in groups of ``parent_chunk_size``, the children in
    groups of ``child_chunk_size``: child group i depends on parent group i."""

    def __init__(self, parent_chunk_size: int = 1, child_chunk_size: int = 1) -> None:
        if parent_chunk_size < 1 or child_chunk_size < 1:
            raise ValueError("Grouper: chunk sizes are at least 1")
        self.parent_chunk_size = parent_chunk_size
        self.child_chunk_size = child_chunk_size

    def get_edges(self, parent: BaseNode, child: BaseNode) -> _EdgeGroups:
        p, c = len(parent), len(child)
        if p % self.parent_chunk_size or c % self.child_chunk_size:
            raise ValueError("Grouper: the chunk sizes must divide the layers' sizes")
        if p // self.parent_chunk_size != c // self.child_chunk_size:
            raise ValueError("Grouper: the layers make different numbers of groups")
        for g in range(p // self.parent_chunk_size):
            ps = tuple(range(g * self.parent_chunk_size, (g + 1) * self.parent_chunk_size))
            cs = tuple(range(g * self.child_chunk_size, (g + 1) * self.child_chunk_size))
            yield ps, cs


class Slicer(BaseEdge):
    """The parent nodes ``parent_slice`` picks, each child node ``child_slice``
    picks depending on them all."""

    def __init__(self, parent_slice: slice = slice(None), child_slice: slice = slice(None)) -> None:
        self.parent_slice = parent_slice
        self.child_slice = child_slice

    def get_edges(self, parent: BaseNode, child: BaseNode) -> _EdgeGroups:
        ps = tuple(range(len(parent)))[self.parent_slice]
        cs = tuple(range(len(child)))[self.child_slice]
        if ps and cs:
            yield ps, cs


# ---------------------------------------------------------------- nodes

_N = TypeVar("_N", bound="BaseNode")
# A node, or nodes (a layer's children or parents, a DAG's roots, ...).
_NodeArg = Union["BaseNode", Iterable["BaseNode"]]
# What DAG._add adds: a layer or a sub-DAG.
_Added = TypeVar("_Added", "NodeLayer", "SubDAG")


class BaseNode:
    """What every kind of node has: its name, its scripts, retries and the
    rest of a DAG node's commands, and its place among the others."""

    def __init__(
        self,
        dag: DAG,
        *,
        name: str,
        dir: Optional[_PathLike] = None,
        noop: bool = False,
        done: bool = False,
        retries: Optional[int] = None,
        retry_unless_exit: Optional[int] = None,
        pre: Optional[Script] = None,
        pre_skip_exit_code: Optional[int] = None,
        post: Optional[Script] = None,
        priority: int = 0,
        category: Optional[str] = None,
        abort: Optional[DAGAbortCondition] = None,
    ) -> None:
        if not name or any(c.isspace() for c in name) or "+" in name:
            raise ValueError(f"{name!r}: a node name has no white space and no +")
        self._dag = dag
        self.name = name
        self.dir = None if dir is None else pathlib.Path(dir)
        self.noop = noop
        self.done = done
        self.retries = retries
        self.retry_unless_exit = retry_unless_exit
        self.pre = pre
        self.pre_skip_exit_code = pre_skip_exit_code
        self.post = post
        self.priority = priority
        self.category = category
        self.abort = abort

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    def __len__(self) -> int:
        return 1

    # Edges live in the DAG: a node only asks it.
    @property
    def parents(self) -> _Nodes:
        return self._dag._parents_of(self)

    @property
    def children(self) -> _Nodes:
        return self._dag._children_of(self)

    def add_children(self: _N, *nodes: _NodeArg, edge: Optional[BaseEdge] = None) -> _N:
        for n in _flatten(nodes):
            self._dag._edge(self, n, edge)
        return self

    def add_parents(self: _N, *nodes: _NodeArg, edge: Optional[BaseEdge] = None) -> _N:
        for n in _flatten(nodes):
            self._dag._edge(n, self, edge)
        return self

    def remove_children(self: _N, *nodes: _NodeArg) -> _N:
        for n in _flatten(nodes):
            self._dag._edges.pop((self.name, n.name), None)
        return self

    def remove_parents(self: _N, *nodes: _NodeArg) -> _N:
        for n in _flatten(nodes):
            self._dag._edges.pop((n.name, self.name), None)
        return self

    def child_layer(self, edge: Optional[BaseEdge] = None, **kwargs: Any) -> NodeLayer:
        node = self._dag.layer(**kwargs)
        self.add_children(node, edge=edge)
        return node

    def parent_layer(self, edge: Optional[BaseEdge] = None, **kwargs: Any) -> NodeLayer:
        node = self._dag.layer(**kwargs)
        self.add_parents(node, edge=edge)
        return node

    def child_subdag(self, edge: Optional[BaseEdge] = None, **kwargs: Any) -> SubDAG:
        node = self._dag.subdag(**kwargs)
        self.add_children(node, edge=edge)
        return node

    def parent_subdag(self, edge: Optional[BaseEdge] = None, **kwargs: Any) -> SubDAG:
        node = self._dag.subdag(**kwargs)
        self.add_parents(node, edge=edge)
        return node

    def walk_ancestors(self) -> Iterator[BaseNode]:
        seen: set[str] = set()
        todo = list(self.parents)
        while todo:
            n = todo.pop()
            if n.name not in seen:
                seen.add(n.name)
                yield n
                todo.extend(n.parents)

    def walk_descendants(self) -> Iterator[BaseNode]:
        seen: set[str] = set()
        todo = list(self.children)
        while todo:
            n = todo.pop()
            if n.name not in seen:
                seen.add(n.name)
                yield n
                todo.extend(n.children)


class NodeLayer(BaseNode):
    """A layer: one node per entry of ``vars`` (a dict of the submit
    description's macros), all running ``submit_description``."""

    def __init__(
        self,
        dag: DAG,
        *,
        submit_description: _SubmitDescription = None,
        vars: Optional[Iterable[Mapping[str, object]]] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(dag, **kwargs)
        self.submit_description = submit_description
        self.vars: list[dict[str, object]] = [dict(v) for v in (vars or [{}])]

    def __len__(self) -> int:
        return len(self.vars)


class SubDAG(BaseNode):
    """A node that is a DAG of its own (``SUBDAG EXTERNAL``)."""

    def __init__(self, dag: DAG, *, dag_file: _PathLike, **kwargs: Any) -> None:
        super().__init__(dag, **kwargs)
        self.dag_file = pathlib.Path(dag_file)


class FinalNode(BaseNode):
    """The ``FINAL`` node: runs last, whatever became of the others."""

    def __init__(
        self,
        dag: DAG,
        *,
        submit_description: _SubmitDescription = None,
        vars: Optional[Mapping[str, object]] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(dag, **kwargs)
        self.submit_description = submit_description
        self.vars: dict[str, object] = dict(vars or {})


def _flatten(nodes: Iterable[object]) -> Iterator[BaseNode]:
    for n in nodes:
        if isinstance(n, BaseNode):
            yield n
        elif isinstance(n, collections.abc.Iterable):
            yield from _flatten(n)
        else:
            raise TypeError(f"{n!r} is not a node")


class DAG:
    """A DAG: its nodes (layers, sub-DAGs, a final node), their edges, and
    the DAG-wide commands (``CONFIG`` from ``dagman_config``,
    ``SET_JOB_ATTR`` from ``dagman_job_attributes``, ``MAXJOBS`` from
    ``max_jobs_by_category``, ``DOT``, ``JOBSTATE_LOG``, ``NODE_STATUS_FILE``)."""

    def __init__(
        self,
        dagman_config: Optional[Mapping[str, object]] = None,
        dagman_job_attributes: Optional[Mapping[str, object]] = None,
        max_jobs_by_category: Optional[Mapping[str, int]] = None,
        dot_config: Optional[DotConfig] = None,
        jobstate_log: Optional[_PathLike] = None,
        node_status_file: Optional[NodeStatusFile] = None,
    ) -> None:
        self.dagman_config = dict(dagman_config or {})
        self.dagman_job_attrs = dict(dagman_job_attributes or {})
        self.max_jobs_per_category = dict(max_jobs_by_category or {})
        self.dot_config = dot_config
        self.jobstate_log = None if jobstate_log is None else pathlib.Path(jobstate_log)
        self.node_status_file = node_status_file
        # The layers and sub-DAGs (the FINAL node is apart), by name.
        self._nodes: dict[str, Union[NodeLayer, SubDAG]] = {}
        self._edges: dict[tuple[str, str], BaseEdge] = {}
        self._final: Optional[FinalNode] = None

    def _add(self, node: _Added) -> _Added:
        if node.name in self._nodes or (self._final and self._final.name == node.name):
            raise ValueError(f"the DAG has a node named {node.name} already")
        self._nodes[node.name] = node
        return node

    def layer(self, **kwargs: Any) -> NodeLayer:
        """A new layer of nodes (see :class:`NodeLayer`)."""
        return self._add(NodeLayer(self, **kwargs))

    def subdag(self, **kwargs: Any) -> SubDAG:
        """A new sub-DAG node (see :class:`SubDAG`)."""
        return self._add(SubDAG(self, **kwargs))

    def final(self, **kwargs: Any) -> FinalNode:
        """The FINAL node (see :class:`FinalNode`); one per DAG."""
        if self._final is not None:
            raise ValueError("a DAG has one FINAL node")
        node = FinalNode(self, **kwargs)
        if node.name in self._nodes:
            raise ValueError(f"the DAG has a node named {node.name} already")
        self._final = node
        return node

    def _edge(self, parent: BaseNode, child: BaseNode, edge: Optional[BaseEdge]) -> None:
        for n in (parent, child):
            if self._nodes.get(n.name) is not n:
                raise ValueError(f"{n.name} is not a node of this DAG (a FINAL node has no edges)")
        self._edges[(parent.name, child.name)] = edge if edge is not None else ManyToMany()

    def _parents_of(self, node: BaseNode) -> _Nodes:
        return _Nodes(self._nodes[p] for (p, c) in self._edges if c == node.name)

    def _children_of(self, node: BaseNode) -> _Nodes:
        return _Nodes(self._nodes[c] for (p, c) in self._edges if p == node.name)

    @property
    def node_to_children(self) -> dict[BaseNode, _Nodes]:
        return {n: self._children_of(n) for n in self._nodes.values()}

    @property
    def nodes(self) -> _Nodes:
        return _Nodes(self._nodes.values())

    def __iter__(self) -> Iterator[Union[NodeLayer, SubDAG]]:
        return iter(self._nodes.values())

    def __contains__(self, node: object) -> bool:
        return _holds(self._nodes, node)

    def __len__(self) -> int:
        return len(self._nodes)

    @property
    def roots(self) -> _Nodes:
        return _Nodes(n for n in self._nodes.values() if not self._parents_of(n))

    @property
    def leaves(self) -> _Nodes:
        return _Nodes(n for n in self._nodes.values() if not self._children_of(n))

    def select(self, selector: Callable[[BaseNode], object]) -> _Nodes:
        """The nodes ``selector`` (a function of a node) is true of."""
        return _Nodes(n for n in self._nodes.values() if selector(n))

    def glob(self, pattern: str) -> _Nodes:
        """The nodes whose names match the shell pattern ``pattern``."""
        import fnmatch

        return self.select(lambda n: fnmatch.fnmatchcase(n.name, pattern))

    def walk(self, order: WalkOrder = WalkOrder.DEPTH_FIRST) -> Iterator[BaseNode]:
        """Every node once, from the roots, depth or breadth first."""
        seen: set[str] = set()
        todo = collections.deque(self.roots)
        while todo:
            n = todo.popleft() if order == WalkOrder.BREADTH_FIRST else todo.pop()
            if n.name in seen:
                continue
            seen.add(n.name)
            yield n
            todo.extend(n.children)

    def describe(self) -> str:
        """A table of the DAG's nodes: name, kind, size, parents, children."""
        rows = [("NAME", "TYPE", "NODES", "PARENTS", "CHILDREN")]
        for n in self._nodes.values():
            rows.append(
                (
                    n.name,
                    type(n).__name__,
                    str(len(n)),
                    ", ".join(p.name for p in n.parents),
                    ", ".join(c.name for c in n.children),
                )
            )
        if self._final is not None:
            rows.append((self._final.name, "FinalNode", "1", "", ""))
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        return "\n".join(
            "  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows
        )

    def __repr__(self) -> str:
        return f"DAG({len(self._nodes)} nodes)"


class _Nodes(collections.abc.Set[BaseNode]):
    """Nodes, as a set that keeps their order and can grow edges as one."""

    def __init__(self, nodes: Iterable[BaseNode]) -> None:
        self._nodes: dict[str, BaseNode] = {}
        for n in nodes:
            self._nodes[n.name] = n

    def __contains__(self, node: object) -> bool:
        return _holds(self._nodes, node)

    def __iter__(self) -> Iterator[BaseNode]:
        return iter(self._nodes.values())

    def __len__(self) -> int:
        return len(self._nodes)

    def __repr__(self) -> str:
        return f"Nodes({', '.join(self._nodes)})"

    def add_children(self, *nodes: _NodeArg, edge: Optional[BaseEdge] = None) -> _Nodes:
        for n in self:
            n.add_children(*nodes, edge=edge)
        return self

    def add_parents(self, *nodes: _NodeArg, edge: Optional[BaseEdge] = None) -> _Nodes:
        for n in self:
            n.add_parents(*nodes, edge=edge)
        return self

    def child_layer(self, edge: Optional[BaseEdge] = None, **kwargs: Any) -> NodeLayer:
        first = next(iter(self))
        layer = first._dag.layer(**kwargs)
        self.add_children(layer, edge=edge)
        return layer


# ---------------------------------------------------------------- writing


def _quote(value: object) -> str:
    """A VARS value: in double quotes, with ``"`` and ``\\`` escaped."""
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_dag(
    dag: DAG,
    dag_dir: _PathLike,
    dag_file_name: str = DEFAULT_DAG_FILE_NAME,
    node_name_formatter: Optional[SimpleFormatter] = None,
) -> pathlib.Path:
    """Writes ``dag`` into the directory ``dag_dir`` (made if missing): the DAG
    file ``dag_file_name``, each layer's submit file ``LAYER.sub``, and the
    DAGMan configuration file when the DAG has one. Returns the DAG file's path."""
    fmt = node_name_formatter or SimpleFormatter()
    d = pathlib.Path(dag_dir).absolute()
    d.mkdir(parents=True, exist_ok=True)
    lines = ["# BEGIN META", "# written by andes.dags", "# END META"]
    if dag.dagman_config:
        cfg = "".join(f"{k} = {v}\n" for k, v in dag.dagman_config.items())
        (d / CONFIG_FILE_NAME).write_text(cfg)
        lines.append(f"CONFIG {CONFIG_FILE_NAME}")
    for k, v in dag.dagman_job_attrs.items():
        lines.append(f"SET_JOB_ATTR {k} = {v}")
    for cat, n in dag.max_jobs_per_category.items():
        lines.append(f"MAXJOBS {cat} {int(n)}")
    if dag.dot_config is not None:
        dot = dag.dot_config
        words = [
            "DOT",
            str(dot.path),
            "UPDATE" if dot.update else "DONT-UPDATE",
            "OVERWRITE" if dot.overwrite else "DONT-OVERWRITE",
        ]
        if dot.include_file is not None:
            words += ["INCLUDE", str(dot.include_file)]
        lines.append(" ".join(words))
    if dag.jobstate_log is not None:
        lines.append(f"JOBSTATE_LOG {dag.jobstate_log}")
    if dag.node_status_file is not None:
        s = dag.node_status_file
        words = ["NODE_STATUS_FILE", str(s.path)]
        if s.update_time is not None:
            words.append(str(int(s.update_time)))
        if s.always_update:
            words.append("ALWAYS-UPDATE")
        lines.append(" ".join(words))

    def names(node: BaseNode) -> list[str]:
        if isinstance(node, NodeLayer):
            return [fmt.generate(node.name, i) for i in range(len(node))]
        return [node.name]

    def submit_file(node: Union[NodeLayer, FinalNode]) -> Optional[str]:
        desc = node.submit_description
        if desc is None:
            return "noop.sub" if node.noop else None
        # A path names a submit file of its own; a Submit (or its text) is written.
        if isinstance(desc, pathlib.Path) or (
            isinstance(desc, str) and "=" not in desc and "\n" not in desc
        ):
            return str(desc)
        name = f"{node.name}.sub"
        text = str(desc)
        (d / name).write_text(text if text.endswith("\n") else f"{text}\n")
        return name

    def node_lines(
        node: Union[NodeLayer, SubDAG, FinalNode], name: str, vars: Optional[Mapping[str, object]], kind: str
    ) -> list[str]:
        out = []
        if isinstance(node, SubDAG):
            head = f"SUBDAG EXTERNAL {name} {node.dag_file}"
        else:
            sub = submit_file(node)
            if sub is None:
                raise ValueError(f"node {node.name} has no submit description (and is not NOOP)")
            head = f"{kind} {name} {sub}"
        if node.dir is not None:
            head += f" DIR {node.dir}"
        if node.noop:
            head += " NOOP"
        if node.done:
            head += " DONE"
        out.append(head)
        if vars:
            out.append(f"VARS {name} " + " ".join(f"{k}={_quote(v)}" for k, v in vars.items()))
        if node.retries:
            r = f"RETRY {name} {int(node.retries)}"
            if node.retry_unless_exit is not None:
                r += f" UNLESS-EXIT {int(node.retry_unless_exit)}"
            out.append(r)
        for which, script in (("PRE", node.pre), ("POST", node.post)):
            if script is not None:
                words = ["SCRIPT"]
                if script.retry:
                    words += ["DEFER", str(script.retry_status), str(script.retry_delay)]
                words += [which, name, script.executable, *script.arguments]
                out.append(" ".join(words))
        if node.pre_skip_exit_code is not None:
            out.append(f"PRE_SKIP {name} {int(node.pre_skip_exit_code)}")
        if node.priority:
            out.append(f"PRIORITY {name} {int(node.priority)}")
        if node.category is not None:
            out.append(f"CATEGORY {name} {node.category}")
        if node.abort is not None:
            a = f"ABORT-DAG-ON {name} {node.abort.node_exit_value}"
            if node.abort.dag_return_value is not None:
                a += f" RETURN {node.abort.dag_return_value}"
            out.append(a)
        return out

    for node in dag:
        lines.append("")
        if isinstance(node, NodeLayer):
            for name, vars in zip(names(node), node.vars):
                lines.extend(node_lines(node, name, vars, "JOB"))
        else:
            lines.extend(node_lines(node, node.name, None, "JOB"))
    if dag._final is not None:
        f = dag._final
        lines.append("")
        lines.extend(node_lines(f, f.name, f.vars, "FINAL"))
    lines.append("")
    for (p, c), edge in dag._edges.items():
        parent, child = dag._nodes[p], dag._nodes[c]
        pn, cn = names(parent), names(child)
        for ps, cs in edge.get_edges(parent, child):
            lines.append(
                "PARENT " + " ".join(pn[i] for i in ps) + " CHILD " + " ".join(cn[i] for i in cs)
            )
    path = d / dag_file_name
    path.write_text("\n".join(lines) + "\n")
    return path
