//! The built-ins' tests, family by family, and a sweep of odd arguments
//! through every strict built-in.

use std::sync::Arc;

use super::strftime::strftime;
use super::strings::natural_cmp;
use super::strtod::strtod;
use super::time::{Tm, day_numbers, local_offset};
use super::values::compare_values;
use super::*;
use crate::ast::ClassAd;

fn call(name: &str, args: &[Value]) -> Value {
    let mut rng = Rng::seeded(7);
    let mut budget = Budget::default_budget();
    let mut env = FnEnv { now: 951_782_400, rng: &mut rng, budget: &mut budget };
    match lookup(name) {
        Some(Builtin::Strict(f)) => f(args, &mut env),
        other => panic!("{name} is not a strict builtin: {other:?}"),
    }
}

fn s(x: &str) -> Value {
    Value::string(x)
}
fn i(x: i64) -> Value {
    Value::Int(x)
}
fn r(x: f64) -> Value {
    Value::Real(x)
}
fn b(x: bool) -> Value {
    Value::Bool(x)
}
fn l(items: &[Value]) -> Value {
    Value::list(items.to_vec())
}
fn ad(attrs: &[(&str, Value)]) -> Value {
    let mut a = ClassAd::new();
    for (k, v) in attrs {
        a.insert_value(*k, v.clone());
    }
    Value::Ad(Arc::new(a))
}
const U: Value = Value::Undefined;
const E: Value = Value::Error;

fn strs(items: &[&str]) -> Value {
    Value::list(items.iter().map(|x| s(x)).collect())
}

#[test]
fn lookup_names() {
    assert!(matches!(lookup("ifThenElse"), Some(Builtin::Special(SpecialFn::IfThenElse))));
    assert!(matches!(lookup("EVAL"), Some(Builtin::Special(SpecialFn::Eval))));
    assert!(matches!(lookup("unparse"), Some(Builtin::Special(SpecialFn::Unparse))));
    for n in ["StringListMember", "versionGT", "stringList_regexpMember", "CEIL", "splitSlotName"] {
        assert!(matches!(lookup(n), Some(Builtin::Strict(_))), "{n}");
    }
    for n in
        ["abs", "sqrt", "log", "nosuchfunction", "sprintf", "upperCase", "stringListRegexpMember"]
    {
        assert!(lookup(n).is_none(), "{n}");
    }
}

#[test]
fn type_predicates() {
    assert_eq!(call("isError", &[E]), b(true));
    assert_eq!(call("isString", &[U]), b(false));
    assert_eq!(call("isInteger", &[i(1)]), b(true));
    assert_eq!(call("isInteger", &[r(1.0)]), b(false));
    assert_eq!(call("isReal", &[i(1)]), b(false));
    assert_eq!(call("isReal", &[r(1.0)]), b(true));
    assert_eq!(call("isBoolean", &[i(1)]), b(false));
    assert_eq!(call("isBoolean", &[b(false)]), b(true));
    assert_eq!(call("isList", &[l(&[])]), b(true));
    assert_eq!(call("isClassAd", &[ad(&[])]), b(true));
    assert_eq!(call("isUndefined", &[U]), b(true));
    assert_eq!(call("isUndefined", &[i(3)]), b(false));
    assert_eq!(call("isAbstime", &[i(3)]), b(false));
    assert_eq!(call("isReltime", &[i(3)]), b(false));
    assert_eq!(call("isUndefined", &[]), E);
    assert_eq!(call("isString", &[s("a"), s("b")]), E);
}

#[test]
fn compare_values_rules() {
    assert_eq!(compare_values("==", &s("abc"), &s("ABC")), b(true));
    assert_eq!(compare_values("<", &s("ABC"), &s("abd")), b(true));
    assert_eq!(compare_values("<=", &s("abc"), &s("ABC")), b(true));
    assert_eq!(compare_values("==", &s("1"), &i(1)), E);
    assert_eq!(compare_values("==", &i(2), &r(2.0)), b(true));
    assert_eq!(compare_values("==", &b(true), &i(1)), b(true));
    assert_eq!(compare_values("<", &b(false), &r(0.5)), b(true));
    assert_eq!(compare_values("==", &U, &U), U);
    assert_eq!(compare_values("==", &U, &E), E);
    assert_eq!(compare_values("==", &l(&[]), &i(1)), E);
    assert_eq!(compare_values("!=", &r(f64::NAN), &r(f64::NAN)), b(true));
    assert_eq!(compare_values("==", &r(f64::NAN), &r(f64::NAN)), b(false));
    assert_eq!(compare_values("is", &i(1), &r(1.0)), b(false));
    assert_eq!(compare_values("=?=", &b(true), &i(1)), b(false));
    assert_eq!(compare_values("is", &s("1"), &i(1)), b(false));
    assert_eq!(compare_values("is", &s("a"), &s("A")), b(false));
    assert_eq!(compare_values("is", &U, &U), b(true));
    assert_eq!(compare_values("isnt", &U, &i(1)), b(true));
    assert_eq!(compare_values("is", &l(&[i(1)]), &l(&[i(1)])), E);
    assert_eq!(compare_values("is", &ad(&[]), &ad(&[])), E);
    assert_eq!(compare_values("is", &l(&[i(1)]), &i(1)), b(false));
    assert_eq!(compare_values("is", &r(-0.0), &r(0.0)), b(true));
    assert_eq!(compare_values("is", &r(f64::NAN), &r(f64::NAN)), b(false));
    assert_eq!(compare_values("~", &i(1), &i(1)), E);
}

#[test]
fn membership() {
    assert_eq!(call("member", &[s("A"), strs(&["a", "b"])]), b(true));
    assert_eq!(call("member", &[r(2.0), l(&[i(1), i(2)])]), b(true));
    assert_eq!(call("member", &[U, l(&[i(1), U])]), U);
    assert_eq!(call("member", &[i(1), s("1,2")]), E);
    assert_eq!(call("member", &[i(1), U]), U);
    assert_eq!(call("member", &[E, l(&[E])]), E);
    assert_eq!(call("member", &[l(&[]), l(&[])]), E);
    // Element comparisons that fail are just not matches.
    assert_eq!(call("member", &[i(1), l(&[s("1"), E, U])]), b(false));
    assert_eq!(call("member", &[i(1)]), E);
    assert_eq!(call("identicalMember", &[s("A"), strs(&["a", "b"])]), b(false));
    assert_eq!(call("identicalMember", &[r(2.0), l(&[i(1), i(2)])]), b(false));
    assert_eq!(call("identicalMember", &[U, l(&[i(1), U])]), b(true));
    assert_eq!(call("identicalMember", &[E, l(&[E])]), b(true));
    assert_eq!(call("identicalMember", &[s("x86_64"), strs(&["X86_64", "aarch64"])]), b(false));
    assert_eq!(call("identicalMember", &[ad(&[]), l(&[])]), E);
}

#[test]
fn size_of_things() {
    assert_eq!(call("size", &[s("hello")]), i(5));
    assert_eq!(call("size", &[s("café")]), i(5));
    assert_eq!(call("size", &[l(&[i(1), i(2), i(3)])]), i(3));
    assert_eq!(call("size", &[ad(&[("a", i(1)), ("b", i(2))])]), i(2));
    assert_eq!(call("size", &[U]), U);
    assert_eq!(call("size", &[i(3)]), E);
    assert_eq!(call("size", &[]), E);
}

#[test]
fn aggregates() {
    assert_eq!(call("sum", &[l(&[i(1), i(2), i(3)])]), i(6));
    assert_eq!(call("sum", &[l(&[])]), i(0));
    assert_eq!(call("sum", &[l(&[i(1), U])]), i(1));
    assert_eq!(call("sum", &[l(&[U])]), i(0));
    assert_eq!(call("sum", &[l(&[i(1), r(0.5)])]), r(1.5));
    assert_eq!(call("sum", &[l(&[b(true), b(true)])]), i(2));
    assert_eq!(call("sum", &[l(&[b(true)])]), b(true));
    assert_eq!(call("sum", &[l(&[i(i64::MAX), i(1)])]), i(i64::MIN));
    assert_eq!(call("sum", &[l(&[r(1e308), r(1e308)])]), E);
    assert_eq!(call("sum", &[l(&[s("1")])]), E);
    assert_eq!(call("sum", &[U]), U);
    assert_eq!(call("sum", &[i(1)]), E);
    assert_eq!(call("avg", &[l(&[i(1), i(2), i(3), i(4)])]), r(2.5));
    assert_eq!(call("avg", &[l(&[])]), i(0));
    assert_eq!(call("avg", &[l(&[U, i(4)])]), r(4.0));
    assert_eq!(call("min", &[l(&[])]), U);
    assert_eq!(call("max", &[l(&[])]), U);
    assert_eq!(call("min", &[l(&[s("a"), i(1)])]), E);
    assert_eq!(call("max", &[l(&[i(1), r(2.0)])]), r(2.0));
    assert_eq!(call("max", &[l(&[i(1), U])]), i(1));
    assert_eq!(call("max", &[l(&[i(2), r(2.0)])]), i(2));
    assert_eq!(call("min", &[l(&[i(3), r(-1.5), i(2)])]), r(-1.5));
    assert_eq!(call("max", &[l(&[b(true), i(0)])]), b(true));
    assert_eq!(call("max", &[U]), U);
    assert_eq!(call("max", &[s("1,2")]), E);
}

#[test]
fn any_all_compare() {
    assert_eq!(call("anyCompare", &[s("<"), l(&[i(1), i(2), i(3)]), i(2)]), b(true));
    assert_eq!(call("anyCompare", &[s(">"), l(&[i(1), i(2)]), i(2)]), b(false));
    assert_eq!(call("allCompare", &[s(">="), l(&[i(2), i(3)]), i(2)]), b(true));
    assert_eq!(call("allCompare", &[s(">"), l(&[i(2), i(3)]), i(2)]), b(false));
    assert_eq!(call("allCompare", &[s("<"), l(&[]), i(2)]), b(true));
    assert_eq!(call("anyCompare", &[s("<"), l(&[]), i(2)]), b(false));
    assert_eq!(call("anyCompare", &[s("=="), strs(&["A"]), s("a")]), b(true));
    assert_eq!(call("anyCompare", &[s("is"), strs(&["A"]), s("a")]), b(false));
    assert_eq!(call("anyCompare", &[s("isnt"), l(&[i(1)]), U]), b(true));
    // An undefined comparison ends the scan with false.
    assert_eq!(call("anyCompare", &[s("=="), l(&[U, i(2)]), i(2)]), b(false));
    assert_eq!(call("allCompare", &[s("=="), l(&[U]), i(2)]), b(false));
    assert_eq!(call("anyCompare", &[s("=="), l(&[s("x"), i(2)]), i(2)]), E);
    assert_eq!(call("anyCompare", &[s("=?="), l(&[i(2)]), i(2)]), E);
    assert_eq!(call("anyCompare", &[s("IS"), l(&[i(2)]), i(2)]), E);
    assert_eq!(call("anyCompare", &[U, l(&[i(2)]), i(2)]), U);
    assert_eq!(call("anyCompare", &[s("<"), U, i(2)]), U);
    assert_eq!(call("anyCompare", &[s("<"), i(1), i(2)]), E);
    assert_eq!(call("anyCompare", &[i(1), l(&[]), i(2)]), E);
    assert_eq!(call("anyCompare", &[s("<"), l(&[])]), E);
}

#[test]
fn strcat_and_join() {
    assert_eq!(call("strcat", &[s("a"), s("b"), s("c")]), s("abc"));
    assert_eq!(call("strcat", &[]), s(""));
    assert_eq!(call("strcat", &[s("n="), i(5)]), s("n=5"));
    assert_eq!(call("strcat", &[s("r="), r(1.5)]), s("r=1.500000000000000E+00"));
    assert_eq!(call("strcat", &[s("e="), E]), E);
    assert_eq!(call("strcat", &[l(&[i(1)]), s("x")]), s("{ 1 }x"));
    assert_eq!(call("strcat", &[s("a"), U]), U);
    assert_eq!(call("strcat", &[s("a"), U, E]), U);
    assert_eq!(call("strcat", &[b(true), s("/"), r(0.0)]), s("true/0.0"));
    assert_eq!(call("join", &[s(", "), strs(&["a", "b", "c"])]), s("a, b, c"));
    assert_eq!(call("join", &[s(":"), l(&[])]), s(""));
    assert_eq!(call("join", &[s(","), l(&[s("a"), U, s("c")])]), s("a,c"));
    assert_eq!(call("join", &[s(", "), s("a"), s("b"), s("c")]), s("a, b, c"));
    assert_eq!(call("join", &[strs(&["a", "b", "c"])]), s("abc"));
    assert_eq!(
        call("join", &[s(";"), l(&[i(1), r(2.5), l(&[i(3)])])]),
        s("1;2.500000000000000E+00;{ 3 }")
    );
    assert_eq!(call("join", &[s(","), l(&[U])]), U);
    assert_eq!(call("join", &[U, strs(&["a", "b"])]), s("ab"));
    assert_eq!(call("join", &[s(","), l(&[E])]), E);
    assert_eq!(call("join", &[s(","), s(""), s("a"), s("b")]), s("a,b"));
    assert_eq!(call("join", &[s(",")]), s(""));
    assert_eq!(call("join", &[]), s(""));
    assert_eq!(call("join", &[i(0), s("a"), s("b")]), s("a0b"));
}

#[test]
fn case_and_substr() {
    assert_eq!(call("toLower", &[s("MixEd 1")]), s("mixed 1"));
    assert_eq!(call("toUpper", &[i(5)]), s("5"));
    assert_eq!(call("toUpper", &[s("café")]), s("CAFé"));
    assert_eq!(call("toUpper", &[strs(&["a"])]), s("{ \"A\" }"));
    assert_eq!(call("toUpper", &[U]), U);
    assert_eq!(call("toLower", &[E]), E);
    assert_eq!(call("toLower", &[]), E);
    assert_eq!(call("substr", &[s("abcdef"), i(-2)]), s("ef"));
    assert_eq!(call("substr", &[s("abcdef"), i(1), i(2)]), s("bc"));
    assert_eq!(call("substr", &[s("abcdef"), i(1), i(-2)]), s("bcd"));
    assert_eq!(call("substr", &[s("abcdef"), i(1), i(0)]), s(""));
    assert_eq!(call("substr", &[s("abcdef"), i(10)]), s(""));
    assert_eq!(call("substr", &[s("abcdef"), i(-10), i(2)]), s("ab"));
    assert_eq!(call("substr", &[s("abcdef"), i(2), i(100)]), s("cdef"));
    assert_eq!(call("substr", &[s("abc"), i(1), i(-10)]), s(""));
    assert_eq!(call("substr", &[s("abc"), i(4_294_967_297)]), s("bc"));
    assert_eq!(call("substr", &[i(123_456), i(1), i(2)]), E);
    assert_eq!(call("substr", &[U, i(1)]), U);
    assert_eq!(call("substr", &[s("abc"), U]), U);
    assert_eq!(call("substr", &[s("abc"), r(1.9)]), E);
    assert_eq!(call("substr", &[s("abc"), i(1), s("1")]), E);
    assert_eq!(call("substr", &[s("abc")]), E);
    // Byte offsets: a cut through a character does not panic.
    assert_eq!(call("substr", &[s("café"), i(0), i(4)]), s("caf\u{fffd}"));
}

#[test]
fn string_comparisons() {
    assert_eq!(call("strcmp", &[s("a"), s("a")]), i(0));
    assert_eq!(call("strcmp", &[s("a"), s("A")]), i(1));
    assert_eq!(call("strcmp", &[s("abc"), s("ab")]), i(1));
    assert_eq!(call("strcmp", &[s("ab"), s("abc")]), i(-1));
    assert_eq!(call("strcmp", &[i(1), s("1")]), i(0));
    assert_eq!(call("strcmp", &[U, s("1")]), U);
    assert_eq!(call("strcmp", &[E, s("1")]), E);
    assert_eq!(call("strcmp", &[s("1")]), E);
    assert_eq!(call("stricmp", &[s("abc"), s("abd")]), i(-1));
    assert_eq!(call("stricmp", &[s("B"), s("a")]), i(1));
    assert_eq!(call("stricmp", &[s("ABC"), s("abc")]), i(0));
    assert_eq!(call("stricmp", &[b(true), s("TRUE")]), i(0));
}

#[test]
fn versions() {
    assert_eq!(call("versioncmp", &[s("7.9"), s("7.10")]), i(-1));
    assert_eq!(call("versioncmp", &[s("1.2"), s("1.2")]), i(0));
    assert_eq!(call("versioncmp", &[s("a"), s("c")]), i(-2));
    assert_eq!(call("versioncmp", &[s("7.x"), s("7.y")]), i(-1));
    let order = ["000", "00", "01", "010", "09", "0", "1", "9", "10"];
    for w in order.windows(2) {
        let c = call("versioncmp", &[s(w[0]), s(w[1])]);
        assert!(matches!(c, Value::Int(n) if n < 0), "{w:?}: {c:?}");
        assert_eq!(call("versionLT", &[s(w[0]), s(w[1])]), b(true), "{w:?}");
        assert_eq!(call("versionGT", &[s(w[1]), s(w[0])]), b(true), "{w:?}");
    }
    assert_eq!(call("versionGE", &[s("8.9.1"), s("8.9.1")]), b(true));
    assert_eq!(call("versionLE", &[s("8.10.1"), s("8.9.1")]), b(false));
    assert_eq!(call("versionEQ", &[s("8.9"), s("8.9")]), b(true));
    assert_eq!(call("versionEQ", &[i(8), s("8")]), b(true));
    assert_eq!(call("versioncmp", &[U, s("1")]), U);
    assert_eq!(call("versioncmp", &[E, s("1")]), E);
    assert_eq!(call("versioncmp", &[s("1")]), E);
    assert_eq!(call("version_in_range", &[s("8.9.3"), s("8.9.0"), s("8.10.0")]), b(true));
    assert_eq!(call("version_in_range", &[s("8.11"), s("8.9.0"), s("8.10.0")]), b(false));
    assert_eq!(call("version_in_range", &[s("8.11"), U, s("8.10.0")]), U);
    assert_eq!(call("version_in_range", &[U, s("1"), s("2")]), E);
    assert_eq!(call("version_in_range", &[E, s("1"), s("2")]), E);
}

#[test]
fn regexps() {
    assert_eq!(call("regexp", &[s("A"), s("xax"), s("i")]), b(true));
    assert_eq!(call("regexp", &[s("A"), s("xax")]), b(false));
    assert_eq!(call("regexp", &[s("A"), s("xax"), s("I")]), b(false));
    assert_eq!(call("regexp", &[s("a"), U]), U);
    assert_eq!(call("regexp", &[E, U]), E);
    assert_eq!(call("regexp", &[s("a"), s("a"), U]), U);
    assert_eq!(call("regexp", &[s("a"), s("a"), i(1)]), E);
    assert_eq!(call("regexp", &[s("a"), i(1)]), E);
    assert_eq!(call("regexp", &[s("(")]), E);
    assert_eq!(call("regexp", &[s("("), s("(")]), E);
    assert_eq!(call("regexp", &[s(r"^(\d+)-(\d+)$"), s("12-34")]), b(true));
    assert_eq!(call("regexp", &[s("^b$"), s("a\nb"), s("m")]), b(true));
    assert_eq!(call("regexp", &[s("^b$"), s("a\nb")]), b(false));
    assert_eq!(call("regexp", &[s("a.b"), s("a\nb"), s("s")]), b(true));
    assert_eq!(call("regexp", &[s("a.b"), s("a\nb")]), b(false));
    assert_eq!(call("regexp", &[s("a b # comment"), s("ab"), s("x")]), b(true));
    assert_eq!(call("regexp", &[s("caf."), s("café")]), b(true));
    assert_eq!(call("regexp", &[s("^é$"), s("é")]), b(true));
    assert_eq!(call("regexps", &[s(r"(\w+)@(\w+)"), s("user@host"), s(r"\2:\1")]), s("host:user"));
    assert_eq!(call("regexps", &[s("o"), s("foo"), s("0")]), s("0"));
    assert_eq!(call("regexps", &[s("o"), s("foo"), s("0"), s("g")]), s("00"));
    assert_eq!(call("regexps", &[s("o"), s("foo"), s("0"), s("f")]), s("f0o"));
    assert_eq!(call("regexps", &[s("x"), s("foo"), s("0")]), s(""));
    assert_eq!(call("regexps", &[s("(a)|(b)"), s("b"), s(r"[\1]")]), s("[]"));
    assert_eq!(call("regexps", &[s("(a)|(b)"), s("a"), s(r"[\2]")]), E);
    assert_eq!(call("regexps", &[s("a"), s("a"), s(r"\n\\0")]), s(r"\n\a"));
    assert_eq!(call("regexps", &[s("a"), s("a"), s("x\\")]), s("x\\"));
    assert_eq!(call("regexps", &[s("a"), s("a"), U]), U);
    assert_eq!(call("regexps", &[s("a"), s("a"), i(1)]), E);
    assert_eq!(call("regexps", &[s("a"), s("a")]), E);
    assert_eq!(call("replace", &[s("o"), s("foo"), s("0")]), s("f0o"));
    assert_eq!(call("replaceall", &[s("o"), s("foo"), s("0")]), s("f00"));
    assert_eq!(call("replaceall", &[s("O"), s("foo"), s("0"), s("i")]), s("f00"));
    assert_eq!(call("replaceall", &[s(r"(\d+)"), s("a1b22c"), s(r"<\1>")]), s("a<1>b<22>c"));
    assert_eq!(call("replaceall", &[s("^"), s("abc"), s("-")]), s("-abc"));
    // HTCondor's global substitution fails when a match can be empty at the end.
    assert_eq!(call("replaceall", &[s("x*"), s("abc"), s("-")]), E);
    assert_eq!(call("replace", &[s("x*"), s("abc"), s("-")]), s("-abc"));
    assert_eq!(call("replace", &[s("b"), s("abc"), s(r"\0\0")]), s("abbc"));
}

#[test]
fn regexp_member_fn() {
    assert_eq!(call("regexpMember", &[s("^b"), strs(&["a", "bc"])]), b(true));
    assert_eq!(call("regexpMember", &[s("^B"), strs(&["a", "bc"]), s("i")]), b(true));
    assert_eq!(call("regexpMember", &[s("^z"), strs(&["a", "bc"])]), b(false));
    assert_eq!(call("regexpMember", &[s("^z"), l(&[s("a"), U])]), U);
    assert_eq!(call("regexpMember", &[s("^a"), l(&[s("a"), U])]), b(true));
    assert_eq!(call("regexpMember", &[s("^z"), l(&[i(1), s("z")])]), E);
    assert_eq!(call("regexpMember", &[s("^z"), s("z")]), E);
    assert_eq!(call("regexpMember", &[s("("), strs(&["a"])]), b(false));
    assert_eq!(call("regexpMember", &[U, strs(&["a"])]), U);
}

#[test]
fn conversions() {
    assert_eq!(call("int", &[b(true)]), i(1));
    assert_eq!(call("int", &[U]), U);
    assert_eq!(call("int", &[E]), E);
    assert_eq!(call("int", &[s("12abc")]), i(12));
    assert_eq!(call("int", &[s(" 12")]), i(12));
    assert_eq!(call("int", &[s("-3.9")]), i(-3));
    assert_eq!(call("int", &[s("1e3")]), i(1000));
    assert_eq!(call("int", &[s("0x1A")]), i(26));
    assert_eq!(call("int", &[s("abc")]), E);
    assert_eq!(call("int", &[s("")]), E);
    assert_eq!(call("int", &[r(1e30)]), i(i64::MIN));
    assert_eq!(call("int", &[r(-2.7)]), i(-2));
    assert_eq!(call("int", &[l(&[])]), E);
    assert_eq!(call("int", &[]), E);
    assert_eq!(call("real", &[s("2.5")]), r(2.5));
    assert_eq!(call("real", &[s("x")]), E);
    assert_eq!(call("real", &[U]), U);
    assert_eq!(call("real", &[s("inf")]), r(f64::INFINITY));
    assert_eq!(call("real", &[s("-Infinity")]), r(f64::NEG_INFINITY));
    assert!(matches!(call("real", &[s("nan")]), Value::Real(x) if x.is_nan()));
    assert_eq!(call("real", &[s(".5e1x")]), r(5.0));
    assert_eq!(call("real", &[s("1e400")]), r(f64::INFINITY));
    assert_eq!(call("real", &[s("0x1p-2")]), r(0.25));
    assert_eq!(call("real", &[s("0x")]), r(0.0));
    assert_eq!(call("real", &[s("-")]), E);
    assert_eq!(call("real", &[s("1e")]), r(1.0));
    assert_eq!(call("real", &[i(3)]), r(3.0));
    assert_eq!(call("real", &[b(false)]), r(0.0));
    assert_eq!(call("real", &[ad(&[])]), E);
    assert_eq!(call("string", &[r(-1.5)]), s("-1.500000000000000E+00"));
    assert_eq!(call("string", &[r(0.1)]), s("1.000000000000000E-01"));
    assert_eq!(call("string", &[b(true)]), s("true"));
    assert_eq!(call("string", &[U]), U);
    assert_eq!(call("string", &[E]), E);
    assert_eq!(call("string", &[l(&[i(1), i(2)])]), s("{ 1,2 }"));
    assert_eq!(call("string", &[ad(&[("a", i(1))])]), s("[ a = 1 ]"));
    assert_eq!(call("string", &[s("x")]), s("x"));
    assert_eq!(call("bool", &[s("FALSE")]), b(false));
    assert_eq!(call("bool", &[s("true")]), b(true));
    assert_eq!(call("bool", &[s("yes")]), U);
    assert_eq!(call("bool", &[i(2)]), b(true));
    assert_eq!(call("bool", &[r(0.5)]), b(true));
    assert_eq!(call("bool", &[r(0.0)]), b(false));
    assert_eq!(call("bool", &[U]), U);
    assert_eq!(call("bool", &[E]), E);
    assert_eq!(call("bool", &[l(&[])]), E);
}

#[test]
fn rounding_and_pow() {
    assert_eq!(call("ceiling", &[r(2.1)]), i(3));
    assert_eq!(call("ceiling", &[r(-2.1)]), i(-2));
    assert_eq!(call("ceil", &[r(2.1)]), i(3));
    assert_eq!(call("floor", &[r(-2.1)]), i(-3));
    assert_eq!(call("floor", &[i(7)]), i(7));
    assert_eq!(call("floor", &[s("2.7")]), i(2));
    assert_eq!(call("floor", &[b(true)]), i(1));
    assert_eq!(call("floor", &[U]), E);
    assert_eq!(call("floor", &[s("x")]), E);
    assert_eq!(call("floor", &[r(1e300)]), i(i64::MIN));
    assert_eq!(call("round", &[r(2.5)]), i(2));
    assert_eq!(call("round", &[r(-2.5)]), i(-2));
    assert_eq!(call("round", &[r(3.5)]), i(4));
    assert_eq!(call("round", &[r(2.6)]), i(3));
    assert_eq!(call("round", &[]), E);
    assert_eq!(call("pow", &[i(2), i(-1)]), r(0.5));
    assert_eq!(call("pow", &[i(2), r(0.5)]), r(std::f64::consts::SQRT_2));
    assert_eq!(call("pow", &[i(2), i(63)]), i(i64::MIN));
    assert_eq!(call("pow", &[i(2), i(10)]), i(1024));
    assert_eq!(call("pow", &[i(0), i(0)]), i(1));
    assert_eq!(call("pow", &[r(0.0), r(0.0)]), r(1.0));
    assert_eq!(call("pow", &[s("2"), i(2)]), r(4.0));
    assert_eq!(call("pow", &[b(true), i(2)]), r(1.0));
    // HTCondor adds 0.5 and truncates, so odd powers of negatives are off by one.
    assert_eq!(call("pow", &[i(-2), i(3)]), i(-7));
    assert_eq!(call("pow", &[U, i(2)]), E);
    assert_eq!(call("pow", &[i(2)]), E);
}

#[test]
fn quantize_fn() {
    assert_eq!(call("quantize", &[i(0), i(4)]), i(0));
    assert_eq!(call("quantize", &[i(3), i(8)]), i(8));
    assert_eq!(call("quantize", &[i(3), i(2)]), i(4));
    assert_eq!(call("quantize", &[r(2.5), i(2)]), r(4.0));
    assert_eq!(call("quantize", &[i(5), r(2.5)]), r(5.0));
    assert_eq!(call("quantize", &[r(1.5), r(6.8)]), r(6.8));
    assert_eq!(call("quantize", &[i(1500), l(&[i(1024), i(2048), i(4096)])]), i(2048));
    assert_eq!(call("quantize", &[i(5000), l(&[i(1024), i(2048), i(4096)])]), i(8192));
    assert_eq!(call("quantize", &[i(3), l(&[i(1), r(2.5), i(4)])]), i(4));
    assert_eq!(call("quantize", &[i(0), l(&[i(4)])]), i(4));
    assert_eq!(call("quantize", &[i(2), l(&[i(1), i(2), s("A")])]), i(2));
    assert_eq!(call("quantize", &[i(3), l(&[i(1), i(2), r(0.5)])]), r(3.0));
    assert_eq!(call("quantize", &[r(2.7), l(&[i(1), i(2), r(0.5)])]), r(3.0));
    assert_eq!(call("quantize", &[i(3), l(&[i(1), i(2), s("A")])]), E);
    assert_eq!(call("quantize", &[i(7), l(&[])]), i(7));
    assert_eq!(call("quantize", &[i(-3), i(2)]), i(-2));
    assert_eq!(call("quantize", &[i(5), i(0)]), i(5));
    assert_eq!(call("quantize", &[r(5.5), r(0.0)]), r(5.5));
    assert_eq!(call("quantize", &[U, i(4)]), E);
    assert_eq!(call("quantize", &[i(4), U]), E);
    assert_eq!(call("quantize", &[i(4)]), E);
}

#[test]
fn random_fn() {
    for _ in 0..50 {
        assert!(matches!(call("random", &[i(10)]), Value::Int(n) if (0..10).contains(&n)));
        assert!(matches!(call("random", &[r(2.5)]), Value::Real(x) if (0.0..2.5).contains(&x)));
        assert!(matches!(call("random", &[]), Value::Real(x) if (0.0..1.0).contains(&x)));
    }
    assert_eq!(call("random", &[i(1)]), i(0));
    assert_eq!(call("random", &[i(0)]), E);
    assert_eq!(call("random", &[i(-5)]), E);
    assert_eq!(call("random", &[r(0.0)]), E);
    assert_eq!(call("random", &[i(1 << 32)]), E);
    assert_eq!(call("random", &[s("5")]), E);
    assert_eq!(call("random", &[U]), E);
    assert_eq!(call("random", &[i(1), i(2)]), E);
}

#[test]
fn interval_fn() {
    assert_eq!(call("interval", &[i(0)]), s("0"));
    assert_eq!(call("interval", &[i(60)]), s("1:00"));
    assert_eq!(call("interval", &[i(67)]), s("1:07"));
    assert_eq!(call("interval", &[i(3600)]), s("1:00:00"));
    assert_eq!(call("interval", &[i(86400)]), s("1+00:00:00"));
    assert_eq!(call("interval", &[i(90061)]), s("1+01:01:01"));
    assert_eq!(call("interval", &[i(1_000_000)]), s("11+13:46:40"));
    assert_eq!(call("interval", &[i(1_472_523)]), s("17+01:02:03"));
    assert_eq!(call("interval", &[i(-5)]), s("-5"));
    assert_eq!(call("interval", &[i(-65)]), s("-1:05"));
    assert_eq!(call("interval", &[i(-90061)]), s("-1+01:01:01"));
    assert_eq!(call("interval", &[r(1.5)]), s("1"));
    assert_eq!(call("interval", &[s("90")]), s("1:30"));
    assert_eq!(call("interval", &[b(true)]), s("1"));
    assert_eq!(call("interval", &[U]), E);
    assert_eq!(call("interval", &[s("x")]), E);
    assert_eq!(call("interval", &[]), E);
}

fn tm(year: i64, mon: i64, mday: i64, hour: i64, min: i64, sec: i64) -> Tm {
    let (wday, yday) = day_numbers(year, mon, mday);
    Tm { year, mon: mon - 1, mday, hour, min, sec, wday, yday }
}

fn fmt(f: &str, t: &Tm) -> String {
    let mut out = Vec::new();
    assert!(strftime(f.as_bytes(), t, 951_782_400, "UTC", &mut out));
    String::from_utf8(out).unwrap()
}

#[test]
fn strftime_conversions() {
    let t = tm(2000, 2, 29, 13, 5, 9);
    assert_eq!(fmt("%Y/%m/%d %a %j", &t), "2000/02/29 Tue 060");
    assert_eq!(fmt("%c", &t), "Tue Feb 29 13:05:09 2000");
    assert_eq!(fmt("%A %B %b %h %e|%d", &t), "Tuesday February Feb Feb 29|29");
    assert_eq!(fmt("%H %I %k %l %M %S %p %P", &t), "13 01 13  1 05 09 PM pm");
    assert_eq!(
        fmt("%D %x %X %T %R %r %F", &t),
        "02/29/00 02/29/00 13:05:09 13:05:09 13:05 01:05:09 PM 2000-02-29"
    );
    assert_eq!(fmt("%C %y %G %g %V %u %w %U %W", &t), "20 00 2000 00 09 2 2 09 09");
    assert_eq!(fmt("%z %Z %s %% %n%t", &t), "+0000 UTC 951782400 % \n\t");
    assert_eq!(fmt("%-d %_m %5Y %^a %#b %010d %-j", &t), "29  2 02000 TUE FEB 0000000029 60");
    assert_eq!(fmt("%q %Ey %Od %", &t), "%q 00 29 %");
    let jan1 = tm(2021, 1, 1, 0, 0, 0);
    assert_eq!(fmt("%G-W%V-%u %a %U %W", &jan1), "2020-W53-5 Fri 00 00");
    let t2 = tm(1999, 12, 5, 0, 0, 0);
    assert_eq!(fmt("%e|%I %p|%j", &t2), " 5|12 AM|339");
    let mut out = Vec::new();
    assert!(!strftime(b"%2000Y", &t, 0, "", &mut out));
    let long = "x".repeat(2000);
    let mut out = Vec::new();
    assert!(!strftime(long.as_bytes(), &t, 0, "", &mut out));
}

#[test]
fn format_and_split_time() {
    let utc = local_offset(951_782_400) == 0 && local_offset(0) == 0;
    if utc {
        assert_eq!(
            call("formatTime", &[i(951_782_400), s("%Y/%m/%d %a %j")]),
            s("2000/02/29 Tue 060")
        );
        assert_eq!(call("formatTime", &[r(951_782_400.9), s("%H:%M:%S")]), s("00:00:00"));
        assert_eq!(call("formatTime", &[i(951_782_400)]), s("Tue Feb 29 00:00:00 2000"));
        assert_eq!(call("formatTime", &[]), s("Tue Feb 29 00:00:00 2000"));
        assert_eq!(call("formatTime", &[i(-1), s("%F %T")]), s("1969-12-31 23:59:59"));
        assert_eq!(call("formatTime", &[r(1e10), s("%Y")]), s("1901"));
        assert_eq!(
            call("splitTime", &[i(951_782_400)]),
            ad(&[
                ("Type", s("AbsoluteTime")),
                ("Year", i(2000)),
                ("Month", i(2)),
                ("Day", i(29)),
                ("Hours", i(0)),
                ("Minutes", i(0)),
                ("Seconds", i(0)),
                ("Offset", i(0)),
            ])
        );
    }
    let split = ad(&[("Year", i(2024)), ("Month", i(7)), ("Day", i(4)), ("Hours", i(9))]);
    assert_eq!(
        call("formatTime", &[split, s("%A %d %B %Y %H:%M")]),
        s("Thursday 04 July 2024 09:00")
    );
    assert_eq!(call("formatTime", &[ad(&[]), s("%Y %m %d")]), s("1900 01 00"));
    assert_eq!(call("formatTime", &[s("x"), s("%Y")]), E);
    assert_eq!(call("formatTime", &[U, s("%Y")]), E);
    assert_eq!(call("formatTime", &[b(true)]), E);
    assert_eq!(call("formatTime", &[i(0), U]), E);
    assert_eq!(call("formatTime", &[i(0), i(1)]), E);
    assert_eq!(call("formatTime", &[i(0), s("%Y"), s("")]), E);
    assert_eq!(call("formatTime", &[i(i64::MAX), s("%Y")]), E);
    assert_eq!(call("formatTime", &[i(0), s(&"%c".repeat(100))]), s(""));
    assert_eq!(call("splitTime", &[U]), U);
    assert_eq!(call("splitTime", &[ad(&[])]), E);
    assert_eq!(call("splitTime", &[s("1")]), E);
    assert_eq!(call("splitTime", &[]), E);
    assert_eq!(call("time", &[]), i(951_782_400));
    assert_eq!(call("time", &[i(1)]), E);
}

#[test]
fn splitting() {
    assert_eq!(call("split", &[s("a,b;c"), s(",;")]), strs(&["a", "b", "c"]));
    assert_eq!(call("split", &[s("")]), strs(&[]));
    assert_eq!(call("split", &[s(" a, b ,c ")]), strs(&["a", "b", "", "c"]));
    assert_eq!(call("split", &[s("a b  c")]), strs(&["a", "b", "c"]));
    assert_eq!(call("split", &[s("a,,b")]), strs(&["a", "", "b"]));
    assert_eq!(call("split", &[s("a b"), s("")]), strs(&["a b"]));
    assert_eq!(call("split", &[s("a\nb")]), strs(&["a\nb"]));
    assert_eq!(call("split", &[U]), E);
    assert_eq!(call("split", &[s("a"), U]), E);
    assert_eq!(call("split", &[]), E);
    assert_eq!(call("splitUserName", &[s("alice@example.org")]), strs(&["alice", "example.org"]));
    assert_eq!(call("splitUserName", &[s("bob")]), strs(&["bob", ""]));
    assert_eq!(call("splitUserName", &[s("a@b@c")]), strs(&["a", "b@c"]));
    assert_eq!(call("splitSlotName", &[s("slot1@machine")]), strs(&["slot1", "machine"]));
    assert_eq!(call("splitSlotName", &[s("machine")]), strs(&["", "machine"]));
    assert_eq!(call("splitUserName", &[U]), E);
    assert_eq!(call("splitUserName", &[s("a"), s("b")]), E);
}

#[test]
fn string_lists() {
    assert_eq!(call("stringListMember", &[s("b"), s("a,b,c")]), b(true));
    assert_eq!(call("stringListMember", &[s("B"), s("a,b,c")]), b(false));
    assert_eq!(call("stringListIMember", &[s("B"), s("a,b,c")]), b(true));
    assert_eq!(call("stringListMember", &[s("b"), s("a;b;c"), s(";")]), b(true));
    assert_eq!(call("stringListMember", &[s("b"), s("a, b ,c")]), b(true));
    assert_eq!(call("stringListMember", &[s("b"), s("a\tb")]), b(true));
    assert_eq!(call("stringListMember", &[s(" b"), s("a,b")]), b(false));
    assert_eq!(call("stringListMember", &[U, s("a,b")]), b(false));
    assert_eq!(call("stringListMember", &[s("a"), U]), b(false));
    assert_eq!(call("stringListMember", &[U, U]), U);
    assert_eq!(call("stringListMember", &[s("a"), s("a;b"), U]), b(false));
    assert_eq!(call("stringListMember", &[i(1), s("1,2")]), E);
    assert_eq!(call("stringListMember", &[s("1"), s("1,2"), i(1)]), E);
    assert_eq!(call("stringListMember", &[s("1")]), E);
    assert_eq!(call("stringListSubsetMatch", &[s("a,b"), s("b,c,a")]), b(true));
    assert_eq!(call("stringListSubsetMatch", &[s("a,B"), s("b,c,a")]), b(false));
    assert_eq!(call("stringListISubsetMatch", &[s("a,B"), s("b,c,a")]), b(true));
    assert_eq!(call("stringListSubsetMatch", &[s(""), s("b")]), b(true));
    assert_eq!(call("stringListSubsetMatch", &[U, s("b")]), b(true));
    assert_eq!(call("stringListSubsetMatch", &[s("a"), U]), b(false));
    assert_eq!(call("stringListSubsetMatch", &[U, U]), U);
    assert_eq!(call("stringListSubsetMatch", &[s(" , "), s("a")]), b(false));
    assert_eq!(call("stringListSize", &[s("")]), i(0));
    assert_eq!(call("stringListSize", &[s("a b,c")]), i(3));
    assert_eq!(call("stringListSize", &[s("a;b"), s(";")]), i(2));
    assert_eq!(call("stringListSize", &[s(" , ,a")]), i(1));
    assert_eq!(call("stringListSize", &[s("a\tb")]), i(1));
    assert_eq!(call("stringListSize", &[U]), E);
    assert_eq!(call("stringListSize", &[s("a"), U]), E);
    assert_eq!(call("stringListSum", &[s("")]), r(0.0));
    assert_eq!(call("stringListSum", &[s("1,2,3")]), i(6));
    assert_eq!(call("stringListSum", &[s("1,2.5")]), r(3.5));
    assert_eq!(call("stringListSum", &[s("1,x")]), E);
    assert_eq!(call("stringListSum", &[s("12abc")]), r(12.0));
    assert_eq!(call("stringListAvg", &[s("1,2,3,4")]), i(2));
    assert_eq!(call("stringListAvg", &[s("")]), r(0.0));
    assert_eq!(call("stringListAvg", &[s("1.0,2")]), r(1.5));
    assert_eq!(call("stringListMax", &[s("3,1,2.5")]), r(3.0));
    assert_eq!(call("stringListMax", &[s("3,1,2")]), i(3));
    assert_eq!(call("stringListMin", &[s("3,1,2")]), i(1));
    assert_eq!(call("stringListMin", &[s("")]), U);
    assert_eq!(call("stringListMax", &[s("")]), U);
    // HTCondor starts max at FLT_MIN and min at FLT_MAX.
    assert_eq!(call("stringListMax", &[s("-5,-3")]), i(0));
    assert_eq!(call("stringListMax", &[s("-5.5")]), r(f32::MIN_POSITIVE as f64));
    assert_eq!(call("stringListMin", &[s("1e39")]), r(f32::MAX as f64));
    assert_eq!(call("stringListMin", &[s("-1;-2"), s(";")]), i(-2));
    assert_eq!(call("stringListMin", &[i(1)]), E);
    assert_eq!(call("stringListSum", &[]), E);
}

#[test]
fn string_list_intersect_and_regexp() {
    assert_eq!(call("stringListsIntersect", &[s("a,b"), s("c,b")]), b(true));
    assert_eq!(call("stringListsIntersect", &[s("a,b"), s("c,d")]), b(false));
    assert_eq!(call("stringListsIntersect", &[s("a b"), s("b")]), b(true));
    assert_eq!(call("stringListsIntersect", &[s("a;b"), s("b;c"), s(";")]), b(true));
    assert_eq!(call("stringListsIntersect", &[s("a;b"), s("b;c"), s("")]), b(false));
    assert_eq!(call("stringListsIntersect", &[s("a,\tb"), s("b")]), b(false));
    assert_eq!(call("stringListsIntersect", &[U, s("b")]), U);
    assert_eq!(call("stringListsIntersect", &[U, E]), E);
    assert_eq!(call("stringListsIntersect", &[s("a"), s("a"), U]), U);
    assert_eq!(call("stringListsIntersect", &[s("a"), s("a"), i(1)]), E);
    assert_eq!(call("stringListsIntersect", &[i(1), s("1")]), E);
    assert_eq!(call("stringListsIntersect", &[s("a")]), E);
    assert_eq!(call("stringList_regexpMember", &[s("^b"), s("a, bc")]), b(true));
    assert_eq!(call("stringList_regexpMember", &[s("^B"), s("a;bc"), s(";"), s("I")]), b(true));
    assert_eq!(call("stringList_regexpMember", &[s("^z"), s("a, bc")]), b(false));
    assert_eq!(call("stringList_regexpMember", &[s("^z"), s("")]), U);
    assert_eq!(call("stringList_regexpMember", &[s("("), s("a")]), E);
    assert_eq!(call("stringList_regexpMember", &[s("a"), U]), E);
    assert_eq!(call("stringList_regexpMember", &[s("a")]), E);
}

#[test]
fn environments() {
    assert_eq!(call("envV1ToV2", &[s("A=1;B=two words")]), s("A=1 B=two' 'words"));
    assert_eq!(call("envV1ToV2", &[s("B=2; A=1")]), s("A=1 B=2"));
    assert_eq!(call("envV1ToV2", &[s("|A=1|B=x;y")]), s("A=1 B=x;y"));
    assert_eq!(call("envV1ToV2", &[s("A=it's")]), s("A=it''''s"));
    assert_eq!(call("envV1ToV2", &[s("A=")]), s("A="));
    assert_eq!(call("envV1ToV2", &[s("A=1;$$(X)")]), s("$$(X) A=1"));
    assert_eq!(call("envV1ToV2", &[s("$$(X)")]), E);
    assert_eq!(call("envV1ToV2", &[s("")]), s(""));
    assert_eq!(call("envV1ToV2", &[s("A")]), E);
    assert_eq!(call("envV1ToV2", &[s("=1")]), E);
    assert_eq!(call("envV1ToV2", &[U]), U);
    assert_eq!(call("envV1ToV2", &[i(1)]), E);
    assert_eq!(call("envV1ToV2", &[]), E);
    assert_eq!(
        call("mergeEnvironment", &[s("A=1 B=2"), U, s("B=3 'C=x y'")]),
        s("A=1 B=3 C=x' 'y")
    );
    assert_eq!(call("mergeEnvironment", &[]), s(""));
    assert_eq!(call("mergeEnvironment", &[s("A=1 'B")]), E);
    assert_eq!(call("mergeEnvironment", &[s("A")]), E);
    assert_eq!(call("mergeEnvironment", &[i(1)]), E);
}

#[test]
fn argument_strings() {
    assert_eq!(call("argsToList", &[s("a 'b c' d''e")]), strs(&["a", "b c", "de"]));
    assert_eq!(call("argsToList", &[s("a 'it''s'")]), strs(&["a", "it's"]));
    assert_eq!(call("argsToList", &[s("a 'b c'"), i(1)]), strs(&["a", "'b", "c'"]));
    assert_eq!(call("argsToList", &[s("'a")]), E);
    assert_eq!(call("argsToList", &[s("a"), i(3)]), E);
    assert_eq!(call("argsToList", &[U]), E);
    assert_eq!(call("listToArgs", &[strs(&["a", "b c", "", "it's"])]), s("a b' 'c '' it''''s"));
    assert_eq!(call("listToArgs", &[strs(&["a", "b"]), i(1)]), s("a b"));
    assert_eq!(call("listToArgs", &[strs(&["a", "b c"]), i(1)]), E);
    assert_eq!(call("listToArgs", &[l(&[i(1)])]), E);
    assert_eq!(call("listToArgs", &[s("a")]), E);
}

#[test]
fn misc() {
    assert_eq!(call("debug", &[i(3)]), i(3));
    assert_eq!(call("debug", &[]), E);
    assert_eq!(natural_cmp(b"a\xff", b"a1"), -1 - 49);
}

#[test]
fn strtod_prefixes() {
    assert_eq!(strtod(b"  -12.5e1xyz"), (-125.0, 9));
    assert_eq!(strtod(b"+.5"), (0.5, 3));
    assert_eq!(strtod(b"5."), (5.0, 2));
    assert_eq!(strtod(b"."), (0.0, 0));
    assert_eq!(strtod(b"1e+"), (1.0, 1));
    assert_eq!(strtod(b"0x10"), (16.0, 4));
    assert_eq!(strtod(b"0x.8p1"), (1.0, 6));
    assert_eq!(strtod(b"infinityx"), (f64::INFINITY, 8));
    assert_eq!(strtod(b"-INFx"), (f64::NEG_INFINITY, 4));
    assert_eq!(strtod(b"nan(abc)").1, 8);
    assert_eq!(strtod(b"nan(a-c)").1, 3);
    assert_eq!(strtod(b"").1, 0);
}

#[test]
fn never_panics_on_odd_input() {
    let odd = [
        U,
        E,
        b(true),
        i(i64::MIN),
        i(-1),
        i(0),
        i(i64::MAX),
        r(f64::NAN),
        r(f64::NEG_INFINITY),
        r(-0.0),
        r(1e300),
        s(""),
        s("é"),
        s("\0a"),
        s("%"),
        s("\\"),
        s("(("),
        l(&[]),
        l(&[U, E, s("x")]),
        ad(&[]),
    ];
    let names = [
        "isundefined",
        "member",
        "identicalmember",
        "size",
        "sum",
        "avg",
        "min",
        "max",
        "anycompare",
        "allcompare",
        "splittime",
        "formattime",
        "interval",
        "strcat",
        "join",
        "toupper",
        "substr",
        "strcmp",
        "stricmp",
        "versioncmp",
        "version_in_range",
        "regexp",
        "regexpmember",
        "regexps",
        "replace",
        "replaceall",
        "int",
        "real",
        "string",
        "bool",
        "floor",
        "round",
        "pow",
        "quantize",
        "random",
        "debug",
        "stringlistsintersect",
        "stringlistsize",
        "stringlistsum",
        "stringlistmax",
        "stringlistmember",
        "stringlistisubsetmatch",
        "stringlist_regexpmember",
        "splitusername",
        "split",
        "envv1tov2",
        "mergeenvironment",
        "argstolist",
        "listtoargs",
    ];
    for n in names {
        call(n, &[]);
        for a in &odd {
            call(n, std::slice::from_ref(a));
            for b in &odd {
                call(n, &[a.clone(), b.clone()]);
                call(n, &[s("<"), a.clone(), b.clone()]);
                call(n, &[a.clone(), b.clone(), s("fgimsx")]);
            }
        }
    }
}
