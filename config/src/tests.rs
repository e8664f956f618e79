use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let p =
            std::env::temp_dir().join(format!("andes-config-test-{}-{}", std::process::id(), n));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).expect("create dir");
        }
        fs::write(&p, text).expect("write file");
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn load(text: &str) -> Config {
    let mut c = Config::new();
    c.load_str(text, "test.config").expect("load");
    c
}

fn get(c: &Config, name: &str) -> String {
    c.get(name).expect("expand").expect("defined")
}

fn load_err(text: &str) -> ConfigError {
    let mut c = Config::new();
    c.load_str(text, "test.config").expect_err("should fail")
}

// ---- basic syntax ----

#[test]
fn simple_assignments_and_case_insensitive_names() {
    let c = load("  Foo   =   bar baz  \nNUM=3\n");
    assert_eq!(c.raw("foo"), Some("bar baz"));
    assert_eq!(c.raw("FOO"), Some("bar baz"));
    assert_eq!(get(&c, "num"), "3");
    assert_eq!(c.names().collect::<Vec<_>>(), vec!["Foo", "NUM"]);
    assert_eq!(c.len(), 2);
    assert!(!c.is_empty());
    assert_eq!(c.get("missing").unwrap(), None);
    assert!(!c.is_defined("missing"));
}

#[test]
fn later_definition_overrides_and_keeps_latest_spelling() {
    let c = load("a = 1\nA = 2\n");
    assert_eq!(get(&c, "a"), "2");
    assert_eq!(c.names().collect::<Vec<_>>(), vec!["A"]);
    assert_eq!(c.location("a").unwrap().line, Some(2));
}

#[test]
fn empty_value() {
    let c = load("A =\nB = $(A:dflt)\n");
    assert_eq!(c.raw("A"), Some(""));
    assert!(c.is_defined("A"));
    // HTCondor uses the default for a macro defined as empty.
    assert_eq!(get(&c, "B"), "dflt");
}

#[test]
fn comments_only_at_line_start() {
    let c = load("# comment\n   # indented comment\nA = x # not a comment\n");
    assert_eq!(get(&c, "A"), "x # not a comment");
    assert_eq!(c.len(), 1);
}

#[test]
fn continuation_joins_lines() {
    let c = load("A = one \\\n    two \\\n\tthree\nB = 1\n");
    assert_eq!(c.raw("A"), Some("one two three"));
    assert_eq!(c.raw("B"), Some("1"));
    assert_eq!(c.location("B").unwrap().line, Some(4));
}

#[test]
fn continuation_backslash_may_be_followed_by_whitespace() {
    let c = load("A = one \\   \ntwo\n");
    assert_eq!(c.raw("A"), Some("one two"));
}

#[test]
fn comment_lines_inside_continuation_are_skipped() {
    // Both examples from the HTCondor manual give `A = $(B) $(D)`.
    let c = load("A = $(B) \\\n# $(C)\n$(D)\n");
    assert_eq!(c.raw("A"), Some("$(B) $(D)"));
    let c = load("A = $(B) \\\n# $(C) \\\n$(D)\n");
    assert_eq!(c.raw("A"), Some("$(B) $(D)"));
}

#[test]
fn comment_line_ending_in_backslash_does_not_continue() {
    let c = load("# comment \\\nA = 1\n");
    assert_eq!(c.raw("A"), Some("1"));
}

#[test]
fn continuation_at_end_of_file() {
    let c = load("A = x \\");
    assert_eq!(c.raw("A"), Some("x"));
}

#[test]
fn crlf_and_bom() {
    let c = load("\u{feff}A = 1\r\nB = 2 \\\r\n  3\r\n");
    assert_eq!(c.raw("A"), Some("1"));
    assert_eq!(c.raw("B"), Some("2 3"));
}

#[test]
fn bracket_lines_are_ignored() {
    let c = load("[HTCondor Settings]\nmy_classad = [ foo=bar ]\n");
    assert_eq!(c.raw("my_classad"), Some("[ foo=bar ]"));
    assert_eq!(c.len(), 1);
}

#[test]
fn dotted_subsystem_names_and_lookup() {
    let mut c = load("LOWPORT = 1\nMASTER.LOWPORT = 2\nUSE = $(LOWPORT)\n");
    assert_eq!(get(&c, "LOWPORT"), "1");
    assert_eq!(get(&c, "MASTER.LOWPORT"), "2");
    assert_eq!(get(&c, "USE"), "1");
    c.set_subsystem(Some("master"));
    assert_eq!(get(&c, "LOWPORT"), "2");
    assert_eq!(get(&c, "USE"), "2");
}

#[test]
fn colon_assignment_is_accepted() {
    let c = load("RunBenchmarks : False\n");
    assert_eq!(c.raw("RunBenchmarks"), Some("False"));
}

#[test]
fn macro_in_defined_name_is_expanded() {
    let c = load("PREFIX = MY\n$(PREFIX)_VAR = 7\n");
    assert_eq!(c.raw("MY_VAR"), Some("7"));
}

#[test]
fn plus_equals_appends() {
    let c = load("L = a\nL += b\nM += first\nS = x\nS +,= y\nT = p\nT +&&= q\nU = 1\nU +||= 2\n");
    assert_eq!(c.raw("L"), Some("a b"));
    assert_eq!(c.raw("M"), Some("first"));
    assert_eq!(c.raw("S"), Some("x,y"));
    assert_eq!(c.raw("T"), Some("p && q"));
    assert_eq!(c.raw("U"), Some("1 || 2"));
}

#[test]
fn set_and_expand_api() {
    let mut c = Config::new();
    c.set("A", "1").unwrap();
    c.set("B", "$(A) + $(A)").unwrap();
    c.set("A", "$(A)0").unwrap(); // self reference: previous value
    assert_eq!(c.raw("A"), Some("10"));
    assert_eq!(get(&c, "B"), "10 + 10");
    assert_eq!(c.expand("x=$(B);y=$(NOPE:d)").unwrap(), "x=10 + 10;y=d");
    assert_eq!(c.location("A").unwrap().to_string(), "<set>");
    let e = c.set("bad name", "1").unwrap_err();
    assert_eq!(e.kind(), ConfigErrorKind::Syntax);
    assert!(e.message().contains("invalid macro name `bad name`"), "{e}");
}

#[test]
fn locations_for_diagnostics() {
    let dir = TempDir::new();
    let p = dir.write("a.config", "\n# c\nX = 1\nY = 2 \\\n  3\n");
    let mut c = Config::new();
    c.load_file(&p).unwrap();
    let lx = c.location("x").unwrap();
    assert_eq!(lx.origin, p.display().to_string());
    assert_eq!(lx.line, Some(3));
    assert_eq!(c.location("Y").unwrap().line, Some(4));
    assert_eq!(lx.to_string(), format!("{}, line 3", p.display()));
    assert_eq!(c.sources(), &[p.display().to_string()]);
}

// ---- multi-line values ----

#[test]
fn here_document_values_are_verbatim() {
    let c = load(
        "JOB_ROUTER_DEFAULTS @=jrd\n  [\n    requirements = target.WantJobRouter is true;\n\n    # kept\n  ]\n  @jrd\nNEXT = 1\n",
    );
    assert_eq!(
        c.raw("JOB_ROUTER_DEFAULTS"),
        Some("  [\n    requirements = target.WantJobRouter is true;\n\n    # kept\n  ]")
    );
    assert_eq!(c.raw("NEXT"), Some("1"));
    assert_eq!(c.location("JOB_ROUTER_DEFAULTS").unwrap().line, Some(1));
}

#[test]
fn here_document_expands_late_and_self_refs_early() {
    let c = load("A = one\nA @=end\n$(A)\n$(B)\n@end\nB = two\n");
    assert_eq!(c.raw("A"), Some("one\n$(B)"));
    assert_eq!(get(&c, "A"), "one\ntwo");
}

#[test]
fn unterminated_here_document_names_tag_and_line() {
    let e = load_err("X = 1\nFOO @=end\nline\n@ending\n");
    assert_eq!(e.kind(), ConfigErrorKind::UnterminatedMultiLine);
    assert_eq!(e.line(), Some(2));
    assert_eq!(e.origin(), Some("test.config"));
    assert!(e.message().contains("`FOO @=end`"), "{e}");
    assert!(e.message().contains("started at line 2"), "{e}");
    assert!(e.message().contains("`@end`"), "{e}");
}

#[test]
fn here_document_without_tag() {
    let e = load_err("FOO @=\n");
    assert_eq!(e.kind(), ConfigErrorKind::Syntax);
    assert!(e.message().contains("expected a tag"), "{e}");
}

// ---- expansion ----

#[test]
fn late_binding() {
    let c = load("A = xxx\nC = $(A)\nA = yyy\n");
    assert_eq!(c.raw("C"), Some("$(A)"));
    assert_eq!(get(&c, "C"), "yyy");
}

#[test]
fn forward_references() {
    let c = load("C = [$(A)]\nA = $(B)$(B)\nB = z\n");
    assert_eq!(get(&c, "C"), "[zz]");
}

#[test]
fn self_reference_uses_previous_value() {
    // The manual's example.
    let c = load("A = xxx\nB = $(A)\nA = $(A)yyy\nA = $(A)zzz\n");
    assert_eq!(c.raw("A"), Some("xxxyyyzzz"));
    assert_eq!(get(&c, "A"), "xxxyyyzzz");
    assert_eq!(get(&c, "B"), "xxxyyyzzz");
    // Self references are case-insensitive and keep other macros raw.
    let c = load("L = $(X)\nl = $(l) more $(Y)\nX = 1\nY = 2\n");
    assert_eq!(c.raw("L"), Some("$(X) more $(Y)"));
    assert_eq!(get(&c, "L"), "1 more 2");
    // Undefined self reference: default or empty.
    let c = load("N = $(N:start) next\nM = $(M) end\n");
    assert_eq!(c.raw("N"), Some("start next"));
    assert_eq!(c.raw("M"), Some(" end"));
}

#[test]
fn undefined_macro_expands_to_empty() {
    let c = load("MAX_ALLOC_CPUS = $(NUMCPUS)-1\n");
    assert_eq!(get(&c, "MAX_ALLOC_CPUS"), "-1");
}

#[test]
fn defaults_literal_and_nested() {
    let c = load(
        "A = $(NUMCPUS:4)-1\nB = $(NUMCPUS:$(DETECTED))-1\nDETECTED = 8\nC = $(X:$(Y:$(Z:deep)))\nD = $(DETECTED:1)\nE = $(X:a b, c)\n",
    );
    assert_eq!(get(&c, "A"), "4-1");
    assert_eq!(get(&c, "B"), "8-1");
    assert_eq!(get(&c, "C"), "deep");
    assert_eq!(get(&c, "D"), "8");
    assert_eq!(get(&c, "E"), "a b, c");
}

#[test]
fn dollar_dollar_is_kept() {
    let c = load("A = $$(Memory) and $$([ $(X) + 1 ])\nX = 2\n");
    assert_eq!(get(&c, "A"), "$$(Memory) and $$([ 2 + 1 ])");
}

#[test]
fn dollar_macro() {
    let c = load("A = cost $(DOLLAR)5 $(dollar)(NOT_A_MACRO)\nB = $(A)\nNOT_A_MACRO = oops\n");
    assert_eq!(get(&c, "A"), "cost $5 $(NOT_A_MACRO)");
    assert_eq!(get(&c, "B"), "cost $5 $(NOT_A_MACRO)");
}

#[test]
fn non_macro_dollar_text_is_left_alone() {
    let c = load("A = $5 and $(not a macro) and $UNKNOWN(x) and $(\nB = 1\n");
    assert_eq!(get(&c, "A"), "$5 and $(not a macro) and $UNKNOWN(x) and $(");
}

#[test]
fn env_function() {
    let mut c = Config::with_env([("HOME", "/home/me"), ("EMPTY", ""), ("REF", "$(X)")]);
    c.load_str(
        "A = $ENV(HOME)/x\nB = $ENV(NOPE)\nC = $ENV(NOPE:fallback)\nD = $ENV(EMPTY:e)\nE = $ENV(REF)\nX = 9\n",
        "t",
    )
    .unwrap();
    assert_eq!(get(&c, "A"), "/home/me/x");
    assert_eq!(get(&c, "B"), "UNDEFINED");
    assert_eq!(get(&c, "C"), "fallback");
    assert_eq!(get(&c, "D"), "e");
    assert_eq!(get(&c, "E"), "9");
    // The default environment is empty, not the process environment.
    let c = load("P = $ENV(PATH:none)\n");
    assert_eq!(get(&c, "P"), "none");
}

#[test]
fn int_and_real_functions() {
    let c = load(
        "X = 2\nY = 6\nXYArea = $(X) * $(Y)\nI = $INT(XYArea)\nJ = $INT(XYArea,%04d)\nK = $INT(XYArea,Area=%d)\nL = $INT(7 / 2)\nM = $INT(2.9)\nR = $REAL(XYArea)\nS = $REAL(1.5,%.3f)\nT = $REAL(10,%g)\nT2 = $REAL(1.5, %.1f)\nU = $REAL(1.0/3)\nU2 = $REAL(1/3)\nV = $INT(255,%x)\nW = $REAL(0.00001234,%e)\n",
    );
    assert_eq!(get(&c, "I"), "12");
    assert_eq!(get(&c, "J"), "0012");
    assert_eq!(get(&c, "K"), "Area=12");
    assert_eq!(get(&c, "L"), "3");
    assert_eq!(get(&c, "M"), "2");
    assert_eq!(get(&c, "R"), "12");
    assert_eq!(get(&c, "S"), "1.500");
    assert_eq!(get(&c, "T"), "10.0");
    // As in HTCondor, the format is everything after the comma.
    assert_eq!(get(&c, "T2"), " 1.5");
    assert_eq!(get(&c, "U"), "0.3333333333333333");
    assert_eq!(get(&c, "U2"), "0"); // integer division, as in ClassAds
    assert_eq!(get(&c, "V"), "ff");
    assert_eq!(get(&c, "W"), "1.234000e-05");
}

/// `$EVAL()` and `$STRING()` as HTCondor's manual shows them, verbatim.
#[test]
fn eval_and_string_functions() {
    let c = load(
        "slist = \"a,B,c\"\nlcslist = tolower($(slist))\nlist = split($(slist))\n\
         clist = size($(list)) * 10\nsemilist = join(\";\",split($(lcslist)))\n\
         A = $EVAL(slist)\nB = $EVAL(lcslist)\nC = $EVAL(list)\nD = $EVAL(clist)\nE = $EVAL(semilist)\n\
         FULL_HOSTNAME = host.DOMAIN\nLCFullHostname = toLower(\"$(FULL_HOSTNAME)\")\n\
         F = $STRING(LCFullHostname)\nG = $STRING(LCFullHostname,Name: %s)\n\
         H = $STRING(FULL_HOSTNAME)\nI = $STRING(slist,[%-8s])\nJ = $EVAL(1 + 2 == 3)\n\
         K = $EVAL(1/0)\n",
    );
    for (name, want) in [
        ("A", "a,B,c"),
        ("B", "a,b,c"),
        ("C", "{ \"a\",\"B\",\"c\" }"),
        ("D", "30"),
        ("E", "a;b;c"),
        ("F", "host.domain"),
        ("G", "Name: host.domain"),
        // Not a ClassAd string: the text itself.
        ("H", "host.DOMAIN"),
        ("I", "[a,B,c   ]"),
        ("J", "true"),
        ("K", "error"),
    ] {
        assert_eq!(get(&c, name), want, "{name}");
    }
    let c = load(
        "A = $EVAL(1 +)\nB = $STRING(x,%d)\nC = $STRING(x,%s%s)\nD = $STRING(x,none)\n\
         E = $STRING(x,%+s)\nF = $STRING(x,%ls)\nG = $STRING(x,%05s)\n",
    );
    assert_eq!(get(&c, "G"), "    x");
    for n in ["A", "B", "C", "D", "E", "F"] {
        let e = c.get(n).unwrap_err();
        assert_eq!(e.kind(), ConfigErrorKind::Function, "{n}: {e}");
    }
}

#[test]
fn int_function_errors() {
    let c =
        load("A = $INT(abc)\nB = $INT(5,%s)\nC = $INT(1/0)\nD = $INT(5,%d%d)\nE = $REAL(1,%d)\n");
    for n in ["A", "B", "C", "D", "E"] {
        let e = c.get(n).unwrap_err();
        assert_eq!(e.kind(), ConfigErrorKind::Function, "{n}: {e}");
        assert_eq!(e.line(), c.location(n).unwrap().line, "{n}");
    }
    assert!(c.get("A").unwrap_err().message().contains("does not evaluate to a number"));
}

#[test]
fn choice_and_substr_functions() {
    let c = load(
        "LIST = a, b, $(X)\nX = c\nA = $CHOICE(2, LIST)\nB = $CHOICE(1, red, green, blue)\nIDX = 0\nC = $CHOICE(IDX, LIST)\nName = abcdef\nS1 = $SUBSTR(Name, 2)\nS2 = $SUBSTR(Name, 0, -2)\nS3 = $SUBSTR(Name, 1, 3)\nS4 = $SUBSTR(Name, -1)\nS5 = $SUBSTR(Name, 4, -3)\nBAD = $CHOICE(5, LIST)\n",
    );
    assert_eq!(get(&c, "A"), "c");
    assert_eq!(get(&c, "B"), "green");
    assert_eq!(get(&c, "C"), "a");
    assert_eq!(get(&c, "S1"), "cdef");
    assert_eq!(get(&c, "S2"), "abcd");
    assert_eq!(get(&c, "S3"), "bcd");
    assert_eq!(get(&c, "S4"), "f");
    assert_eq!(get(&c, "S5"), "");
    let e = c.get("BAD").unwrap_err();
    assert_eq!(e.kind(), ConfigErrorKind::Function);
    assert!(e.message().contains("out of range"), "{e}");
}

#[test]
fn basename_and_dirname() {
    let c = load(
        "F = /usr/local/bin/prog.exe\nB = $BASENAME(F)\nD = $DIRNAME(F)\nN = $BASENAME(NOPE)\n",
    );
    assert_eq!(get(&c, "B"), "prog.exe");
    assert_eq!(get(&c, "D"), "/usr/local/bin/");
    assert_eq!(get(&c, "N"), "");
}

#[test]
fn unsupported_functions_are_errors() {
    // In the configuration (the submit language has these).
    let c = load("A = $RANDOM_INTEGER(0, 8, 2)\nC = $Fn(X)\n");
    for n in ["A", "C"] {
        let e = c.get(n).unwrap_err();
        assert_eq!(e.kind(), ConfigErrorKind::Unsupported, "{n}");
    }
}

#[test]
fn cycle_is_an_error_naming_the_cycle() {
    let c = load("A = $(B)\nB = x $(C)\nC = $(A)\nD = $(A)\n");
    let e = c.get("A").unwrap_err();
    assert_eq!(e.kind(), ConfigErrorKind::MacroCycle);
    assert_eq!(e.message(), "macros refer to each other in a cycle: A -> B -> C -> A");
    assert_eq!(e.origin(), Some("test.config"));
    assert_eq!(e.line(), Some(1));
    let e = c.get("D").unwrap_err();
    assert_eq!(e.message(), "macros refer to each other in a cycle: A -> B -> C -> A");
    let e = c.expand("$(C)").unwrap_err();
    assert_eq!(e.message(), "macros refer to each other in a cycle: C -> A -> B -> C");
}

#[test]
fn cycle_through_default_and_function() {
    let c = load("A = $(U:$(A))\nB = $INT(B)\n");
    assert_eq!(c.get("A").unwrap_err().kind(), ConfigErrorKind::MacroCycle);
    assert_eq!(c.get("B").unwrap_err().kind(), ConfigErrorKind::MacroCycle);
}

#[test]
fn expansion_size_is_bounded() {
    // Each level doubles: 2^40 bytes if unbounded.
    let mut text = String::from("M0 = xxxxxxxxxxxxxxxx\n");
    for i in 1..=40 {
        text.push_str(&format!("M{i} = $(M{})$(M{})\n", i - 1, i - 1));
    }
    let c = load(&text);
    let e = c.get("M40").unwrap_err();
    assert_eq!(e.kind(), ConfigErrorKind::ExpansionTooLarge);
    // Deep chains of empty macros finish quickly thanks to memoization.
    let mut text = String::from("E0 =\n");
    for i in 1..=100 {
        text.push_str(&format!("E{i} = $(E{p})$(E{p})$(E{p})$(E{p})$(E{p})$(E{p})\n", p = i - 1));
    }
    let c = load(&text);
    assert_eq!(get(&c, "E100"), "");
}

#[test]
fn expansion_depth_is_bounded() {
    let mut text = String::new();
    for i in 0..300 {
        text.push_str(&format!("D{i} = $(D{})\n", i + 1));
    }
    text.push_str("D300 = end\n");
    let c = load(&text);
    let e = c.get("D0").unwrap_err();
    assert_eq!(e.kind(), ConfigErrorKind::ExpansionDepth);
    assert_eq!(get(&c, "D200"), "end");
    // Deeply nested defaults in one value.
    let deep = format!("X = {}{}\n", "$(U:".repeat(500), ")".repeat(500));
    let c = load(&deep);
    assert_eq!(c.get("X").unwrap_err().kind(), ConfigErrorKind::ExpansionDepth);
}

// ---- errors ----

#[test]
fn bad_line_error() {
    let e = load_err("A = 1\n\nthis is not config\n");
    assert_eq!(e.kind(), ConfigErrorKind::Syntax);
    assert_eq!(e.line(), Some(3));
    assert_eq!(e.origin(), Some("test.config"));
    assert_eq!(e.message(), "expected `NAME = value`, found `this is not config`");
    assert_eq!(
        e.to_string(),
        "test.config, line 3: expected `NAME = value`, found `this is not config`"
    );
    let e = load_err("???\n");
    assert_eq!(e.message(), "expected `NAME = value`, found `???`");
    let e = load_err("= value\n");
    assert_eq!(e.kind(), ConfigErrorKind::Syntax);
    let e = load_err("A B = 1\n");
    assert_eq!(e.message(), "expected `NAME = value`, found `A B = 1`");
    let e = load_err("A+ = 1\n");
    assert!(e.message().contains("invalid macro name `A+`"), "{e}");
    let e = load_err("A @ 1\n");
    assert_eq!(e.kind(), ConfigErrorKind::Syntax);
}

#[test]
fn failed_load_leaves_table_unchanged() {
    let mut c = load("A = 1\n");
    let e = c.load_str("A = 2\nB = 3\nbroken\n", "second").unwrap_err();
    assert_eq!(e.line(), Some(3));
    assert_eq!(c.raw("A"), Some("1"));
    assert_eq!(c.raw("B"), None);
}

#[test]
fn error_and_warning_statements() {
    let mut c = Config::new();
    c.load_str("X = thing\nwarning : careful with $(X)\nY = 1\n", "w").unwrap();
    assert_eq!(c.warnings().len(), 1);
    assert_eq!(c.warnings()[0].message(), "careful with thing");
    assert_eq!(c.warnings()[0].line(), Some(2));
    assert_eq!(c.warnings()[0].kind(), ConfigErrorKind::UserWarning);
    let e = load_err("if ! defined stuff\n  error : stuff is needed!\nendif\n");
    assert_eq!(e.kind(), ConfigErrorKind::UserError);
    assert_eq!(e.message(), "stuff is needed!");
    assert_eq!(e.line(), Some(2));
}

#[test]
fn use_templates_are_unsupported() {
    let e = load_err("use ROLE : Personal\n");
    assert_eq!(e.kind(), ConfigErrorKind::Unsupported);
    assert!(e.message().contains("use ROLE : Personal"), "{e}");
}

// ---- includes ----

#[test]
fn include_relative_to_including_file() {
    let dir = TempDir::new();
    dir.write("sub/inner.config", "INNER = from inner $(OUTER)\nOVER = inner\n");
    let main = dir.write(
        "main.config",
        "OVER = main\ninclude : sub/inner.config\nOUTER = outer\nAFTER = $(OVER)\n",
    );
    let mut c = Config::new();
    c.load_file(&main).unwrap();
    assert_eq!(get(&c, "INNER"), "from inner outer");
    assert_eq!(get(&c, "AFTER"), "inner");
    let loc = c.location("INNER").unwrap();
    assert!(loc.origin.ends_with("inner.config"), "{loc}");
    assert_eq!(loc.line, Some(1));
    assert_eq!(c.sources().len(), 2);
}

#[test]
fn include_path_is_expanded_immediately() {
    let dir = TempDir::new();
    dir.write("local.conf", "LOCAL = yes\n");
    let mut c = Config::new();
    let text = format!(
        "LOCAL_DIR = {}\nFILE = local.conf\n@include : $(LOCAL_DIR)/$(FILE)\n",
        dir.0.display()
    );
    c.load_str(&text, "inline").unwrap();
    assert_eq!(get(&c, "LOCAL"), "yes");
}

#[test]
fn include_relative_to_load_str_origin_directory() {
    let dir = TempDir::new();
    dir.write("x.conf", "X = 1\n");
    let origin = dir.0.join("virtual.conf");
    let mut c = Config::new();
    c.load_str("include : x.conf\n", &origin.display().to_string()).unwrap();
    assert_eq!(get(&c, "X"), "1");
}

#[test]
fn missing_include_file_is_an_error() {
    let dir = TempDir::new();
    let main = dir.write("main.config", "A = 1\ninclude : nope.config\n");
    let mut c = Config::new();
    let e = c.load_file(&main).unwrap_err();
    assert_eq!(e.kind(), ConfigErrorKind::Io(std::io::ErrorKind::NotFound));
    assert_eq!(e.line(), Some(2));
    assert_eq!(e.origin(), Some(main.display().to_string().as_str()));
    assert!(e.message().contains("nope.config"), "{e}");
    assert_eq!(c.raw("A"), None);
}

#[test]
fn missing_top_level_file_is_an_error() {
    let dir = TempDir::new();
    let mut c = Config::new();
    let e = c.load_file(dir.0.join("absent")).unwrap_err();
    assert_eq!(e.kind(), ConfigErrorKind::Io(std::io::ErrorKind::NotFound));
}

#[test]
fn include_ifexist_skips_missing_file() {
    let dir = TempDir::new();
    dir.write("there.config", "THERE = 1\n");
    let main =
        dir.write("main.config", "include ifexist : nope.config\nINCLUDE IFEXIST: there.config\n");
    let mut c = Config::new();
    c.load_file(&main).unwrap();
    assert_eq!(get(&c, "THERE"), "1");
}

#[test]
fn include_cycle_is_an_error_naming_the_chain() {
    let dir = TempDir::new();
    let a = dir.write("a.config", "A = 1\ninclude : b.config\n");
    dir.write("b.config", "B = 1\n\ninclude : a.config\n");
    let mut c = Config::new();
    let e = c.load_file(&a).unwrap_err();
    assert_eq!(e.kind(), ConfigErrorKind::IncludeCycle);
    assert_eq!(e.line(), Some(3));
    assert!(e.origin().unwrap().ends_with("b.config"));
    let a_s = a.display().to_string();
    let b_s = dir.0.join("b.config").display().to_string();
    assert_eq!(
        e.message(),
        format!("include cycle: {a_s} -> {b_s} -> {}", dir.0.join("a.config").display())
    );
    // Self include
    let s = dir.write("self.config", "include : self.config\n");
    let e = Config::new().load_file(&s).unwrap_err();
    assert_eq!(e.kind(), ConfigErrorKind::IncludeCycle);
}

#[test]
fn include_depth_is_bounded() {
    let dir = TempDir::new();
    for i in 0..30 {
        dir.write(&format!("f{i}.config"), &format!("V{i} = {i}\ninclude : f{}.config\n", i + 1));
    }
    dir.write("f30.config", "END = 1\n");
    let mut c = Config::new();
    let e = c.load_file(dir.0.join("f0.config")).unwrap_err();
    assert_eq!(e.kind(), ConfigErrorKind::IncludeDepth);
    assert!(e.message().contains("f0.config -> "), "{e}");
    // A shallower chain works.
    let mut c = Config::new();
    c.load_file(dir.0.join("f15.config")).unwrap();
    assert_eq!(get(&c, "END"), "1");
}

#[test]
fn include_command_refused_by_default() {
    let e = load_err("include command : echo X = 1\n");
    assert_eq!(e.kind(), ConfigErrorKind::IncludeCommandRefused);
    assert!(e.message().contains("`echo X = 1`"), "{e}");
    let e = load_err("include : echo X = 1 |\n");
    assert_eq!(e.kind(), ConfigErrorKind::IncludeCommandRefused);
    let e = load_err("include into /tmp/x : echo\n");
    assert_eq!(e.kind(), ConfigErrorKind::Unsupported);
    let e = load_err("include bogus : x\n");
    assert_eq!(e.kind(), ConfigErrorKind::Syntax);
    assert!(e.message().contains("unexpected keyword `bogus`"), "{e}");
    let e = load_err("include :\n");
    assert_eq!(e.kind(), ConfigErrorKind::Syntax);
    let e = load_err("include foo.config\n");
    assert_eq!(e.message(), "expected `include : <file>`, found `include foo.config`");
}

#[test]
fn include_command_when_allowed() {
    let mut c = Config::new();
    c.allow_include_command(true);
    c.load_str("include command : echo FROM_CMD = 42\ninclude : echo PIPED = 1 |\n", "t").unwrap();
    assert_eq!(get(&c, "FROM_CMD"), "42");
    assert_eq!(get(&c, "PIPED"), "1");
    let e = c.load_str("include command : false\n", "t").unwrap_err();
    assert_eq!(e.kind(), ConfigErrorKind::IncludeCommandFailed);
    c.load_str("include ifexist command : false\n", "t").unwrap();
}

#[test]
fn later_files_override_earlier_ones() {
    let dir = TempDir::new();
    let a = dir.write("a.config", "X = a\nY = $(X)\n");
    let b = dir.write("b.config", "X = b\n");
    let mut c = Config::new();
    c.load_file(&a).unwrap();
    c.load_file(&b).unwrap();
    assert_eq!(get(&c, "Y"), "b");
    assert_eq!(c.location("X").unwrap().origin, b.display().to_string());
}

// ---- conditionals ----

#[test]
fn if_defined_else() {
    let c = load("if defined MY_UNDEFINED_VARIABLE\n  X = 12\nelse\n  X = -1\nendif\n");
    assert_eq!(get(&c, "X"), "-1");
    let c = load("V = 1\nif defined V\n  X = 12\nelse\n  X = -1\nendif\n");
    assert_eq!(get(&c, "X"), "12");
    let c = load("V =\nif defined V\nX = 1\nelse\nX = 2\nendif\n");
    assert_eq!(get(&c, "X"), "2");
    let c = load("if !defined V\nX = 1\nendif\n");
    assert_eq!(get(&c, "X"), "1");
}

#[test]
fn if_version() {
    let mut c = Config::new();
    c.set_version(8, 2, 3);
    c.load_str(
        "if version >= 8.1.6\nA = yes\nendif\nif version == 8.2\nB = yes\nendif\nif version < 8.2.3\nC = yes\nendif\nif version <= 8.2\nD = yes\nendif\nif version > 8.2.2\nE = yes\nendif\nif version != 8.2.3\nF = yes\nendif\n",
        "v",
    )
    .unwrap();
    assert_eq!(c.raw("A"), Some("yes"));
    assert_eq!(c.raw("B"), Some("yes"));
    assert_eq!(c.raw("C"), None);
    assert_eq!(c.raw("D"), Some("yes"));
    assert_eq!(c.raw("E"), Some("yes"));
    assert_eq!(c.raw("F"), None);
    let e = load_err("if version >= banana\nendif\n");
    assert_eq!(e.kind(), ConfigErrorKind::Conditional);
}

#[test]
fn if_literals_macros_elif_and_nesting() {
    let c = load(
        "ON = true\nif $(ON)\nA = 1\nendif\nif $(UNSET)\nB = 1\nendif\nif no\nC = 1\nelif 0\nC = 2\nelif yes\nC = 3\nelif true\nC = 4\nelse\nC = 5\nendif\nif false\n  if true\n    D = 1\n  else\n    D = 2\n  endif\n  FOO @=x\nnot config\n@x\nelse\n  :D = 3\nendif\n",
    );
    assert_eq!(c.raw("A"), Some("1"));
    assert_eq!(c.raw("B"), None);
    assert_eq!(c.raw("C"), Some("3"));
    assert_eq!(c.raw("D"), Some("3"));
    assert_eq!(c.raw("FOO"), None);
}

#[test]
fn if_errors() {
    let e = load_err("A = 1\nif defined X\nB = 2\n");
    assert_eq!(e.kind(), ConfigErrorKind::Conditional);
    assert_eq!(e.line(), Some(2));
    assert!(e.message().contains("not closed by `endif`"), "{e}");
    let e = load_err("endif\n");
    assert_eq!(e.message(), "`endif` without a matching `if`");
    let e = load_err("else\n");
    assert_eq!(e.message(), "`else` without a matching `if`");
    let e = load_err("elif true\n");
    assert_eq!(e.message(), "`elif` without a matching `if`");
    let e = load_err("if true\nelse\nelse\nendif\n");
    assert_eq!(e.message(), "`else` is not allowed after `else`");
    let e = load_err("if true\nelse\nelif true\nendif\n");
    assert_eq!(e.message(), "`elif` is not allowed after `else`");
    let e = load_err("if A > 3\nendif\n");
    assert_eq!(e.kind(), ConfigErrorKind::Conditional);
    assert!(e.message().starts_with("`A > 3` is not a valid if condition"), "{e}");
    let e = load_err(&"if true\n".repeat(70));
    assert!(e.message().contains("nested more than"), "{e}");
}

// ---- robustness ----

#[test]
fn arbitrary_input_never_panics() {
    let samples = [
        "",
        "\n",
        "\\",
        "=",
        ":",
        "@",
        "+=",
        "$(",
        "$()",
        "A = $(",
        "A = $()",
        "A=$(:)",
        "A = $(B:",
        "A @=",
        "A @=t\n@",
        "if",
        "elif",
        "else x",
        "endif x",
        "include",
        "include :",
        "A = $ENV(",
        "A = $ENV()",
        "A = $INT()",
        "A = $CHOICE()",
        "A = $SUBSTR()",
        "A = $SUBSTR(X,a)",
        "A = $(DOLLAR:x)",
        "A = $$",
        "A = $$$(",
        "\u{feff}",
        "A = é$(é)",
        "é = 1",
        "A = $INT(1,%)",
        "A = $REAL(1,%.9999999f)",
        "[",
        "[x",
        "A ,= ",
        "A +",
        "if $(X",
        "A = $REAL(1e308*10)",
        "A = $INT(-9223372036854775808 / -1)",
    ];
    for s in samples {
        let mut c = Config::new();
        let _ = c.load_str(s, "fuzz");
        for n in c.names().map(str::to_string).collect::<Vec<_>>() {
            let _ = c.get(&n);
        }
        let _ = c.expand(s);
    }
}

#[test]
fn random_input_never_panics() {
    // A small deterministic generator over the characters that matter.
    let alphabet: &[&str] = &[
        "$", "(", ")", ":", "=", "@", "+", "#", "\\", "\n", " ", "A", "b", "_", ".", "$(", "$$(",
        "$ENV(", "$INT(", "$CHOICE(", "$SUBSTR(", "DOLLAR", "if ", "else", "endif", "elif ",
        "defined ", "include", "@=t", "@t", ",", "%", "1", "-", "é",
    ];
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..3000 {
        let len = (next() % 40) as usize;
        let text: String =
            (0..len).map(|_| alphabet[(next() % alphabet.len() as u64) as usize]).collect();
        let mut c = Config::new();
        let _ = c.load_str(&text, "random");
        for n in c.names().map(str::to_string).collect::<Vec<_>>() {
            let _ = c.get(&n);
        }
        let _ = c.expand(&text);
    }
}

#[test]
fn scanning_unclosed_macros_is_linear() {
    // 200k unclosed `$(X:(` would take quadratic time with a naive scan.
    let text = "$(X:(".repeat(200_000);
    let c = Config::new();
    let start = std::time::Instant::now();
    assert_eq!(c.expand(&text).unwrap(), text);
    assert!(start.elapsed() < std::time::Duration::from_secs(20));
}

#[test]
fn printf_formats() {
    assert_eq!(printf("%5d|", Num::Int(42)).unwrap(), "   42|");
    assert_eq!(printf("%-5d|", Num::Int(42)).unwrap(), "42   |");
    assert_eq!(printf("%+d", Num::Int(42)).unwrap(), "+42");
    assert_eq!(printf("%05d", Num::Int(-42)).unwrap(), "-0042");
    assert_eq!(printf("%.3d", Num::Int(7)).unwrap(), "007");
    assert_eq!(printf("%#x", Num::Int(255)).unwrap(), "0xff");
    assert_eq!(printf("%o", Num::Int(8)).unwrap(), "10");
    assert_eq!(printf("%lld%%", Num::Int(5)).unwrap(), "5%");
    assert_eq!(printf("%.2f", Num::Real(3.25159)).unwrap(), "3.25");
    assert_eq!(printf("%8.2f", Num::Real(-3.25159)).unwrap(), "   -3.25");
    assert_eq!(printf("%e", Num::Real(12345.678)).unwrap(), "1.234568e+04");
    assert_eq!(printf("%G", Num::Real(1e-10)).unwrap(), "1E-10");
    assert_eq!(printf("%g", Num::Real(123456789.0)).unwrap(), "1.23457e+08");
    assert_eq!(printf("%g", Num::Real(0.0001)).unwrap(), "0.0001");
    assert_eq!(printf("%.16G", Num::Real(0.1)).unwrap(), "0.1");
    assert_eq!(printf("%g", Num::Real(0.0)).unwrap(), "0");
    assert!(printf("%s", Num::Int(1)).is_err());
    assert!(printf("no conversion", Num::Int(1)).is_err());
}

// ---- the spec's policy blocks ----

fn load_files(names: &[&str]) -> Config {
    let mut c = Config::new();
    for n in names {
        c.load_file(data_dir().join(n)).unwrap_or_else(|e| panic!("loading {n}: {e}"));
    }
    c
}

/// Expected expansions of the spec's default policy on its own: macros
/// the block never defines (SmallJob, IsPVM, IsVanilla) expand to "".
const DEFAULT_POLICY_EXPANDED: &[(&str, &str)] = &[
    ("MINUTE", "60"),
    ("HOUR", "(60 * 60)"),
    ("StateTimer", "(CurrentTime - EnteredCurrentState)"),
    ("ActivityTimer", "(CurrentTime - EnteredCurrentActivity)"),
    ("ActivationTimer", "(CurrentTime - JobStart)"),
    ("LastCkpt", "(CurrentTime - LastPeriodicCheckpoint)"),
    ("NonCondorLoadAvg", "(LoadAvg - CondorLoadAvg)"),
    ("BackgroundLoad", "0.3"),
    ("HighLoad", "0.5"),
    ("StartIdleTime", "15 * 60"),
    ("ContinueIdleTime", "5 * 60"),
    ("MaxSuspendTime", "10 * 60"),
    ("MaxVacateTime", "10 * 60"),
    ("KeyboardBusy", "KeyboardIdle < 60"),
    ("ConsoleBusy", "(ConsoleIdle  < 60)"),
    ("CPUIdle", "(LoadAvg - CondorLoadAvg) <= 0.3"),
    ("CPUBusy", "(LoadAvg - CondorLoadAvg) >= 0.5"),
    ("KeyboardNotBusy", "(KeyboardIdle < 60 == False)"),
    // Unbalanced in the spec itself.
    ("MachineBusy", "((LoadAvg - CondorLoadAvg) >= 0.5 || KeyboardIdle < 60"),
    ("WANT_SUSPEND", "(  || (KeyboardIdle < 60 == False) ||  ||  )"),
    ("WANT_VACATE", "( (CurrentTime - JobStart) > 10 * 60 ||  ||  )"),
    (
        "START",
        "( (KeyboardIdle > 15 * 60) && ( (LoadAvg - CondorLoadAvg) <= 0.3 || (State != \"Unclaimed\" && State != \"Owner\")) )",
    ),
    (
        "SUSPEND",
        "( KeyboardIdle < 60 || ( (CpuBusyTime > 2 * 60) && (CurrentTime - JobStart) > 90 ) )",
    ),
    (
        "CONTINUE",
        "( (LoadAvg - CondorLoadAvg) <= 0.3 && ((CurrentTime - EnteredCurrentActivity) > 10) && (KeyboardIdle > 5 * 60) )",
    ),
    (
        "PREEMPT",
        "( ((Activity == \"Suspended\") && ((CurrentTime - EnteredCurrentActivity) > 10 * 60)) || (SUSPEND && (WANT_SUSPEND == False)) )",
    ),
    ("MaxJobRetirementTime", "0"),
    ("KILL", "(CurrentTime - EnteredCurrentActivity) > 10 * 60"),
    (
        "PERIODIC_CHECKPOINT",
        "( (ImageSize < 60000) && ((CurrentTime - LastPeriodicCheckpoint) > (6 * (60 * 60))) ) || ( (CurrentTime - LastPeriodicCheckpoint) > (12 * (60 * 60)) )",
    ),
];

#[test]
fn default_policy_block_expands() {
    let c = load_files(&["default_policy.config"]);
    // Every macro of the block, and nothing else.
    let names: Vec<&str> = c.names().collect();
    let expected_names: Vec<&str> = DEFAULT_POLICY_EXPANDED.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, expected_names);
    for (name, want) in DEFAULT_POLICY_EXPANDED {
        let got = get(&c, name);
        assert_eq!(got, *want, "{name}");
        assert!(!got.contains("$("), "{name}: {got}");
    }
    // Raw text keeps the macros (late binding).
    assert_eq!(c.raw("KILL"), Some("$(ActivityTimer) > $(MaxVacateTime)"));
    assert_eq!(
        c.raw("PREEMPT"),
        Some(
            "( ((Activity == \"Suspended\") && ($(ActivityTimer) > $(MaxSuspendTime))) || (SUSPEND && (WANT_SUSPEND == False)) )"
        )
    );
    assert_eq!(c.location("START").unwrap().line, Some(28));
    assert_eq!(c.location("PERIODIC_CHECKPOINT").unwrap().line, Some(41));
}

#[test]
fn default_policy_with_supplement_is_plain_classad_text() {
    let c = load_files(&["default_policy.config", "default_policy_supplement.config"]);
    let want = [
        (
            "WANT_SUSPEND",
            "( (TARGET.ImageSize <  (15 * 1024)) || (KeyboardIdle < 60 == False) || (TARGET.JobUniverse == 4) || (TARGET.JobUniverse == 5) )",
        ),
        (
            "WANT_VACATE",
            "( (CurrentTime - JobStart) > 10 * 60 || (TARGET.JobUniverse == 4) || (TARGET.JobUniverse == 5) )",
        ),
        ("MachineBusy", "((LoadAvg - CondorLoadAvg) >= 0.5 || KeyboardIdle < 60)"),
    ];
    for (name, w) in want {
        assert_eq!(get(&c, name), w, "{name}");
    }
    // The other policy macros are unaffected by the supplement.
    for (name, w) in DEFAULT_POLICY_EXPANDED {
        if !["WANT_SUSPEND", "WANT_VACATE", "MachineBusy"].contains(name) {
            assert_eq!(get(&c, name), *w, "{name}");
        }
    }
    // Everything is fully expanded with balanced parentheses.
    for name in c.names() {
        let v = get(&c, name);
        assert!(!v.contains('$'), "{name}: {v}");
        assert_eq!(v.matches('(').count(), v.matches(')').count(), "{name}: {v}");
    }
}

#[test]
fn test_job_policy_refers_to_previous_values() {
    let c = load_files(&["default_policy.config", "testjob_policy.config"]);
    assert_eq!(
        get(&c, "START"),
        "(( (KeyboardIdle > 15 * 60) && ( (LoadAvg - CondorLoadAvg) <= 0.3 || (State != \"Unclaimed\" && State != \"Owner\")) )) || Owner == \"coltrane\""
    );
    assert_eq!(
        get(&c, "SUSPEND"),
        "(( KeyboardIdle < 60 || ( (CpuBusyTime > 2 * 60) && (CurrentTime - JobStart) > 90 ) )) && Owner != \"coltrane\""
    );
    assert_eq!(
        get(&c, "CONTINUE"),
        "( (LoadAvg - CondorLoadAvg) <= 0.3 && ((CurrentTime - EnteredCurrentActivity) > 10) && (KeyboardIdle > 5 * 60) )"
    );
    assert_eq!(
        get(&c, "PREEMPT"),
        "(( ((Activity == \"Suspended\") && ((CurrentTime - EnteredCurrentActivity) > 10 * 60)) || (SUSPEND && (WANT_SUSPEND == False)) )) && Owner != \"coltrane\""
    );
    assert_eq!(get(&c, "KILL"), "(CurrentTime - EnteredCurrentActivity) > 10 * 60");
    assert!(c.location("KILL").unwrap().origin.ends_with("testjob_policy.config"));
}

#[test]
fn time_of_day_policy_overrides() {
    let c = load_files(&["default_policy.config", "time_of_day_policy.config"]);
    let after = "( (ClockMin < 480 || ClockMin >= 1020) || (ClockDay == 0 || ClockDay == 6) )";
    let work = "( (ClockMin >= 480 && ClockMin < 1020) && (ClockDay > 0 && ClockDay < 6) )";
    assert_eq!(get(&c, "AfterHours"), after);
    assert_eq!(get(&c, "WorkHours"), work);
    assert_eq!(
        get(&c, "START"),
        format!("{after} && (LoadAvg - CondorLoadAvg) <= 0.3 && KeyboardIdle > 15 * 60")
    );
    assert_eq!(
        get(&c, "MachineBusy"),
        format!("( {work} || (LoadAvg - CondorLoadAvg) >= 0.5 || KeyboardIdle < 60 )")
    );
    assert_eq!(get(&c, "WANT_SUSPEND"), after);
}

#[test]
fn desktop_policy_expands() {
    let mut c = load_files(&[
        "default_policy.config",
        "default_policy_supplement.config",
        "desktop_policy.config",
    ]);
    c.load_str("IsDesktop = True\n", "local").unwrap();
    let want = [
        ("STARTD_EXPRS", "IsDesktop"),
        (
            "START",
            "( ((LoadAvg - CondorLoadAvg) <= 0.3 || (State != \"Unclaimed\" && State != \"Owner\")) && (IsDesktop =!= True || (KeyboardIdle > 15 * 60)) )",
        ),
        (
            "WANT_SUSPEND",
            "( (TARGET.ImageSize <  (15 * 1024)) || ((LoadAvg - CondorLoadAvg) >= 0.5 && (KeyboardIdle < 60 == False)) || (TARGET.JobUniverse == 4) || (TARGET.JobUniverse == 5) )",
        ),
        (
            "WANT_VACATE",
            "( (CurrentTime - JobStart) > 10 * 60 || (TARGET.JobUniverse == 4) || (TARGET.JobUniverse == 5) )",
        ),
        (
            "SUSPEND",
            "( ((CpuBusyTime > 2 * 60) && ((CurrentTime - JobStart) > 90)) || ( IsDesktop =?= True && KeyboardIdle < 60 ) )",
        ),
        (
            "CONTINUE",
            "( (LoadAvg - CondorLoadAvg) <= 0.3 && ((CurrentTime - EnteredCurrentActivity) > 300) && (IsDesktop =!= True || (KeyboardIdle > 5 * 60)) )",
        ),
        (
            "PREEMPT",
            "( ((Activity == \"Suspended\") && ((CurrentTime - EnteredCurrentActivity) > 10 * 60)) || (SUSPEND && (WANT_SUSPEND == False)) )",
        ),
        ("MaxJobRetirementTime", "(IsDesktop =!= True) * 0"),
        ("KILL", "(CurrentTime - EnteredCurrentActivity) > 10 * 60"),
        ("IsDesktop", "True"),
    ];
    for (name, w) in want {
        assert_eq!(get(&c, name), w, "{name}");
    }
    assert_eq!(c.location("START").unwrap().line, Some(8));
}

#[test]
fn job_suspension_policy_expands() {
    let c = load_files(&["default_policy.config", "job_suspension_policy.config"]);
    assert_eq!(get(&c, "NUM_CPUS"), "2");
    assert_eq!(get(&c, "VM1_START"), "(TARGET.IsHighPrioJob =?= TRUE)");
    let vm2 = "( (vm1_Activity != \"Busy\") && (KeyboardIdle > 15 * 60) && ((LoadAvg - CondorLoadAvg) <= 0.3 || (State != \"Unclaimed\" && State != \"Owner\")) )";
    assert_eq!(get(&c, "VM2_START"), vm2);
    // START refers to VM1_START/VM2_START, defined after it.
    assert_eq!(
        get(&c, "START"),
        format!(
            "(VirtualMachineID == 1) && (TARGET.IsHighPrioJob =?= TRUE) || (VirtualMachineID == 2) && {vm2}"
        )
    );
    assert_eq!(
        get(&c, "SUSPEND"),
        "(VirtualMachineID == 2) && ( (vm1_Activity == \"Busy\") || (KeyboardIdle < 60) )"
    );
    assert_eq!(get(&c, "CONTINUE"), "(KeyboardIdle > 5 * 60) && (vm1_Activity != \"Busy\")");
}
