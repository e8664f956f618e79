//! `andes._andes`: the native half of the `andes` Python package. It holds the
//! project's own Rust crates behind a small surface; the Python half
//! (`python/andes/`) gives it the shapes of HTCondor's `htcondor2` and `classad2`.
//!
//! - ClassAds: [`PyClassAd`] and [`PyExprTree`] over the `classad` crate (parse,
//!   evaluate, unparse, match), `parse_ads`, `quote`, `unquote`.
//! - A signed session to a schedd or a collector ([`Session`]), found and keyed as
//!   the `andes` command finds them (`andes-client`): submit (the same expansion
//!   and upload as `andes submit`), query, history, changes, the fetch of
//!   spooled output (as `andes transfer-data`), collector queries.
//! - A job event log as it grows ([`EventLog`], `andes_job::userlog`): each
//!   event's attributes and its text in the log.
//! - The configuration as the commands read it ([`Config`], `andes-config`):
//!   `htcondor2.param`.
//!
//! Every network wait runs with the interpreter released. Errors are
//! `HTCondorException` (pool, submit, log) or `ClassAdException` (ClassAd text),
//! with the messages the command prints.
#![forbid(unsafe_code)]

use std::path::PathBuf;

use andes_client::session::Session as ClientSession;
use andes_client::settings::Settings;
use andes_job::api::{
    Change, ChangeReport, ChangeRequest, HistoryRequest, QueryReply, QueryRequest, Targets,
};
use classad::{ClassAd, Expr, Value};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyKeyError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

create_exception!(
    _andes,
    HTCondorException,
    PyException,
    "An error from the pool, a submit description or a job event log."
);
create_exception!(_andes, ClassAdException, PyException, "A ClassAd that does not parse.");

/// The most ads one answer may turn into Python objects is what the schedd or
/// collector sends (their own limits bound it); text to parse is bounded here.
const MAX_TEXT: usize = 64 << 20;

fn pool_err(e: impl std::fmt::Display) -> PyErr {
    HTCondorException::new_err(e.to_string())
}

fn anyhow_err(e: anyhow::Error) -> PyErr {
    HTCondorException::new_err(format!("{e:#}"))
}

fn check_len(text: &str, what: &str) -> PyResult<()> {
    if text.len() > MAX_TEXT {
        return Err(ClassAdException::new_err(format!(
            "{what} is {} bytes, over the limit of {MAX_TEXT}",
            text.len()
        )));
    }
    Ok(())
}

// ---------------------------------------------------------------- values

/// `Value.Undefined` / `Value.Error` of `andes.classad`.
fn special(py: Python<'_>, name: &str) -> PyResult<Py<PyAny>> {
    Ok(py.import("andes.classad")?.getattr("Value")?.getattr(name)?.unbind())
}

/// A ClassAd value as Python sees it: `bool`, `int`, `float`, `str`, `list`,
/// `ClassAd`, or `Value.Undefined` / `Value.Error`.
fn value_to_py(py: Python<'_>, v: &Value) -> PyResult<Py<PyAny>> {
    Ok(match v {
        Value::Undefined => special(py, "Undefined")?,
        Value::Error => special(py, "Error")?,
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any().unbind(),
        Value::Int(i) => i.into_pyobject(py)?.into_any().unbind(),
        Value::Real(r) => PyFloat::new(py, *r).into_any().unbind(),
        Value::Str(s) => PyString::new(py, s).into_any().unbind(),
        Value::List(items) => {
            let out = PyList::empty(py);
            for i in items.iter() {
                out.append(value_to_py(py, i)?)?;
            }
            out.into_any().unbind()
        }
        Value::Ad(ad) => Py::new(py, PyClassAd { ad: (**ad).clone() })?.into_any(),
    })
}

/// Deepest nesting a Python value may have when it becomes a ClassAd value.
const MAX_DEPTH: usize = 64;

/// A Python value as a ClassAd expression: an `ExprTree` as it is; `None`,
/// `bool`, `int`, `float`, `str`, lists, dicts and `ClassAd`s as literals.
fn py_to_expr(ob: &Bound<'_, PyAny>, depth: usize) -> PyResult<Expr> {
    if depth > MAX_DEPTH {
        return Err(PyTypeError::new_err("value nested too deeply for a ClassAd"));
    }
    if let Ok(e) = ob.extract::<PyRef<'_, PyExprTree>>() {
        return Ok(e.expr.clone());
    }
    if let Ok(a) = ob.extract::<PyRef<'_, PyClassAd>>() {
        return Ok(Expr::Record(std::sync::Arc::new(a.ad.clone())));
    }
    Ok(Expr::from(py_to_value(ob, depth)?))
}

fn py_to_value(ob: &Bound<'_, PyAny>, depth: usize) -> PyResult<Value> {
    if depth > MAX_DEPTH {
        return Err(PyTypeError::new_err("value nested too deeply for a ClassAd"));
    }
    if ob.is_none() {
        return Ok(Value::Undefined);
    }
    if let Ok(name) = ob.getattr("_classad_special")
        && let Ok(n) = name.extract::<String>()
    {
        return Ok(if n == "Error" { Value::Error } else { Value::Undefined });
    }
    if ob.is_instance_of::<PyBool>() {
        return Ok(Value::Bool(ob.extract()?));
    }
    if ob.is_instance_of::<PyInt>() {
        let i: i64 = ob
            .extract()
            .map_err(|_| PyTypeError::new_err("integer out of a ClassAd's 64-bit range"))?;
        return Ok(Value::Int(i));
    }
    if ob.is_instance_of::<PyFloat>() {
        return Ok(Value::Real(ob.extract()?));
    }
    if ob.is_instance_of::<PyString>() {
        let s: String = ob.extract()?;
        return Ok(Value::string(s));
    }
    if let Ok(a) = ob.extract::<PyRef<'_, PyClassAd>>() {
        return Ok(Value::Ad(std::sync::Arc::new(a.ad.clone())));
    }
    if let Ok(e) = ob.extract::<PyRef<'_, PyExprTree>>() {
        return Ok(ClassAd::new().eval(&e.expr));
    }
    if let Ok(d) = ob.cast::<PyDict>() {
        return Ok(Value::Ad(std::sync::Arc::new(dict_to_ad(d, depth + 1)?)));
    }
    if ob.is_instance_of::<PyList>() || ob.is_instance_of::<PyTuple>() {
        let mut out = Vec::new();
        for item in ob.try_iter()? {
            out.push(py_to_value(&item?, depth + 1)?);
        }
        return Ok(Value::List(std::sync::Arc::new(out)));
    }
    Err(PyTypeError::new_err(format!("a {} cannot be a ClassAd value", ob.get_type().name()?)))
}

fn dict_to_ad(d: &Bound<'_, PyDict>, depth: usize) -> PyResult<ClassAd> {
    let mut ad = ClassAd::new();
    for (k, v) in d.iter() {
        let name: String =
            k.extract().map_err(|_| PyTypeError::new_err("ClassAd attribute names are strings"))?;
        ad.insert(name.as_str(), py_to_expr(&v, depth)?);
    }
    Ok(ad)
}

// ---------------------------------------------------------------- ExprTree

/// A ClassAd expression (`classad2.ExprTree`).
#[pyclass(name = "ExprTree", module = "andes.classad", frozen)]
pub struct PyExprTree {
    expr: Expr,
}

#[pymethods]
impl PyExprTree {
    /// Parses `text` as a ClassAd expression.
    #[new]
    fn new(text: &str) -> PyResult<Self> {
        check_len(text, "the expression")?;
        let expr = classad::parse_expr(text)
            .map_err(|e| ClassAdException::new_err(format!("{text:?}: {e}")))?;
        Ok(PyExprTree { expr })
    }

    /// Evaluates the expression, its attribute references looked up in `scope`
    /// (a `ClassAd`; none: an empty ad), and `target` for `TARGET.` references.
    #[pyo3(signature = (scope=None, target=None))]
    fn eval(
        &self,
        py: Python<'_>,
        scope: Option<PyRef<'_, PyClassAd>>,
        target: Option<PyRef<'_, PyClassAd>>,
    ) -> PyResult<Py<PyAny>> {
        let mut ev = classad::Evaluator::new();
        let v = ev.eval(&self.expr, scope.as_ref().map(|s| &s.ad), target.as_ref().map(|t| &t.ad));
        value_to_py(py, &v)
    }

    /// The expression's value as an `ExprTree` (a literal: `undefined`
    /// when an attribute it needs is missing), evaluated as `eval` does.
    #[pyo3(signature = (scope=None, target=None))]
    fn simplify(
        &self,
        scope: Option<PyRef<'_, PyClassAd>>,
        target: Option<PyRef<'_, PyClassAd>>,
    ) -> PyExprTree {
        let mut ev = classad::Evaluator::new();
        let v = ev.eval(&self.expr, scope.as_ref().map(|s| &s.ad), target.as_ref().map(|t| &t.ad));
        PyExprTree { expr: Expr::from(v) }
    }

    fn __str__(&self) -> String {
        self.expr.to_string()
    }

    fn __repr__(&self) -> String {
        format!("ExprTree({:?})", self.expr.to_string())
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        match other.extract::<PyRef<'_, PyExprTree>>() {
            Ok(o) => o.expr.to_string() == self.expr.to_string(),
            Err(_) => false,
        }
    }

    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.expr.to_string().hash(&mut h);
        h.finish()
    }
}

// ---------------------------------------------------------------- ClassAd

/// A ClassAd (`classad2.ClassAd`): a mapping of case-insensitive attribute
/// names to expressions. Reading an attribute gives its value when it is a
/// literal, else its `ExprTree`; `eval` evaluates it.
#[pyclass(name = "ClassAd", module = "andes.classad")]
#[derive(Clone)]
pub struct PyClassAd {
    ad: ClassAd,
}

#[pymethods]
impl PyClassAd {
    /// An empty ad, an ad parsed from new-syntax text (`[a = 1; b = a + 1]`) or
    /// old-syntax text (one `Name = Expr` per line), or an ad built from a dict.
    #[new]
    #[pyo3(signature = (input=None))]
    fn new(input: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let Some(input) = input else { return Ok(PyClassAd { ad: ClassAd::new() }) };
        if let Ok(d) = input.cast::<PyDict>() {
            return Ok(PyClassAd { ad: dict_to_ad(d, 0)? });
        }
        let text: String = input
            .extract()
            .map_err(|_| PyTypeError::new_err("a ClassAd is made from a str or a dict"))?;
        Ok(PyClassAd { ad: parse_one_ad(&text)? })
    }

    fn __getitem__(&self, py: Python<'_>, key: &str) -> PyResult<Py<PyAny>> {
        match self.ad.get(key) {
            Some(e) if is_constant(e, 0) => value_to_py(py, &ClassAd::new().eval(e)),
            Some(e) => Ok(Py::new(py, PyExprTree { expr: e.clone() })?.into_any()),
            None => Err(PyKeyError::new_err(key.to_string())),
        }
    }

    fn __setitem__(&mut self, key: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
        check_name(key)?;
        self.ad.insert(key, py_to_expr(value, 0)?);
        Ok(())
    }

    fn __delitem__(&mut self, key: &str) -> PyResult<()> {
        self.ad.remove(key).map(|_| ()).ok_or_else(|| PyKeyError::new_err(key.to_string()))
    }

    fn __contains__(&self, key: &str) -> bool {
        self.ad.contains(key)
    }

    fn __len__(&self) -> usize {
        self.ad.len()
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let keys = PyList::new(py, slf.names())?;
        Ok(keys.as_any().try_iter()?.into_any().unbind())
    }

    /// The attribute names, as written.
    fn keys(&self) -> Vec<String> {
        self.names()
    }

    /// The attributes' values (as `ad[key]` gives them).
    fn values(&self, py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
        self.names().iter().map(|k| self.__getitem__(py, k)).collect()
    }

    /// `(name, value)` pairs.
    fn items(&self, py: Python<'_>) -> PyResult<Vec<(String, Py<PyAny>)>> {
        self.names()
            .into_iter()
            .map(|k| {
                let v = self.__getitem__(py, &k)?;
                Ok((k, v))
            })
            .collect()
    }

    /// `ad[key]`, or `default` when the ad has no such attribute.
    #[pyo3(signature = (key, default=None))]
    fn get(&self, py: Python<'_>, key: &str, default: Option<Py<PyAny>>) -> PyResult<Py<PyAny>> {
        if self.ad.contains(key) {
            self.__getitem__(py, key)
        } else {
            Ok(default.unwrap_or(py.None()))
        }
    }

    /// Removes `key` and gives its value (or `default`; with neither, KeyError).
    #[pyo3(signature = (key, default=None))]
    fn pop(
        &mut self,
        py: Python<'_>,
        key: &str,
        default: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        if self.ad.contains(key) {
            let v = self.__getitem__(py, key)?;
            self.ad.remove(key);
            Ok(v)
        } else {
            default.ok_or_else(|| PyKeyError::new_err(key.to_string()))
        }
    }

    /// Copies every attribute of `other` (a ClassAd or a dict) into this ad.
    fn update(&mut self, other: &Bound<'_, PyAny>) -> PyResult<()> {
        if let Ok(o) = other.extract::<PyRef<'_, PyClassAd>>() {
            self.ad.update(&o.ad);
            return Ok(());
        }
        let d = other
            .cast::<PyDict>()
            .map_err(|_| PyTypeError::new_err("update takes a ClassAd or a dict"))?;
        let o = dict_to_ad(d, 0)?;
        self.ad.update(&o);
        Ok(())
    }

    /// `ad[key]` when the ad has `key`; else sets it to `default` and gives that.
    #[pyo3(signature = (key, default=None))]
    fn setdefault(
        &mut self,
        py: Python<'_>,
        key: &str,
        default: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        if self.ad.contains(key) {
            return self.__getitem__(py, key);
        }
        let default = default.unwrap_or(py.None());
        self.__setitem__(key, default.bind(py))?;
        Ok(default)
    }

    /// Removes the first attribute and gives `(name, value)`; KeyError when
    /// the ad is empty.
    fn popitem(&mut self, py: Python<'_>) -> PyResult<(String, Py<PyAny>)> {
        let Some(name) = self.names().into_iter().next() else {
            return Err(PyKeyError::new_err("popitem(): the ClassAd is empty"));
        };
        let v = self.__getitem__(py, &name)?;
        self.ad.remove(&name);
        Ok((name, v))
    }

    /// `expr` partly evaluated in this ad (`classad2.ClassAd.flatten`): what
    /// refers only to attributes the ad defines is evaluated, the rest kept.
    /// A value when it evaluates to one, else an `ExprTree`.
    fn flatten(&self, py: Python<'_>, expr: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let e = expr_arg(expr)?;
        // A literal as its value; anything else (a list too) as an ExprTree, as classad2 does.
        let flat = classad::refs::flatten(&self.ad, &e);
        match flat.as_literal() {
            Some(v) => value_to_py(py, v),
            None => Ok(Py::new(py, PyExprTree { expr: flat })?.into_any()),
        }
    }

    /// The attributes `expr` refers to (through the definitions of those
    /// this ad has) that this ad does not define, by full name (`MY.x`,
    /// `TARGET.x`), sorted; `[""]` when none, as in classad2.
    #[pyo3(name = "externalRefs")]
    fn external_refs(&self, expr: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
        let r = classad::refs::refs(&self.ad, &expr_arg(expr)?);
        Ok(or_blank(r.external))
    }

    /// The attributes `expr` refers to (through their definitions) that this
    /// ad defines, sorted; `[""]` when none, as in classad2.
    #[pyo3(name = "internalRefs")]
    fn internal_refs(&self, expr: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
        let r = classad::refs::refs(&self.ad, &expr_arg(expr)?);
        Ok(or_blank(r.internal))
    }

    /// Removes every attribute.
    fn clear(&mut self) {
        self.ad = ClassAd::new();
    }

    /// The value of attribute `attr`, evaluated in this ad (`target`: the ad
    /// `TARGET.` names).
    #[pyo3(signature = (attr, target=None))]
    fn eval(
        &self,
        py: Python<'_>,
        attr: &str,
        target: Option<PyRef<'_, PyClassAd>>,
    ) -> PyResult<Py<PyAny>> {
        let Some(e) = self.ad.get(attr) else {
            return Err(PyKeyError::new_err(attr.to_string()));
        };
        let mut ev = classad::Evaluator::new();
        let v = ev.eval(e, Some(&self.ad), target.as_ref().map(|t| &t.ad));
        value_to_py(py, &v)
    }

    /// The expression of attribute `attr`, unevaluated.
    fn lookup(&self, attr: &str) -> PyResult<PyExprTree> {
        self.ad
            .get(attr)
            .map(|e| PyExprTree { expr: e.clone() })
            .ok_or_else(|| PyKeyError::new_err(attr.to_string()))
    }

    /// Whether `other`'s Requirements hold with this ad as its target.
    fn matches(&self, other: PyRef<'_, PyClassAd>) -> bool {
        let mut ev = classad::Evaluator::new();
        classad::matching::requirements_hold(&mut ev, &other.ad, &self.ad)
    }

    /// Whether each ad's Requirements hold with the other as target.
    #[pyo3(name = "symmetricMatch")]
    fn symmetric_match(&self, other: PyRef<'_, PyClassAd>) -> bool {
        classad::symmetric_match(&self.ad, &other.ad)
    }

    /// The ad in old syntax (`Name = Expr` per line), as `condor_q -long` prints;
    /// an empty ad is an empty line, as classad2 prints it.
    #[pyo3(name = "printOld")]
    fn print_old(&self) -> String {
        if self.ad.is_empty() { "\n".to_string() } else { self.ad.to_old_syntax() }
    }

    /// The ad as HTCondor's JSON.
    #[pyo3(name = "printJson")]
    fn print_json(&self) -> String {
        classad::json::ad_to_json_string(&self.ad)
    }

    /// The ad laid out on several lines, as classad2's `str(ad)`.
    fn __str__(&self) -> String {
        let mut s = String::new();
        classad::unparse::pretty_ad_to(&mut s, &self.ad, 0);
        s
    }

    /// The ad on one line, in new syntax (`[ a = 1; b = 2 ]`).
    fn __repr__(&self) -> String {
        let mut s = String::new();
        classad::unparse::ad_to(&mut s, &self.ad);
        s
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        match other.extract::<PyRef<'_, PyClassAd>>() {
            Ok(o) => self.__repr__() == o.__repr__(),
            Err(_) => false,
        }
    }
}

impl PyClassAd {
    fn names(&self) -> Vec<String> {
        self.ad.iter().map(|(n, _)| n.as_str().to_string()).collect()
    }
}

/// An `ExprTree` argument (classad2 takes no text where it wants a tree).
fn expr_arg(ob: &Bound<'_, PyAny>) -> PyResult<Expr> {
    ob.extract::<PyRef<'_, PyExprTree>>()
        .map(|e| e.expr.clone())
        .map_err(|_| PyTypeError::new_err("expr must be an ExprTree"))
}

/// classad2's way of saying "no names": one empty string.
fn or_blank(names: Vec<String>) -> Vec<String> {
    if names.is_empty() { vec![String::new()] } else { names }
}

/// A literal, or a list of literals (as `classad2` gives them as Python values).
fn is_constant(e: &Expr, depth: usize) -> bool {
    match e {
        Expr::Lit(_) => true,
        Expr::List(items) => depth < MAX_DEPTH && items.iter().all(|i| is_constant(i, depth + 1)),
        _ => false,
    }
}

fn check_name(name: &str) -> PyResult<()> {
    let ok = !name.is_empty()
        && name.len() <= 256
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(ClassAdException::new_err(format!("{name:?} is not a ClassAd attribute name")))
    }
}

/// One ad from new-syntax text, or from old syntax when it is not in brackets.
fn parse_one_ad(text: &str) -> PyResult<ClassAd> {
    check_len(text, "the ad")?;
    let r = if text.trim_start().starts_with('[') {
        classad::parse_ad(text)
    } else {
        classad::parse_old_ad(text)
    };
    r.map_err(|e| ClassAdException::new_err(format!("the ClassAd does not parse: {e}")))
}

/// Every ad in `text`, read as `parser` (classad2's `ParserType` number)
/// says: -1 (Auto) new-syntax ads one after another, or old-syntax ads
/// separated by blank lines, whichever the text starts as; 0 (Old) and 3
/// (New) only that syntax; 2 (JSON) an object or an array of them; 4
/// (FileAuto) JSON when the text starts with `{`, else as Auto. XML (1) is
/// refused.
#[pyfunction]
#[pyo3(signature = (text, parser=-1))]
fn parse_ads(text: &str, parser: i64) -> PyResult<Vec<PyClassAd>> {
    check_len(text, "the text")?;
    let start = text.trim_start();
    let new_syntax = |text: &str| {
        classad::parse_ads(text)
            .map_err(|e| ClassAdException::new_err(format!("the ClassAds do not parse: {e}")))
    };
    let json = |text: &str| {
        classad::json::ads_from_json_str(text)
            .map_err(|e| ClassAdException::new_err(format!("the JSON ClassAds do not parse: {e}")))
    };
    let ads = match parser {
        -1 if start.starts_with('[') => new_syntax(text)?,
        -1 | 0 => parse_old_ads(text)?,
        3 if start.is_empty() || start.starts_with('[') || start.starts_with("/") => {
            new_syntax(text)?
        }
        3 => {
            return Err(ClassAdException::new_err(
                "the text is not new-syntax ClassAds (`[ ... ]`): parse it as ParserType.Old or Auto",
            ));
        }
        2 => json(text)?,
        4 if start.starts_with('{') => json(text)?,
        4 if start.starts_with('[') => new_syntax(text)?,
        4 => parse_old_ads(text)?,
        1 => {
            return Err(ClassAdException::new_err(
                "XML ClassAds are not supported: parse them as Old, New or JSON",
            ));
        }
        n => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "parser {n} is no ParserType (Auto -1, Old 0, XML 1, JSON 2, New 3, FileAuto 4)"
            )));
        }
    };
    Ok(ads.into_iter().map(|ad| PyClassAd { ad }).collect())
}

/// Old-syntax ads separated by blank lines; lines starting with `#` are
/// comments, as in HTCondor's files of ads.
fn parse_old_ads(text: &str) -> PyResult<Vec<ClassAd>> {
    let mut out = Vec::new();
    for (i, block) in text.split("\n\n").enumerate() {
        let block: String = block
            .split_inclusive('\n')
            .filter(|line| !line.trim_start().starts_with('#'))
            .collect();
        if block.trim().is_empty() {
            continue;
        }
        let ad = classad::parse_old_ad(&block)
            .map_err(|e| ClassAdException::new_err(format!("ad {}: {e}", i + 1)))?;
        out.push(ad);
    }
    Ok(out)
}

/// `s` as a ClassAd string literal, quotes and escapes included.
#[pyfunction]
fn quote(s: &str) -> String {
    Expr::Lit(Value::string(s)).to_string()
}

/// The string a ClassAd string literal stands for.
#[pyfunction]
fn unquote(s: &str) -> PyResult<String> {
    check_len(s, "the literal")?;
    match classad::parse_expr(s) {
        Ok(Expr::Lit(Value::Str(ref v))) => Ok(v.to_string()),
        _ => Err(ClassAdException::new_err(format!("{s:?} is not a ClassAd string literal"))),
    }
}

// ---------------------------------------------------------------- submit files

/// A submit description's commands (`+Name` for `+Name = ...` attributes), in
/// order, and its last `queue` statement as `(count, vars, kind, items)`:
/// `kind` is `""` (no items), `"in"`, `"from"` (inline rows), `"from file"`,
/// `"matching"`, `"matching files"` or `"matching dirs"`.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn submit_parts(
    text: &str,
) -> PyResult<(Vec<(String, String)>, Option<(String, Vec<String>, String, Vec<String>)>)> {
    use andes_submit::parse::{ItemSource, MatchKind, StatementKind};
    let desc = andes_submit::parse(text, "<submit description>").map_err(pool_err)?;
    let mut commands = Vec::new();
    let mut queue = None;
    for st in &desc.statements {
        match &st.kind {
            StatementKind::Assign { name, value } => commands.push((name.clone(), value.clone())),
            StatementKind::Attr { name, value } => {
                commands.push((format!("+{name}"), value.clone()))
            }
            StatementKind::Queue(q) => {
                let (kind, items) = match &q.items {
                    ItemSource::None => ("", Vec::new()),
                    ItemSource::In(words) => ("in", words.clone()),
                    ItemSource::FromRows(rows) => ("from", rows.clone()),
                    ItemSource::FromFile(f) => ("from file", vec![f.clone()]),
                    ItemSource::Matching { what, globs } => (
                        match what {
                            MatchKind::Any => "matching",
                            MatchKind::Files => "matching files",
                            MatchKind::Dirs => "matching dirs",
                        },
                        globs.clone(),
                    ),
                };
                queue = Some((q.count.clone(), q.vars.clone(), kind.to_string(), items));
            }
        }
    }
    Ok((commands, queue))
}

// ---------------------------------------------------------------- the pool

/// condor_submit_dag's options from `Submit.from_dag`'s dict.
fn dag_options(options: &[(String, String)]) -> Result<andes_dagman::submit::SubmitDag, String> {
    let mut o = andes_dagman::submit::SubmitDag::default();
    let truth = |k: &str, v: &str| match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" => Ok(true),
        "0" | "false" | "no" | "" => Ok(false),
        _ => Err(format!("DAG option {k}: {v:?} is not true or false")),
    };
    let count = |k: &str, v: &str| {
        v.trim().parse::<u32>().map_err(|_| format!("DAG option {k}: {v:?} is not a count"))
    };
    for (k, v) in options {
        match k.to_ascii_lowercase().replace('_', "-").as_str() {
            "force" | "f" => o.force = truth(k, v)?,
            "maxjobs" => o.max_jobs = Some(count(k, v)?),
            "maxidle" => o.max_idle = Some(count(k, v)?),
            "maxpre" => o.max_pre = Some(count(k, v)?),
            "maxpost" => o.max_post = Some(count(k, v)?),
            "usedagdir" => o.use_dag_dir = truth(k, v)?,
            "batch-name" => o.batch_name = Some(v.clone()),
            "dorecov" => o.recover = truth(k, v)?,
            "alwaysrunpost" => o.always_run_post = truth(k, v)?,
            _ => {
                return Err(format!(
                    "DAG option {k:?} is not one andes takes: force, maxjobs, maxidle, maxpre, maxpost, \
                     usedagdir, batch-name, DoRecov, AlwaysRunPost"
                ));
            }
        }
    }
    Ok(o)
}

/// A signed session to the schedd or the collector a configuration names.
#[pyclass(module = "andes._andes", frozen)]
pub struct Session {
    inner: ClientSession,
    /// The configuration file it was opened with, if named.
    config: Option<PathBuf>,
    /// The name of the key requests are signed with (`KEY_NAME`): who the
    /// daemon takes the caller for.
    key_name: Option<String>,
}

fn settings(config: Option<PathBuf>) -> anyhow::Result<Settings> {
    match config {
        Some(f) => Settings::load_file_over(&f, andes_config::Config::with_env(std::env::vars())),
        None => Settings::load(),
    }
}

fn parse_ad_list(r: &QueryReply) -> PyResult<Vec<PyClassAd>> {
    r.ads
        .iter()
        .map(|t| {
            classad::parse_ad(t)
                .map(|ad| PyClassAd { ad })
                .map_err(|e| pool_err(format!("the daemon sent an ad that does not parse: {e}")))
        })
        .collect()
}

#[pymethods]
impl Session {
    /// Opens a session to `daemon` (`"schedd"`, `"collector"`, or `"startd"`:
    /// an execute host daemon, which must hold a host's key) as the
    /// configuration at `config` (none: `$ANDES_CONFIG` or the default file) says:
    /// at `address` (`host:port`, as a daemon's `MyAddress` gives it) when
    /// given, else where the configuration says the daemon is.
    #[new]
    #[pyo3(signature = (daemon, config=None, address=None))]
    fn new(
        py: Python<'_>,
        daemon: &str,
        config: Option<PathBuf>,
        address: Option<String>,
    ) -> PyResult<Self> {
        let daemon = daemon.to_string();
        let named = config.clone().map(|c| std::path::absolute(&c).unwrap_or(c));
        py.detach(move || {
            let s = settings(config)?;
            let key_name = s.get("KEY_NAME")?;
            if daemon == "startd" {
                let inner = ClientSession::host(&s, address.as_deref())?;
                return Ok(Session { inner, config: named, key_name });
            }
            let url = match (daemon.as_str(), address) {
                ("schedd" | "collector", Some(a)) => format!("http://{a}"),
                ("schedd", None) => s.schedd_url()?,
                ("collector", None) => s.collector_url()?,
                (other, _) => anyhow::bail!("no daemon {other:?}: schedd, collector or startd"),
            };
            Ok(Session { inner: ClientSession::open_url(&s, url)?, config: named, key_name })
        })
        .map_err(anyhow_err)
    }

    /// The daemon's URL.
    #[getter]
    fn url(&self) -> String {
        self.inner.url.clone()
    }

    /// Submits the submit description `text` as `andes submit` does, with
    /// `iwd` as the submitting directory: returns `(cluster, count,
    /// cluster_ad)`.
    #[pyo3(signature = (text, iwd, spool=false))]
    fn submit(
        &self,
        py: Python<'_>,
        text: String,
        iwd: String,
        spool: bool,
    ) -> PyResult<(u32, u32, PyClassAd)> {
        py.detach(|| {
            let desc = andes_submit::parse(&text, "<submit description>")?;
            let now = classad::eval::system_now();
            let context = |cluster: u32| {
                let mut ctx = andes_submit::Context::new(i64::from(cluster), now, iwd.clone());
                ctx.owner = andes_client::settings::user_name();
                ctx.env = std::env::vars().collect();
                ctx
            };
            // A description that does not expand reserves no cluster.
            andes_submit::expand(&desc, &context(1))?;
            self.inner.block_on(async {
                let c = &self.inner.client;
                let cluster = andes_client::submit::reserve_cluster(c).await?;
                let out = andes_submit::expand(&desc, &context(cluster))?;
                let cluster_ad = andes_job::api::factor(out.jobs.clone()).cluster_ad;
                let reply =
                    andes_client::submit::queue(c, cluster, out, spool, now, |_| {}).await?;
                Ok((reply.cluster, reply.count, PyClassAd { ad: cluster_ad }))
            })
        })
        .map_err(anyhow_err)
    }

    /// Sends an admin command as the `andes` commands do (`andes reconfig`,
    /// `andes host off`, `andes drain`, `andes vacate`): `body` (JSON text)
    /// posted to `path`; the daemon's sentence saying what it did.
    fn command(&self, py: Python<'_>, path: &str, body: &str) -> PyResult<String> {
        let body: serde_json::Value = serde_json::from_str(body)
            .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("body: {e}")))?;
        py.detach(|| self.inner.command(path, &body)).map_err(anyhow_err)
    }

    /// `GET path` of the daemon: its JSON answer, as text.
    fn get_json(&self, py: Python<'_>, path: &str) -> PyResult<String> {
        let v: serde_json::Value = py
            .detach(|| {
                self.inner.block_on(self.inner.client.call::<(), _>(http::Method::GET, path, None))
            })
            .map_err(pool_err)?;
        Ok(v.to_string())
    }

    /// `POST path` of the daemon with `body` (JSON text), for a request
    /// answered with its status alone (as `andes userprio -setfactor`).
    fn post_json(&self, py: Python<'_>, path: &str, body: &str) -> PyResult<()> {
        let body: serde_json::Value = serde_json::from_str(body)
            .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("body: {e}")))?;
        let r = py
            .detach(|| self.inner.block_on(self.inner.client.post_json(path, &body)))
            .map_err(pool_err)?;
        if !r.status.is_success() {
            return Err(anyhow_err(andes_client::session::status_error(&r)));
        }
        Ok(())
    }

    /// Fetches the output of spooled jobs (submitted with `spool`) as `andes
    /// transfer-data` does, and lets the completed ones leave the queue: the
    /// jobs `ids` names (`C.P` or `C`), else the caller's completed ones;
    /// only those `constraint` is true of. Each job's files go where its ad
    /// says: it must be the caller's own.
    /// Returns each job fetched with its count of files, and `(id, why)` for
    /// the jobs the schedd kept in the queue. An error when ids were named
    /// and none is a spooled job the caller may fetch.
    #[pyo3(signature = (ids=Vec::new(), constraint=None))]
    #[allow(clippy::type_complexity)]
    fn retrieve(
        &self,
        py: Python<'_>,
        ids: Vec<String>,
        constraint: Option<String>,
    ) -> PyResult<(Vec<(String, usize)>, Vec<(String, String)>)> {
        let mut selected = Vec::new();
        for w in &ids {
            selected.push(w.parse().map_err(|e: String| HTCondorException::new_err(e))?);
        }
        let what = andes_client::transfer::Retrieve {
            ids: selected,
            constraint,
            all: false,
            dir: None,
            dir_hint: None,
        };
        let got = py
            .detach(|| {
                self.inner.block_on(andes_client::transfer::retrieve(
                    &self.inner.client,
                    self.key_name.as_deref(),
                    &what,
                    |_| {},
                ))
            })
            .map_err(anyhow_err)?;
        Ok((
            got.fetched.iter().map(|f| (f.id.to_string(), f.files)).collect(),
            got.kept.iter().map(|(id, why)| (id.to_string(), why.clone())).collect(),
        ))
    }

    /// Queues the DAGMan job of the DAG file `dag` as `andes submit-dag`
    /// does (checking the DAG whole first), from the directory `iwd`, with
    /// condor_submit_dag's `options` (`force`, `maxjobs`, `maxpre`,
    /// `maxpost`, `usedagdir`, `batch-name`, `DoRecov`, `AlwaysRunPost`, by
    /// name in any case; values as strings): returns `(cluster, job_ad)`.
    #[pyo3(signature = (dag, iwd, options=Vec::new()))]
    fn submit_dag(
        &self,
        py: Python<'_>,
        dag: PathBuf,
        iwd: PathBuf,
        options: Vec<(String, String)>,
    ) -> PyResult<(u32, PyClassAd)> {
        let o = dag_options(&options).map_err(pyo3::exceptions::PyValueError::new_err)?;
        py.detach(|| {
            let owner = andes_client::settings::user_name();
            // The DAGMan job finds the pool as this session did.
            let env = |k: &str| match (&self.config, k) {
                (Some(c), "ANDES_CONFIG") => Some(c.to_string_lossy().into_owned()),
                _ => std::env::var(k).ok(),
            };
            let mut job = andes_dagman::submit::dagman_job(&dag, &iwd, owner.as_deref(), &env, &o)?;
            let now = classad::eval::system_now();
            let cluster = self.inner.block_on(andes_dagman::submit::queue(
                &self.inner.client,
                &mut job,
                now,
            ))?;
            Ok((cluster, PyClassAd { ad: job.ad }))
        })
        .map_err(anyhow_err)
    }

    /// Jobs in the queue: those `constraint` is true of (none: all you may
    /// see), only the `projection` attributes (none: all), at most `limit`;
    /// with `mine`, only the caller's own unless the caller is an admin (as
    /// condor_q's default, QueryOpt.DefaultMyJobsOnly); with `group_by`,
    /// one ad per group of those jobs by these attributes' values (empty:
    /// the schedd's autocluster attributes), `limit` counting groups.
    #[pyo3(signature = (constraint=None, projection=Vec::new(), limit=None, ids=Vec::new(), mine=false, group_by=None))]
    #[allow(clippy::too_many_arguments)]
    fn query(
        &self,
        py: Python<'_>,
        constraint: Option<String>,
        projection: Vec<String>,
        limit: Option<usize>,
        ids: Vec<String>,
        mine: bool,
        group_by: Option<Vec<String>>,
    ) -> PyResult<Vec<PyClassAd>> {
        let targets = targets(&ids, constraint)?;
        let req = QueryRequest { targets, projection, limit, mine, group_by };
        let r: QueryReply = self.post(py, "/v1/query", &req)?;
        parse_ad_list(&r)
    }

    /// Jobs that have left the queue, newest first.
    #[pyo3(signature = (constraint=None, projection=Vec::new(), limit=None))]
    fn history(
        &self,
        py: Python<'_>,
        constraint: Option<String>,
        projection: Vec<String>,
        limit: Option<usize>,
    ) -> PyResult<Vec<PyClassAd>> {
        let req = HistoryRequest { constraint, owners: Vec::new(), limit, projection };
        let r: QueryReply = self.post(py, "/v1/history", &req)?;
        parse_ad_list(&r)
    }

    /// Changes jobs: `action` is `hold`, `release`, `remove`, `vacate` or `edit`
    /// (with `attr` and `value`, a ClassAd expression). Returns the ids
    /// changed and `(id, why)` for those skipped.
    #[pyo3(signature = (action, ids=Vec::new(), constraint=None, reason=None, attr=None, value=None))]
    #[allow(clippy::too_many_arguments)]
    fn change(
        &self,
        py: Python<'_>,
        action: &str,
        ids: Vec<String>,
        constraint: Option<String>,
        reason: Option<String>,
        attr: Option<String>,
        value: Option<String>,
    ) -> PyResult<Changed> {
        let targets = targets(&ids, constraint)?;
        if targets.ids.is_empty() && targets.owners.is_empty() && targets.constraint.is_none() {
            return Err(HTCondorException::new_err(
                "name the jobs: ids, clusters, owners or a constraint",
            ));
        }
        let reason = reason.unwrap_or_default();
        let change = match action {
            "hold" => Change::Hold { reason },
            "release" => Change::Release { reason },
            "remove" => Change::Remove { reason },
            "vacate" => Change::Vacate { reason },
            "edit" => match (attr, value) {
                (Some(attr), Some(expr)) => Change::Edit { attr, expr },
                _ => {
                    return Err(HTCondorException::new_err(
                        "an edit names an attribute and a value",
                    ));
                }
            },
            other => return Err(HTCondorException::new_err(format!("andes cannot {other} jobs"))),
        };
        let req = ChangeRequest { targets, change };
        let r: ChangeReport = self.post(py, "/v1/change", &req)?;
        Ok((
            r.changed.iter().map(|id| id.to_string()).collect(),
            r.skipped.iter().map(|(id, why)| (id.to_string(), why.clone())).collect(),
        ))
    }

    /// Ads the collector holds: of `my_type` (`Machine`, `Scheduler`,
    /// `Submitter`, `Negotiator`; none: every type) for which `constraint` is true.
    #[pyo3(signature = (my_type=None, constraint=None, projection=Vec::new()))]
    fn collector_query(
        &self,
        py: Python<'_>,
        my_type: Option<String>,
        constraint: Option<String>,
        projection: Vec<String>,
    ) -> PyResult<Vec<PyClassAd>> {
        let req = andes_protocol::pool::CollectorQuery { kind: my_type, constraint, projection };
        let r: andes_protocol::pool::CollectorQueryReply =
            self.post(py, "/v1/collector/query", &req)?;
        parse_ad_list(&QueryReply { ads: r.ads })
    }
}

/// The ids of the jobs a change changed, and `(id, why)` for those it skipped.
type Changed = (Vec<String>, Vec<(String, String)>);

impl Session {
    /// `POST path` with `req` to the daemon, the interpreter released while it waits.
    fn post<Req: serde::Serialize + Sync, Rep: serde::de::DeserializeOwned + Send>(
        &self,
        py: Python<'_>,
        path: &str,
        req: &Req,
    ) -> PyResult<Rep> {
        py.detach(|| {
            self.inner.block_on(self.inner.client.call(http::Method::POST, path, Some(req)))
        })
        .map_err(pool_err)
    }
}

/// Job ids (`C.P`), clusters (`C`) or owners, and a constraint, as the
/// commands take them.
fn targets(words: &[String], constraint: Option<String>) -> PyResult<Targets> {
    let mut t = Targets::default();
    for w in words {
        if w.starts_with(|c: char| c.is_ascii_digit()) {
            t.ids.push(w.parse().map_err(|e: String| HTCondorException::new_err(e))?);
        } else {
            t.owners.push(w.clone());
        }
    }
    t.constraint = constraint;
    Ok(t)
}

// ---------------------------------------------------------------- event logs

/// One event as Python's `JobEvent` is made from it: its type number, cluster,
/// proc, time (seconds since the epoch), HTCondor's event ClassAd, and its
/// text in the user log (without the closing `...` line).
type RawEvent = (u16, i32, i32, i64, PyClassAd, String);

/// A job event log read as it grows (`htcondor2.JobEventLog`'s reader).
#[pyclass(module = "andes._andes")]
pub struct EventLog {
    follower: andes_job::userlog::Follower,
}

#[pymethods]
impl EventLog {
    /// Follows the log at `path` from its start (it need not exist yet).
    #[new]
    fn new(path: PathBuf) -> Self {
        EventLog { follower: andes_job::userlog::Follower::new(path, Default::default()) }
    }

    /// The events written in full since the last call: `(type number, cluster,
    /// proc, seconds since the epoch, the event's ClassAd, its text)` each.
    /// The text is the event as andes writes it in a user log (HTCondor's
    /// default format: ISO dates in local time), as `htcondor2`'s
    /// `str(event)` gives it: the header line and the body, not the `...`.
    fn poll(&mut self, py: Python<'_>) -> PyResult<Vec<RawEvent>> {
        // A log not written yet holds no events yet (a job's log appears at its submit).
        if !self.follower.path().exists() {
            return Ok(Vec::new());
        }
        let events = py.detach(|| self.follower.poll()).map_err(pool_err)?;
        let opts = andes_job::userlog::FormatOptions::default();
        let sync = format!("{}\n", andes_job::userlog::SYNC_LINE);
        Ok(events
            .into_iter()
            .map(|e| {
                let mut text = e.to_text(&opts);
                if text.ends_with(&sync) {
                    text.truncate(text.len() - sync.len());
                }
                (
                    e.kind.number(),
                    e.id.cluster,
                    e.id.proc,
                    e.time.as_second(),
                    PyClassAd { ad: e.to_ad() },
                    text,
                )
            })
            .collect())
    }
}

// ---------------------------------------------------------------- configuration

/// The configuration as the `andes` command reads it (`andes config-val`):
/// `htcondor2.param`'s table. Loaded from `config` (none: `$ANDES_CONFIG` or
/// the default file) over andes's built-in defaults, with the local files;
/// lookups of `NAME` try `SUBSYSTEM.NAME` first when a subsystem is set.
#[pyclass(module = "andes._andes")]
pub struct Config {
    config: andes_config::Config,
}

#[pymethods]
impl Config {
    #[new]
    #[pyo3(signature = (config=None, subsystem=None))]
    fn new(py: Python<'_>, config: Option<PathBuf>, subsystem: Option<String>) -> PyResult<Self> {
        py.detach(|| {
            let s = settings(config)?;
            let mut config = s.config().clone();
            config.set_subsystem(subsystem.as_deref());
            Ok(Config { config })
        })
        .map_err(anyhow_err)
    }

    /// The knob's value, expanded as `andes config-val` prints it (none:
    /// not defined).
    fn get(&self, name: &str) -> PyResult<Option<String>> {
        self.config.get(name).map_err(pool_err)
    }

    /// Defines (or redefines) a knob in this table only, as a line of a
    /// configuration file would.
    fn set(&mut self, name: &str, value: &str) -> PyResult<()> {
        if value.contains(['\n', '\r']) {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "the value of {name} holds a newline"
            )));
        }
        self.config.set(name, value).map_err(pool_err)
    }

    /// Every knob defined, as written where it was defined last.
    fn names(&self) -> Vec<String> {
        self.config.names().map(str::to_string).collect()
    }

    /// Looks knobs up for `subsystem` from now on (none: no subsystem).
    #[pyo3(signature = (subsystem=None))]
    fn set_subsystem(&mut self, subsystem: Option<String>) {
        self.config.set_subsystem(subsystem.as_deref());
    }
}

/// The native module.
/// The submit context the Python `Submit` methods read a description in:
/// `iwd` the submitting directory, `cluster` the ClusterId, `qdate` the
/// QDate (0: now), `owner` the Owner (none: this process's user), this
/// process's environment for `$ENV()`.
fn submit_context(
    iwd: String,
    cluster: i64,
    qdate: i64,
    owner: Option<String>,
) -> andes_submit::Context<'static> {
    let now = if qdate > 0 { qdate } else { classad::eval::system_now() };
    let mut ctx = andes_submit::Context::new(cluster, now, iwd);
    ctx.owner = owner.or_else(andes_client::settings::user_name);
    ctx.env = std::env::vars().collect();
    ctx
}

/// The value of submit command or macro `name` in the submit description
/// `text`, its macros expanded as for the first job (`Submit.expand`);
/// `None` when nothing defines it.
#[pyfunction]
fn submit_expand(text: &str, name: &str, iwd: String) -> PyResult<Option<String>> {
    check_len(text, "the submit description")?;
    let desc = andes_submit::parse(text, "<submit description>").map_err(pool_err)?;
    andes_submit::expand_value(&desc, &submit_context(iwd, 1, 0, None), name).map_err(pool_err)
}

/// The items of the last queue statement of `text` (`Submit.itemdata`): its
/// variables and each item's values; `None` when it has no items.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn submit_itemdata(text: &str, iwd: String) -> PyResult<Option<(Vec<String>, Vec<Vec<String>>)>> {
    check_len(text, "the submit description")?;
    let desc = andes_submit::parse(text, "<submit description>").map_err(pool_err)?;
    andes_submit::itemdata(&desc, &submit_context(iwd, 1, 0, None)).map_err(pool_err)
}

/// The job ads the submit description `text` makes, as `andes submit` would
/// queue them in cluster `cluster` (`Submit.jobs` / `Submit.procs`): the
/// full ads, and each one's own attributes (those not every job shares).
#[pyfunction]
#[pyo3(signature = (text, iwd, cluster=1, qdate=0, owner=None))]
#[allow(clippy::type_complexity)]
fn submit_jobs(
    py: Python<'_>,
    text: &str,
    iwd: String,
    cluster: i64,
    qdate: i64,
    owner: Option<String>,
) -> PyResult<(Vec<PyClassAd>, Vec<PyClassAd>)> {
    check_len(text, "the submit description")?;
    let desc = andes_submit::parse(text, "<submit description>").map_err(pool_err)?;
    let out = py
        .detach(|| andes_submit::expand(&desc, &submit_context(iwd, cluster, qdate, owner)))
        .map_err(pool_err)?;
    let procs = andes_job::api::factor(out.jobs.clone()).procs;
    let wrap = |ads: Vec<ClassAd>| ads.into_iter().map(|ad| PyClassAd { ad }).collect();
    Ok((wrap(out.jobs), wrap(procs)))
}

/// The user name jobs submitted from this process are owned by (`USER`,
/// `LOGNAME`, `USERNAME`, else the account's), as `andes submit` takes it.
#[pyfunction]
fn user_name() -> Option<String> {
    andes_client::settings::user_name()
}

#[pymodule]
fn _andes(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("HTCondorException", py.get_type::<HTCondorException>())?;
    m.add("ClassAdException", py.get_type::<ClassAdException>())?;
    m.add_class::<PyClassAd>()?;
    m.add_class::<PyExprTree>()?;
    m.add_class::<Session>()?;
    m.add_class::<EventLog>()?;
    m.add_class::<Config>()?;
    m.add_function(wrap_pyfunction!(parse_ads, m)?)?;
    m.add_function(wrap_pyfunction!(quote, m)?)?;
    m.add_function(wrap_pyfunction!(submit_parts, m)?)?;
    m.add_function(wrap_pyfunction!(unquote, m)?)?;
    m.add_function(wrap_pyfunction!(user_name, m)?)?;
    m.add_function(wrap_pyfunction!(submit_expand, m)?)?;
    m.add_function(wrap_pyfunction!(submit_itemdata, m)?)?;
    m.add_function(wrap_pyfunction!(submit_jobs, m)?)?;
    Ok(())
}
