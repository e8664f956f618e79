//! HTCondor's built-in ClassAd functions.
//!
//! Most functions are *strict*: their arguments are evaluated first and the
//! function sees only values. A few (`ifThenElse`, `eval`, `unparse`, ...)
//! need the unevaluated arguments or the evaluation context; those are
//! [`Builtin::Special`] and are carried out by the evaluator itself.
//!
//! The semantics follow HTCondor's own library (`src/classad/fnCall.cpp`
//! and the functions `src/condor_utils/compat_classad.cpp` registers),
//! including its rules for undefined and error arguments and its quirks.
//! HTCondor strings are byte strings; ours are UTF-8, so the functions work
//! on bytes and convert back lossily where a byte cut could split a
//! character.
//!
//! [`lookup`] resolves a name; the strict built-ins are one table, `STRICT`,
//! here. Each family of functions is a file of its own:
//!
//! - `values`: how the built-ins read and compare values (HTCondor's
//!   `convertValueTo*`, its comparison operators and `+`), and the type
//!   predicates; `strtod`: C's `strtod`, which those conversions use.
//! - `lists`: `member`, `size`, `sum`, `avg`, `min`, `max`, `anyCompare`, `allCompare`.
//! - `strings`: `strcat`, `join`, `toUpper`, `substr`, `strcmp`, the version
//!   comparisons, `splitUserName`, `split`.
//! - `string_lists`: the `stringList*` functions on `"a, b, c"` strings.
//! - `regexp`: `regexp`, `regexpMember`, `regexps`, `replace`, `replaceAll`,
//!   with their compiled-pattern cache.
//! - `math`: `int`, `real`, `string`, `bool`, `floor`, `ceiling`, `round`,
//!   `pow`, `quantize`, `random`, `debug`.
//! - `time`: `time`, `interval`, `splitTime`, `formatTime`; `strftime`: the C
//!   library's `strftime` that `formatTime` follows.
//! - `env_args`: `envV1ToV2`, `mergeEnvironment`, `argsToList`, `listToArgs`
//!   (HTCondor's Env and ArgList).
//!
//! `ifThenElse`, `eval` and `unparse` ([`SpecialFn`]) are carried out by the
//! evaluator (`crate::eval`).

mod env_args;
mod lists;
mod math;
mod regexp;
mod strftime;
mod string_lists;
mod strings;
mod strtod;
mod time;
mod values;

#[cfg(test)]
mod tests;

use crate::budget::Budget;
use crate::value::Value;

use env_args::{args_to_list, env_v1_to_v2, list_to_args, merge_environment};
use lists::{list_compare, member, min_max, size, sum_avg};
use math::{
    RoundOp, conv_bool_fn, conv_int_fn, conv_real_fn, conv_string_fn, debug, do_round, pow,
    quantize, random,
};
use regexp::{regexp, regexp_member, subst_pattern};
use string_lists::{
    Summary, string_list_member, string_list_regexp_member, string_list_size,
    string_list_summarize, string_lists_intersect,
};
use strings::{
    VersionOp, change_case, compare_strings, compare_version, split_arb, split_at, strcat_join,
    substr, version_in_range,
};
use time::{format_time, interval, split_time, time};
use values::pred;

/// What a strict built-in may use besides its arguments.
pub struct FnEnv<'a> {
    /// The evaluation's "now", in seconds since the epoch (`time()`).
    pub now: i64,
    /// The evaluation's random source (`random()`), seedable for tests.
    pub rng: &'a mut Rng,
    /// What the evaluation has left (see [`crate::budget`]). The evaluator
    /// charges a built-in for reading its arguments and for the value it
    /// returns; a built-in whose result can outgrow its arguments checks
    /// [`Budget::fits`] as it builds it, and answers `error` rather than
    /// grow past it.
    pub budget: &'a mut Budget,
}

impl FnEnv<'_> {
    /// True when a result of `bytes` bytes may still be made; when not, the
    /// budget is spent (the built-in answers error, and so does the rest of
    /// the evaluation).
    fn fits(&mut self, bytes: usize) -> bool {
        if self.budget.fits(bytes) {
            return true;
        }
        self.budget.exhaust();
        false
    }
}

/// A small, seedable pseudo-random generator (splitmix64).
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
    /// Whether `state` is seeded: one from the clock is seeded at its first
    /// draw, not when made (an evaluator is made for every attribute a
    /// daemon reads, and reading the clock each time was 1 % of a busy
    /// pool's CPU; few expressions call `random`).
    seeded: bool,
}

impl Rng {
    /// A generator with a fixed seed.
    pub fn seeded(seed: u64) -> Rng {
        Rng { state: seed, seeded: true }
    }

    /// A generator seeded from the clock (when first drawn from).
    pub fn from_time() -> Rng {
        Rng { state: 0, seeded: false }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        if !self.seeded {
            self.state = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0x9e37_79b9);
            self.seeded = true;
        }
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform real in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A strict built-in: arguments in, value out.
pub type StrictFn = fn(&[Value], &mut FnEnv<'_>) -> Value;

/// Built-ins that the evaluator carries out itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpecialFn {
    /// `ifThenElse(c, a, b)`: evaluates only the branch taken.
    IfThenElse,
    /// `eval(s)`: parses the string and evaluates it in the current scope.
    Eval,
    /// `unparse(attr)`: the text of an attribute's expression.
    Unparse,
}

/// A resolved built-in function.
#[derive(Clone, Copy, Debug)]
pub enum Builtin {
    /// Called with evaluated arguments.
    Strict(StrictFn),
    /// Carried out by the evaluator.
    Special(SpecialFn),
}

/// Resolves a function name (case-insensitively) to its built-in.
pub fn lookup(name: &str) -> Option<Builtin> {
    let lower = name.to_ascii_lowercase();
    let special = match lower.as_str() {
        "ifthenelse" => Some(SpecialFn::IfThenElse),
        "eval" => Some(SpecialFn::Eval),
        "unparse" => Some(SpecialFn::Unparse),
        _ => None,
    };
    if let Some(s) = special {
        return Some(Builtin::Special(s));
    }
    strict(&lower).map(Builtin::Strict)
}

/// The strict built-ins, by lower-case name: the one table both
/// [`lookup`] and [`strict_names`] read, so a test that enumerates the
/// built-ins cannot miss one.
static STRICT: &[(&str, StrictFn)] = &[
    // Type predicates.
    ("isundefined", |a, _| pred(a, |v| matches!(v, Value::Undefined))),
    ("iserror", |a, _| pred(a, |v| matches!(v, Value::Error))),
    ("isstring", |a, _| pred(a, |v| matches!(v, Value::Str(_)))),
    ("isinteger", |a, _| pred(a, |v| matches!(v, Value::Int(_)))),
    ("isreal", |a, _| pred(a, |v| matches!(v, Value::Real(_)))),
    ("islist", |a, _| pred(a, |v| matches!(v, Value::List(_)))),
    ("isclassad", |a, _| pred(a, |v| matches!(v, Value::Ad(_)))),
    ("isboolean", |a, _| pred(a, |v| matches!(v, Value::Bool(_)))),
    // We have no absolute or relative time values.
    ("isabstime", |a, _| pred(a, |_| false)),
    ("isreltime", |a, _| pred(a, |_| false)),
    // Lists.
    ("member", |a, _| member(a, false)),
    ("identicalmember", |a, _| member(a, true)),
    ("size", size),
    ("sum", |a, _| sum_avg(a, false)),
    ("avg", |a, _| sum_avg(a, true)),
    ("min", |a, _| min_max(a, true)),
    ("max", |a, _| min_max(a, false)),
    ("anycompare", |a, _| list_compare(a, false)),
    ("allcompare", |a, _| list_compare(a, true)),
    // Time.
    ("time", time),
    ("splittime", split_time),
    ("formattime", format_time),
    ("interval", interval),
    // Strings.
    ("strcat", |a, e| strcat_join(a, e, false)),
    ("join", |a, e| strcat_join(a, e, true)),
    ("toupper", |a, e| change_case(a, e, true)),
    ("tolower", |a, e| change_case(a, e, false)),
    ("substr", substr),
    ("strcmp", |a, e| compare_strings(a, e, false)),
    ("stricmp", |a, e| compare_strings(a, e, true)),
    ("versioncmp", |a, e| compare_version(a, e, VersionOp::Cmp)),
    ("versionle", |a, e| compare_version(a, e, VersionOp::Le)),
    ("versionlt", |a, e| compare_version(a, e, VersionOp::Lt)),
    ("versionge", |a, e| compare_version(a, e, VersionOp::Ge)),
    ("versiongt", |a, e| compare_version(a, e, VersionOp::Gt)),
    ("versioneq", |a, e| compare_version(a, e, VersionOp::Eq)),
    ("version_in_range", version_in_range),
    // Regular expressions.
    ("regexp", regexp),
    ("regexpmember", regexp_member),
    ("regexps", |a, e| subst_pattern(a, e, "")),
    ("replace", |a, e| subst_pattern(a, e, "f")),
    ("replaceall", |a, e| subst_pattern(a, e, "fg")),
    // Conversions.
    ("int", conv_int_fn),
    ("real", conv_real_fn),
    ("string", conv_string_fn),
    ("bool", conv_bool_fn),
    // Arithmetic.
    ("floor", |a, _| do_round(a, RoundOp::Floor)),
    ("ceil", |a, _| do_round(a, RoundOp::Ceil)),
    ("ceiling", |a, _| do_round(a, RoundOp::Ceil)),
    ("round", |a, _| do_round(a, RoundOp::Round)),
    ("pow", pow),
    ("quantize", quantize),
    ("random", random),
    // Miscellaneous.
    ("debug", debug),
    ("stringlistsintersect", string_lists_intersect),
    // The functions HTCondor's compatibility layer registers.
    ("stringlistsize", string_list_size),
    ("stringlistsum", |a, _| string_list_summarize(a, Summary::Sum)),
    ("stringlistavg", |a, _| string_list_summarize(a, Summary::Avg)),
    ("stringlistmin", |a, _| string_list_summarize(a, Summary::Min)),
    ("stringlistmax", |a, _| string_list_summarize(a, Summary::Max)),
    ("stringlistmember", |a, e| string_list_member(a, e, false, false)),
    ("stringlistimember", |a, e| string_list_member(a, e, true, false)),
    ("stringlistsubsetmatch", |a, e| string_list_member(a, e, false, true)),
    ("stringlistisubsetmatch", |a, e| string_list_member(a, e, true, true)),
    ("stringlist_regexpmember", string_list_regexp_member),
    ("splitusername", |a, _| split_at(a, false)),
    ("splitslotname", |a, _| split_at(a, true)),
    ("split", split_arb),
    ("envv1tov2", env_v1_to_v2),
    ("mergeenvironment", merge_environment),
    ("argstolist", args_to_list),
    ("listtoargs", list_to_args),
];

/// The strict built-in named `lower` (already lower case).
fn strict(lower: &str) -> Option<StrictFn> {
    STRICT.iter().find(|(n, _)| *n == lower).map(|(_, f)| *f)
}

/// The names of every strict built-in, lower case.
pub fn strict_names() -> impl Iterator<Item = &'static str> {
    STRICT.iter().map(|(n, _)| *n)
}
