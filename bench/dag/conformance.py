#!/usr/bin/env python3
"""HTCondor's own DAGMan test DAGs, run under andes: the conformance table.

What it does. HTCondor's test suite has a DAG test per `src/condor_tests/job_dagman_*.run`
(a perl file that submits the test's DAG with CondorTest::RunDagTest and says, in its
success and failure callbacks, which outcome it wants), plus the DAG, submit, script,
spliced, included and sub-DAG files they use. For each test this script

 1. copies the test's DAG and every file it references (and the test's file family,
    `job_dagman_<name>*`) into a scratch directory of its own, keeping their relative
    paths;
 2. rewrites the node submit files (and the DAG's inline submit descriptions) so the
    node jobs are WebAssembly stand-ins from andes's sample jobs: `exit_code.wasm N`
    where the original program exits with a fixed code N (or with one of its arguments,
    which the stand-in is then given), `sleeper.wasm` for sleeps, `hello.wasm` (exits 0)
    for echo and for programs whose exit depends on their logic; `universe` lines are
    dropped. PRE and POST scripts are left as they are and run natively (perl, sh);
 3. level 1, "accepted": runs `andes submit-dag -no_submit <dag>`, which checks the
    DAG and every node submit file; a refusal is recorded with andes's message;
 4. level 2, "runs as HTCondor says": runs the DAG in the foreground (`andes dagman`)
    against a personal pool this script starts (and stops), with a timeout per test,
    and compares the exit status with what the .run file expects (the expectation is
    derived from its callbacks, and marked `from .run` or `unknown`);
 5. writes the table, with a summary, to docs/src/dag-conformance.md.

DAG files that no .run names and no other DAG uses are run as tests of their own, with
an unknown expectation. Nothing of HTCondor's is copied into andes's repository: the
script reads an HTCondor source tree given on the command line.

How to run it (python3, standard library only; andes and the sample jobs built):

    mkdir -p /tmp/htc
    git -C HTCONDOR_REPO archive HEAD src/condor_tests src/condor_scripts | tar -x -C /tmp/htc
    python3 bench/dag/conformance.py /tmp/htc --commit "$(git -C HTCONDOR_REPO rev-parse HEAD)"

Options: --andes (default target/release/andes, else target/debug/andes), --samples
(default samples/target/wasm32-wasip1/release), --work (scratch, default /tmp/dagconf),
--timeout (seconds per test, default 150; at most 60 for DAG files without a .run),
--jobs (tests run at once, default 1: tests run together share the pool's slots and
upset each other's timing), --only REGEX (a subset; the page is then not written unless
--out is given), --no-run (level 1 only), --out (default docs/src/dag-conformance.md),
--json FILE (also write the raw results there), --render FILE (write the page again
from such a file, running nothing).

Failures examined by hand whose cause is the stand-ins (a node program that makes a
halt file, or fails for one node only) are said so in TRIAGE below, and in the table.

The andes binary is copied into the scratch directory first, so a build replacing it
mid-run does not leave the pool and its clients at different versions. Scripts that
call condor_q, condor_rm, ... get andes's commands of those names (on PATH), and
scripts that `use CondorTest;` find HTCondor's modules when the tree given has
src/condor_scripts (extract it too).
"""

import argparse
import concurrent.futures
import datetime
import glob
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# DAG keywords whose first word names the construct, for the "constructs" column.
KEYWORDS = [
    "JOB", "FINAL", "SERVICE", "PROVISIONER", "SUBDAG", "SPLICE", "INCLUDE", "SCRIPT",
    "PARENT", "RETRY", "ABORT-DAG-ON", "VARS", "PRIORITY", "CATEGORY", "MAXJOBS",
    "CONFIG", "DOT", "NODE_STATUS_FILE", "JOBSTATE_LOG", "SAVE_POINT_FILE", "REJECT",
    "PRE_SKIP", "SET_JOB_ATTR", "ENV", "CONNECT", "PIN_IN", "PIN_OUT", "DONE",
    "SUBMIT-DESCRIPTION", "DEBUG",
]

# HTCondor arguments that take a value (so the value is not read as a flag).
VALUED = {"-notification", "-outfile_dir", "-autorescue", "-append", "-insert_sub_file",
          "-batch-name", "-maxjobs", "-maxidle", "-maxpre", "-maxpost", "-config",
          "-dagman", "-debug", "-priority", "-dorescuefrom", "-load_save"}

SYSTEM_ECHO = {"echo", "date", "hostname", "cat", "env", "ls", "pwd", "printenv",
               "echo.exe", "condor_dagman", "appendmsg"}

CONDOR_COMMANDS = ["condor_submit", "condor_q", "condor_rm", "condor_hold", "condor_release",
                   "condor_qedit", "condor_wait", "condor_history", "condor_submit_dag",
                   "condor_dagman", "condor_config_val", "condor_reconfig", "condor_status"]

# What the page says of a run besides its tests (kept in the --json file).
META = ["commit", "slots", "timeout", "andes_path", "andes_built"]

# Failures examined by hand whose cause is the stand-ins, not andes: said in the table.
TRIAGE = {
    "job_dagman_halt-A": "its node jobs create and remove the DAG's halt file; the stand-ins do not, "
                         "so nothing halts",
    "job_dagman_metrics-A": "its node job fails for node L2 only (by its argument); the stand-in "
                            "succeeds everywhere",
    "job_dagman_suppress_notification": "its POST script wants the job to have printed "
                                        "'Notification = Never' (echo of a $$([...]) argument); "
                                        "hello prints its argv",
    "job_dagman_suppress_notification-cmd_line": "its POST script wants the job to have printed "
                                                 "'Notification = ...' (echo of a $$([...]) argument); "
                                                 "hello prints its argv",
    "job_dagman_repeat_holds": "its watch node holds and releases the other node's jobs from inside "
                               "a job; the stand-in does not",
}

UNIVERSES = {"vanilla", "standard", "scheduler", "local", "grid", "java", "vm", "parallel",
             "docker", "container"}

LOCK = threading.Lock()
# Set on SIGINT or SIGTERM: the test running is stopped, no other starts, the pool goes down.
STOP = threading.Event()


# ---------------------------------------------------------------- corpus reading

def read_text(path):
    try:
        with open(path, "rb") as f:
            data = f.read(2_000_000)
    except OSError:
        return None
    if b"\0" in data:
        return None
    return data.decode("utf-8", "replace")


def strip_perl_comments(text):
    return "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("#"))


def sub_body(text, var):
    """The body of `$var = sub { ... };` in a perl file, or None."""
    m = re.search(r"\$%s\s*=\s*sub\s*\{" % re.escape(var), text)
    if not m:
        return None
    depth, i = 1, m.end()
    while i < len(text) and depth:
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        i += 1
    return text[m.end():i - 1]


def top_level_die(body):
    """Whether a callback's body dies unconditionally (a statement `die` at its top)."""
    depth, prev = 0, ""
    for line in body.splitlines():
        s = line.strip()
        if (depth == 0 and re.match(r"die\b", s) and not re.search(r"\b(if|unless)\b", s)
                and not re.search(r"(\|\||\bor|&&|\band)$", prev)):
            return True
        depth += line.count("{") - line.count("}")
        if s:
            prev = s
    return False


# The page's own example (the manual's runner runs it in CI): one test laid out as
# HTCondor's are, run through this script, so that the script and what it reads of a
# .run file are tested where no HTCondor tree is at hand.
SELF_TEST = """The script on a test laid out as HTCondor's are (a DAG, its node's submit file
and program, and a `.run` file that wants the DAG to succeed):

```text file=htc/src/condor_tests/job_dagman_demo.dag
JOB A job_dagman_demo-node.cmd
JOB B job_dagman_demo-node.cmd
PARENT A CHILD B
```

```text file=htc/src/condor_tests/job_dagman_demo-node.cmd
executable = ./job_dagman_demo-node.pl
universe = vanilla
queue
```

```text file=htc/src/condor_tests/job_dagman_demo-node.pl
#!/usr/bin/env perl
exit(0);
```

```text file=htc/src/condor_tests/job_dagman_demo.run
use CondorTest;
$cmd = 'job_dagman_demo.dag';
$testname = "job_dagman_demo";
$dagman_args = "-verbose";
$success = sub { CondorTest::debug("the DAG succeeded, as expected\\n", 1); };
CondorTest::RegisterExitedSuccess($testname, $success);
if (CondorTest::RunDagTest($testname, $cmd, 0, $dagman_args)) { exit(0); }
die "$testname: failed\\n";
```

```sh
python3 "$ANDES_REPO/bench/dag/conformance.py" htc --andes "$(command -v andes)" \\
    --samples "$ANDES_SAMPLES" --work w --out page.md --commit demo > run.log
grep -o 'job_dagman_demo .*' run.log | tr -s ' ' | sed 's/ $//'
```

```text output
job_dagman_demo accepted=True ran=True
```
""".splitlines() + [""]


def expectation(run_text):
    """(expected, how, notes) from a .run file: expected is 'success', 'failure',
    'failure N' or None."""
    text = strip_perl_comments(run_text)
    cbs = {}
    for kind in ("ExitedSuccess", "ExitedFailure", "Abort"):
        m = re.search(r"Register%s\s*\(\s*\$\w+\s*,\s*\\?&?\$?(\w+)" % kind, text)
        if m:
            body = sub_body(text, m.group(1))
            cbs[kind] = body if body is not None else ""
    code = "\n".join(l for l in text.splitlines()
                     if not re.search(r"testdesc|debug\s*\(|^\s*print\b|die\s", l))
    acts = sorted(set(re.findall(
        r"\b(condor_rm|condor_hold|condor_release|condor_restart|condor_off|condor_on|"
        r"condor_reconfig|condor_vacate|kill)\b", code)))
    acts = [a for a in acts if a != "kill" or re.search(r"\bkill\s*\(|\bkill -", code)]
    notes = []
    if "RunDagTest" not in text:
        return None, "unknown", ["no RunDagTest"]
    if re.search(r"\$checknum|foreach\s+\$check", text):
        return None, "unknown", ["the .run runs several checks with other arguments"]
    if acts:
        return None, "unknown", ["the .run acts on the running DAG (%s)" % ", ".join(acts)]
    want_s = "ExitedSuccess" in cbs and not top_level_die(cbs["ExitedSuccess"])
    want_f = "ExitedFailure" in cbs and not top_level_die(cbs["ExitedFailure"])
    m = re.search(r"RegisterRelease\s*\(\s*\$\w+\s*,\s*\\?&?\$?(\w+)", text)
    if m and not top_level_die(sub_body(text, m.group(1)) or ""):
        return None, "unknown", ["the .run expects the DAGMan job held and released"]
    if "Abort" in cbs and not top_level_die(cbs["Abort"]) and not (want_s or want_f):
        return None, "unknown", ["the .run expects the DAGMan job removed"]
    if want_s and not want_f:
        body = cbs["ExitedSuccess"]
        if re.search(r"\bopen\s*\(|-e\s|-f\s|-s\s|grep", body):
            notes.append("its checks of output files not run")
        return "success", "from .run", notes
    if want_f and not want_s:
        body = cbs["ExitedFailure"]
        code = None
        m = re.search(r"retval\}\s*(?:!=|ne)\s*(\d+)", body)
        if m:
            code = int(m.group(1))
        if re.search(r"\bopen\s*\(|-e\s|-f\s|-s\s|grep", body):
            notes.append("its checks of output files not run")
        return ("failure %d" % code if code is not None else "failure"), "from .run", notes
    if want_s and want_f:
        # Both only log: the one that says "as expected" is the outcome wanted.
        said = [k for k in ("ExitedSuccess", "ExitedFailure")
                if re.search(r"(?<!not )(as )?expected", cbs[k]) and "not expected" not in cbs[k]]
        if len(said) == 1:
            return ("success" if said[0] == "ExitedSuccess" else "failure"), "from .run", [
                "the other outcome only logged"]
        return None, "unknown", ["the .run accepts success and failure"]
    return None, "unknown", ["no exit callback"]


WRITES = re.compile(r"open\s*\(\s*\w+\s*,\s*[\"']?\s*>|emit_file|\bcp\s|copy\s*\(|\bmv\s|move\s*\(|"
                    r"filesto(edit|create)|template|\bln\s|symlink", re.I)


def run_writes(run_text, name):
    """Whether the .run makes the file `name` (writes, copies or edits it into place)."""
    if not run_text:
        return False
    text = strip_perl_comments(run_text)
    base = os.path.basename(name)
    stem = os.path.splitext(base)[0]
    names = {base, stem}
    for m in re.finditer(r"\$(\w+)\s*=\s*[\"']([^\"']*)[\"']", text):
        if base in m.group(2) or m.group(2) == stem:
            names.add("$" + m.group(1))
    for line in text.splitlines():
        if WRITES.search(line) and any(n in line for n in names):
            return True
    return False


def missing_inputs(testdir, dags):
    """Files the DAGs name (submit files, scripts, splices, sub-DAGs) that are not there."""
    out = []
    todo = list(dags)
    seen = set()
    while todo:
        d = todo.pop()
        if d in seen:
            continue
        seen.add(d)
        text = read_text(os.path.join(testdir, d))
        if text is None:
            out.append(d)
            continue
        base = os.path.dirname(d)
        for s in dag_lines(text):
            w = s.split()
            k = w[0].upper()
            cands = []
            rest = [x.upper() for x in w]
            ndir = w[rest.index("DIR") + 1] if "DIR" in rest[2:] and rest.index("DIR") + 1 < len(w) else ""
            if k in ("JOB", "FINAL", "SERVICE", "PROVISIONER") and len(w) > 2 and w[2] != "{":
                cands.append(os.path.join(base, ndir, w[2]))
            elif k in ("SPLICE",) and len(w) > 2:
                cands.append(os.path.join(base, ndir, w[2]))
                todo.append(os.path.normpath(os.path.join(base, ndir, w[2])))
            elif k == "SUBDAG" and len(w) > 3:
                cands.append(os.path.join(base, ndir, w[3]))
            elif k == "INCLUDE" and len(w) > 1:
                cands.append(os.path.join(base, w[1]))
                todo.append(os.path.normpath(os.path.join(base, w[1])))
            elif k == "SCRIPT":
                i = 1
                while i < len(w) and w[i].upper() not in ("PRE", "POST", "HOLD"):
                    i += 1
                if i + 2 < len(w):
                    cands.append(os.path.join(base, w[i + 2]))
            for c in cands:
                c = os.path.normpath(c)
                if "$" not in c and not os.path.exists(os.path.join(testdir, c)):
                    out.append(c)
    return sorted(set(out))


def main_dags(run_text):
    """The DAG files the .run gives RunDagTest."""
    text = strip_perl_comments(run_text)
    m = re.search(r"RunDagTest\s*\(\s*\$\w+\s*,\s*(\\@\w+|\$\w+)", text)
    var = m.group(1) if m else "$cmd"
    name = re.escape(var.lstrip("\\$@"))
    for pat in (r"\$%s\s*=\s*\[([^\]]*)\]" % name, r"@%s\s*=\s*\(([^)]*)\)" % name):
        m = re.search(pat, text)
        if m:
            return re.findall(r"['\"]([^'\"]+)['\"]", m.group(1))
    m = re.search(r"\$%s\s*=\s*['\"]([^'\"]+)['\"]" % name, text)
    return [m.group(1)] if m else []


def dag_lines(text):
    """Logical lines of a DAG file: comments dropped, continuations joined."""
    out, cur = [], ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        line = cur + line
        cur = ""
        s = line.strip()
        if s and not s.startswith("#"):
            out.append(s)
    return out


def constructs(dag_text):
    found = set()
    depth = 0
    for s in dag_lines(dag_text):
        if depth:
            if s.startswith("}"):
                depth = 0
            continue
        words = s.split()
        w = words[0].upper()
        if w in KEYWORDS:
            name = w
            rest = [x.upper() for x in words[1:]]
            if w == "SCRIPT":
                kinds = [k for k in rest if k in ("PRE", "POST", "HOLD")]
                name = "SCRIPT " + (kinds[0] if kinds else "?")
                if "DEFER" in rest:
                    found.add("SCRIPT DEFER")
            if w == "SUBDAG":
                name = "SUBDAG EXTERNAL"
            if w == "RETRY" and "UNLESS-EXIT" in rest:
                found.add("UNLESS-EXIT")
            if w in ("JOB", "FINAL"):
                if "NOOP" in rest:
                    found.add("NOOP")
                if "DONE" in rest:
                    found.add("DONE")
                if "DIR" in rest:
                    found.add("DIR")
                if s.endswith("{"):
                    found.add("inline submit")
            if w == "ABORT-DAG-ON" and "RETURN" in rest:
                found.add("ABORT-DAG-ON RETURN")
            if w == "PARENT" and len(words) > 1 and "CHILD" not in rest:
                pass
            found.add(name)
        if s.endswith("{"):
            depth = 1
    return found


# ---------------------------------------------------------------- copying

def tokens(text):
    return set(t for t in re.split(r"[\s\"'=,;()<>|`{}\[\]]+", text) if t)


def collect(corpus, name, dags):
    """Relative paths (files and directories) a test uses, inside the corpus."""
    rel = set()
    for f in glob.glob(os.path.join(corpus, glob.escape(name) + "*")):
        rel.add(os.path.relpath(f, corpus))
    for d in dags:
        if os.path.exists(os.path.join(corpus, d)):
            rel.add(os.path.normpath(d))
    todo = list(rel)
    seen = set()
    while todo:
        r = todo.pop()
        if r in seen:
            continue
        seen.add(r)
        p = os.path.join(corpus, r)
        files = []
        if os.path.isdir(p):
            for dp, _, fs in os.walk(p):
                files += [os.path.relpath(os.path.join(dp, f), corpus) for f in fs]
        else:
            files = [r]
        for fr in files:
            if fr.endswith(".run"):
                continue
            text = read_text(os.path.join(corpus, fr))
            if text is None:
                continue
            base = os.path.dirname(fr)
            for t in tokens(text):
                if len(t) < 3 or t in (".", "..") or "$" in t:
                    continue
                for cand in (os.path.normpath(os.path.join(base, t)), os.path.normpath(t)):
                    if cand.startswith("..") or cand in (".", "") or os.path.isabs(cand):
                        continue
                    cp = os.path.join(corpus, cand)
                    if os.path.exists(cp) and cand not in rel:
                        if os.path.isdir(cp) and not os.path.basename(cand).startswith("job_dagman_"):
                            continue
                        rel.add(cand)
                        todo.append(cand)
    return rel


def copy_scripts(scripts, testdir, rel, corpus):
    """HTCondor's test modules (src/condor_scripts) a test's files name, beside them."""
    if not scripts:
        return
    for r in rel:
        p = os.path.join(corpus, r)
        if os.path.isdir(p):
            continue
        text = read_text(p) or ""
        for t in tokens(text):
            if t.endswith(".pm") and "/" not in t and os.path.isfile(os.path.join(scripts, t)):
                dst = os.path.join(testdir, os.path.dirname(r), t)
                if not os.path.exists(dst):
                    shutil.copy2(os.path.join(scripts, t), dst)


def copy_into(corpus, rel, dest):
    for r in sorted(rel):
        src = os.path.join(corpus, r)
        dst = os.path.join(dest, r)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if os.path.isdir(src):
            shutil.copytree(src, dst, dirs_exist_ok=True)
        elif not os.path.exists(dst):
            shutil.copy2(src, dst)


# ---------------------------------------------------------------- stand-ins

def split_args(value):
    v = value.strip()
    if len(v) >= 2 and v[0] == '"' and v[-1] == '"':
        v = v[1:-1].replace('""', '"')
    try:
        return shlex.split(v)
    except ValueError:
        return v.split()


def script_exit(text, lang):
    """How a script exits: ('fixed', N), ('argv', k, approx), or ('varies', codes)."""
    body = strip_perl_comments(text) if lang != "py" else text
    # What string literals say ("non-zero exit status") is not code.
    body = re.sub(r'"(?:\\.|[^"\\\n])*"', '""', body)
    body = re.sub(r"'(?:\\.|[^'\\\n])*'", "''", body)
    argvars = {}
    shifts = 0
    # An exit only inside braces (an if) leaves the script's end reachable: exit 0.
    top = False
    depth = 0
    for line in body.splitlines():
        if depth == 0 and re.search(r"^\s*exit\b|^\s*sys\.exit\b", line) and not re.search(
                r"\b(if|unless)\b", line):
            top = True
        depth += line.count("{") - line.count("}")
        if lang == "sh":
            depth += len(re.findall(r"\b(then|do)\b", line)) - len(re.findall(r"\b(fi|done)\b", line))
        depth = max(depth, 0)
    if lang == "perl":
        for m in re.finditer(r"(?:my\s+)?\$(\w+)\s*=\s*(shift\b(?:\s*@ARGV)?|\$ARGV\[(\d+)\])", body):
            if m.group(3) is not None:
                argvars[m.group(1)] = int(m.group(3))
            else:
                argvars[m.group(1)] = shifts
                shifts += 1
        raw = re.findall(r"\bexit\s*\(?\s*([^;)\s}]*)", body)
    elif lang == "sh":
        raw = re.findall(r"\bexit\b[ \t]*([^;\s]*)", body)
    else:
        raw = re.findall(r"sys\.exit\s*\(\s*([^)]*)\)", body) + re.findall(r"\bexit\s*\(\s*([^)]*)\)", body)
    vals = []
    for e in raw:
        e = e.strip().strip('"')
        if e == "":
            vals.append(("lit", 0))
        elif re.fullmatch(r"-?\d+", e):
            vals.append(("lit", int(e)))
        elif lang == "perl" and re.fullmatch(r"\$ARGV\[(\d+)\]", e):
            vals.append(("argv", int(re.fullmatch(r"\$ARGV\[(\d+)\]", e).group(1))))
        elif lang == "perl" and e.startswith("$") and e[1:] in argvars:
            vals.append(("argv", argvars[e[1:]]))
        elif lang == "sh" and re.fullmatch(r"\$\{?(\d)\}?", e):
            vals.append(("argv", int(re.search(r"\d", e).group(0)) - 1))
        else:
            vals.append(("other", e))
    if not vals:
        dies = lang == "perl" and re.search(r"(?<![|r]\s)\bdie\b", body) and not re.search(
            r"(or|\|\|)\s*die\b", body)
        if dies:
            return ("varies", ["0", "die"])
        return ("fixed", 0)
    if not top:
        vals.append(("lit", 0))
    lits = sorted(set(v for k, v in vals if k == "lit"))
    argv = sorted(set(v for k, v in vals if k == "argv"))
    other = [v for k, v in vals if k == "other"]
    if not argv and not other and len(lits) == 1:
        return ("fixed", lits[0])
    if len(argv) == 1 and not other and set(lits) <= {0}:
        return ("argv", argv[0], bool(lits))
    return ("varies", [str(x) for x in lits] + ["$ARGV[%d]" % a for a in argv] + other)


def script_lang(path, text):
    first = text.splitlines()[0] if text else ""
    if path.endswith(".pl") or "perl" in first:
        return "perl"
    if path.endswith(".sh") or re.search(r"\b(ba)?sh\b", first):
        return "sh"
    if path.endswith(".py") or "python" in first:
        return "py"
    return None


def stand_in(exe, args, subdir, testdir, samples):
    """(wasm path, new arguments or None to keep, note) for an executable."""
    ex = exe.strip()
    m = re.match(r"\$CHOICE\(\s*IsWindows\s*,\s*([^,]+),", ex)
    if m:
        ex = m.group(1).strip()
    base = os.path.basename(ex)
    hello = os.path.join(samples, "hello.wasm")
    code = os.path.join(samples, "exit_code.wasm")
    sleeper = os.path.join(samples, "sleeper.wasm")
    if base == "true":
        return code, "0", "%s -> exit_code 0" % exe
    if base == "false":
        return code, "1", "%s -> exit_code 1" % exe
    if base in ("sleep", "x_sleep.pl"):
        a = [x for x in args if x != "0"][:1]
        return sleeper, " ".join(a), "%s -> sleeper %s" % (exe, " ".join(a))
    if base in ("perl", "bash", "sh", "python3", "python") and args:
        script, args = args[0], args[1:]
        ex, base = script, os.path.basename(script)
    path = None
    if not ex.startswith("/") and "$" not in ex:
        for cand in (os.path.join(testdir, subdir, ex), os.path.join(testdir, ex)):
            if os.path.isfile(os.path.normpath(cand)):
                path = os.path.normpath(cand)
                break
    if path:
        text = read_text(path) or ""
        lang = script_lang(path, text)
        if lang:
            how = script_exit(text, lang)
            if how[0] == "fixed":
                return code, str(how[1]), "%s -> exit_code %d (it exits %d)" % (exe, how[1], how[1])
            if how[0] == "argv":
                k = how[1]
                val = args[k] if k < len(args) else "0"
                approx = " (or 0)" if how[2] else ""
                return code, val, "%s -> exit_code %s (it exits with its argument %d%s)" % (
                    exe, val, k + 1, approx)
            return hello, None, "%s -> hello (it exits %s by its logic)" % (exe, "/".join(how[1][:4]))
        return hello, None, "%s -> hello (not a script andes could read)" % exe
    if base in SYSTEM_ECHO:
        return hello, None, "%s -> hello" % exe
    if ex.startswith("/") and not os.path.exists(ex):
        return None, None, "%s kept (missing on purpose)" % exe
    return hello, None, "%s -> hello (unknown program)" % exe


def rewrite_submit(lines, subdir, testdir, samples):
    """Rewrites one submit description (a list of lines); returns (lines, notes)."""
    exe_i, args_i, exe, args = None, None, None, []
    for i, l in enumerate(lines):
        m = re.match(r"\s*(\w+)\s*=\s*(.*)$", l)
        if not m:
            continue
        k = m.group(1).lower()
        if k == "executable":
            exe_i, exe = i, m.group(2).strip()
        elif k in ("arguments", "args"):
            args_i, args = i, split_args(m.group(2))
    notes = []
    out = list(lines)
    drop = set()
    for i, l in enumerate(lines):
        if re.match(r"\s*universe\s*=", l, re.I):
            drop.add(i)
            u = l.split("=", 1)[1].strip()
            if u.lower() not in UNIVERSES:
                drop.discard(i)  # a universe HTCondor lacks too: the test's point
                notes.append("universe %s kept" % u)
            elif u.lower() != "vanilla":
                notes.append("universe %s dropped" % u)
    if exe_i is not None:
        wasm, newargs, note = stand_in(exe, args, subdir, testdir, samples)
        queue_sets_args = any(re.match(r"\s*queue\b.*\b(arguments|args)\b", l, re.I) for l in lines)
        if wasm and wasm.endswith("exit_code.wasm") and queue_sets_args and newargs == "0":
            wasm, newargs = os.path.join(samples, "hello.wasm"), None
            note = note.split(" -> ")[0] + " -> hello (it exits 0; its queue statement sets the arguments)"
        notes.append(note)
        if wasm:
            out[exe_i] = "executable = %s" % wasm
            if newargs is not None:
                if args_i is not None:
                    out[args_i] = "arguments = %s" % newargs
                else:
                    out[exe_i] += "\narguments = %s" % newargs
    out = [l for i, l in enumerate(out) if i not in drop]
    return out, notes


def is_submit(text):
    return (re.search(r"^\s*queue\b", text, re.I | re.M)
            and re.search(r"^\s*executable\s*=", text, re.I | re.M))


def rewrite_tree(testdir, samples):
    notes = []
    for dp, _, fs in os.walk(testdir):
        for f in sorted(fs):
            p = os.path.join(dp, f)
            rel = os.path.relpath(p, testdir)
            if f.endswith((".pl", ".sh", ".py", ".run", ".pm")):
                continue
            text = read_text(p)
            if not text:
                continue
            subdir = os.path.dirname(rel)
            if f.endswith(".dag"):
                lines = text.split("\n")
                out, block, changed = [], None, False
                for l in lines:
                    if block is None:
                        out.append(l)
                        if l.rstrip().endswith("{") and not l.lstrip().startswith("#"):
                            block = []
                    elif l.strip().startswith("}"):
                        new, n = rewrite_submit(block, subdir, testdir, samples)
                        changed |= new != block
                        notes += ["%s (inline): %s" % (rel, x) for x in n]
                        out += new + [l]
                        block = None
                    else:
                        block.append(l)
                if block is not None:
                    out += block
                if changed:
                    with open(p, "w") as fh:
                        fh.write("\n".join(out))
            elif is_submit(text):
                new, n = rewrite_submit(text.split("\n"), subdir, testdir, samples)
                notes += ["%s: %s" % (rel, x) for x in n]
                with open(p, "w") as fh:
                    fh.write("\n".join(new))
    return notes


# ---------------------------------------------------------------- running

def run(cmd, cwd, env, timeout):
    """Runs cmd in its own process group; kills the group at the timeout or on a stop."""
    t0 = time.time()
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, start_new_session=True)
    chunks = []
    reader = threading.Thread(target=lambda: chunks.append(p.stdout.read()), daemon=True)
    reader.start()
    timed_out = False
    while p.poll() is None:
        if STOP.is_set() or time.time() - t0 > timeout:
            timed_out = True
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    p.wait(timeout=10)
                    break
                except subprocess.TimeoutExpired:
                    continue
            break
        time.sleep(0.1)
    p.wait()
    reader.join(timeout=10)
    out = b"".join(c for c in chunks if c).decode("utf-8", "replace")
    return (None if timed_out else p.returncode), out, timed_out, time.time() - t0


def andes_flags(andes, sub):
    """The long options `andes SUB --help` lists: lower-cased name -> (spelling, takes a value)."""
    out = subprocess.run([andes, sub, "--help"], capture_output=True, text=True).stdout
    flags = {}
    for m in re.finditer(r"--([A-Za-z][A-Za-z_-]*)( <[^>]+>)?", out):
        flags[m.group(1).lower()] = (m.group(1), bool(m.group(2)))
    return flags


def map_args(dagman_args, run_text, flags):
    """HTCondor's arguments for the test -> (andes's arguments, HTCondor's dropped)."""
    m = re.search(r"\$maxjobs\s*=\s*(\d+)", run_text)
    s = dagman_args.replace("$maxjobs", m.group(1) if m else "1")
    try:
        words = shlex.split(s)
    except ValueError:
        words = s.split()
    out, dropped, i = [], [], 0
    while i < len(words):
        w = words[i]
        k = flags.get(w.lstrip("-").lower()) if w.startswith("-") else None
        if k and w.lstrip("-").lower() not in ("help", "version"):
            n = 1 if k[1] else 0
            out.append("--" + k[0])
            out += words[i + 1:i + 1 + n]
        else:
            n = 1 if w.lower() in VALUED else 0
            dropped.append(" ".join(words[i:i + 1 + n]))
        i += 1 + n
    return out, dropped


def one_line(msg, testdir):
    lines = [l.strip() for l in msg.replace(testdir + "/", "").splitlines() if l.strip()]
    keep = ([l for l in lines if l.startswith(("andes:", "error:"))]
            or [l for l in lines if "andes" in l.lower() or "error" in l.lower()] or lines)
    if keep and keep[-1].startswith("error:"):
        return keep[-1][:300]
    s = keep[-1] if keep else ""
    return s[:300]


def last_failures(testdir, dag):
    """The first errors DAGMan reported: the DAG's own dagman.out, then its sub-DAGs'."""
    first = os.path.join(testdir, dag + ".dagman.out")
    others = sorted(glob.glob(os.path.join(testdir, "**", "*.dagman.out"), recursive=True))
    hits = []
    for p in [first] + [o for o in others if o != first]:
        text = read_text(p) or ""
        lines = [l.split(" ", 2)[-1] for l in text.splitlines()]
        errors = [l for l in lines if l.startswith("ERROR")]
        fails = [l for l in lines if re.search(r"fail|abort|timed out|cannot|refus", l, re.I)]
        hits += errors + [l for l in fails if l not in errors]
    return hits[:2] if not any("is not among" in h for h in hits) else (
        [h for h in hits if "is not among" in h][:1] + [h for h in hits if "is not among" not in h][:1])


def do_test(t, opts, env):
    if STOP.is_set():
        t.update(accepted=None, why1="not run (stopped)", ran=None, expected=None,
                 exp_notes=["stopped"])
        return t
    corpus = opts.corpus
    testdir = os.path.join(opts.work, "tests", t["name"])
    shutil.rmtree(testdir, ignore_errors=True)
    os.makedirs(testdir)
    copy_into(corpus, t["files"], testdir)
    copy_scripts(opts.scripts, testdir, [f for f in t["files"] if not f.endswith(".run")], corpus)
    t["replaced"] = rewrite_tree(testdir, opts.samples)
    dags = t["dags"]
    t["constructs"] = set()
    for dp, _, fs in os.walk(testdir):
        for f in fs:
            if f.endswith(".dag"):
                t["constructs"] |= constructs(read_text(os.path.join(dp, f)) or "")
    made = [f for f in missing_inputs(testdir, dags) if run_writes(t.get("run_text", ""), f)]
    if made:
        # The .run makes these before it submits: without its set-up the test
        # says nothing about andes.
        t["setup"] = made
        t["accepted"] = None
        t["why1"] = "the .run writes %s first" % ", ".join(os.path.basename(f) for f in made[:3])
        t["ran"] = None
        t["expected"] = None
        t["exp_notes"] = ["needs the .run's set-up"]
        return t
    if not dags or not all(os.path.exists(os.path.join(testdir, d)) for d in dags):
        t["accepted"] = None
        t["setup"] = [d for d in dags if not os.path.exists(os.path.join(testdir, d))]
        t["why1"] = "the DAG file is not in the corpus (the .run makes it)"
        t["ran"] = None
        t["expected"] = None
        t["exp_notes"] = ["needs the .run's set-up"]
        return t
    andes_args, dropped = map_args(t["dagman_args"], t.get("run_text", ""), opts.flags_submit)
    run_args, _ = map_args(t["dagman_args"], t.get("run_text", ""), opts.flags_dagman)
    t["andes_args"], t["dropped_args"] = andes_args, dropped
    cmd = [opts.andes, "submit-dag", "-no_submit"] + andes_args + dags
    rc, out, to, _ = run(cmd, testdir, env, opts.timeout)
    t["accepted"] = rc == 0
    t["why1"] = "" if rc == 0 else ("timed out" if to else one_line(out, testdir))
    # HTCondor's own arguments, each alone: which andes refuses.
    t["refused_args"] = []
    for a in dropped:
        probe = [opts.andes, "submit-dag", "-no_submit"] + a.split(" ", 1)[:1] + a.split(" ", 1)[1:] + dags
        prc, _, _, _ = run(probe, testdir, env, 30)
        if prc != 0 and t["accepted"]:
            t["refused_args"].append(a.split(" ")[0])
    for d in dags:
        for suffix in (".condor.sub",):
            try:
                os.remove(os.path.join(testdir, d + suffix))
            except OSError:
                pass
    if opts.no_run:
        t["ran"] = None
        return t
    cmd = [opts.andes, "dagman"] + run_args + dags
    t["timeout_used"] = opts.timeout if not t.get("orphan") else min(opts.timeout, 60)
    rc, out, to, secs = run(cmd, testdir, env, t["timeout_used"])
    t["rc"], t["timed_out"], t["secs"], t["out2"] = rc, to, round(secs, 1), one_line(out, testdir)
    if "panicked" in out:
        t["panic"] = [l for l in out.splitlines() if "panicked" in l][0][:300]
    d0 = dags[0]
    t["rescue"] = sorted(os.path.basename(p) for p in glob.glob(os.path.join(testdir, d0 + ".rescue[0-9]*")))
    try:
        with open(os.path.join(testdir, d0 + ".metrics")) as f:
            t["metrics"] = json.load(f)
    except (OSError, ValueError):
        t["metrics"] = None
    t["dagman_out"] = last_failures(testdir, d0)
    if to:
        cleanup(opts, env, testdir)
    exp = t["expected"]
    if exp is None:
        t["ran"] = None
    elif to:
        t["ran"] = False
    elif exp == "success":
        t["ran"] = rc == 0
    else:
        want = exp.split()[1:] if exp.startswith("failure ") else []
        t["ran"] = rc not in (0, None) and (not want or str(rc) == want[0])
    return t


def cleanup(opts, env, testdir):
    """Removes the jobs a timed-out test left in the queue (those from its directory)."""
    run([opts.andes, "rm", "--constraint", 'regexp("^%s/", Iwd)' % re.escape(testdir)],
        testdir, env, 30)


# ---------------------------------------------------------------- the tests

def find_tests(corpus):
    runs = sorted(glob.glob(os.path.join(corpus, "job_dagman_*.run")))
    alldags = sorted(os.path.relpath(p, corpus) for p in glob.glob(
        os.path.join(corpus, "**", "job_dagman_*.dag"), recursive=True))
    tests, mains = [], set()
    for r in runs:
        name = os.path.basename(r)[:-4]
        text = read_text(r) or ""
        dags = main_dags(text)
        exp, how, notes = expectation(text)
        m = re.search(r"\$dagman_args\s*=\s*\"([^\"]*)\"", strip_perl_comments(text))
        tests.append(dict(name=name, dags=dags, expected=exp, how=how, exp_notes=notes,
                          dagman_args=m.group(1) if m else "", run_text=text))
        mains |= set(dags)
    used = set()
    for d in alldags:
        text = read_text(os.path.join(corpus, d)) or ""
        for s in dag_lines(text):
            w = s.split()
            k = w[0].upper()
            if k in ("SPLICE", "INCLUDE", "SUBDAG") and len(w) > 1:
                f = {"SPLICE": 2, "INCLUDE": 1, "SUBDAG": 3}[k]
                if len(w) > f:
                    used.add(os.path.basename(w[f]))
    for d in alldags:
        if d in mains or os.path.basename(d) in used:
            continue
        fam = [t for t in tests if os.path.basename(d).startswith(t["name"])]
        name = os.path.basename(d)[:-4]
        while any(t["name"] == name for t in tests):
            name += "+"
        tests.append(dict(name=name, dags=[d], expected=None, how="unknown",
                          exp_notes=["no .run" + (" (family of %s)" % fam[0]["name"] if fam else "")],
                          dagman_args="", run_text="", orphan=True))
    for t in tests:
        t["files"] = collect(corpus, t["name"], t["dags"])
    return tests


# ---------------------------------------------------------------- the page

def cell(s):
    """A table cell's text: no pipes, backticks or HTML (mdBook would read `<DAG>` as a tag)."""
    s = str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return s.replace("|", "\\|").replace("\n", " ").replace("`", "'")


def why(t):
    w = why_andes(t)
    # Paths of the scratch directory say nothing: the test's own names do.
    w = re.sub(r"/\S*/tests/%s/" % re.escape(t["name"]), "", w)
    if w and t["name"] in TRIAGE:
        w += " (stand-in: %s)" % TRIAGE[t["name"]]
    return w


def why_andes(t):
    if t["accepted"] is None or not t["accepted"]:
        return t["why1"]
    if t.get("panic"):
        return "andes panicked: " + t["panic"]
    if t.get("ran") is False:
        warn = t.get("out2", "") if t.get("out2", "").startswith("WARNING") else ""
        if t.get("timed_out"):
            return "no end within the timeout (%s s)" % t.get("timeout_used") + (
                "; " + warn if warn else "")
        out = "exit %s, expected %s" % (t["rc"], t["expected"].replace("failure", "failure (non-zero)"))
        extra = "; ".join(t.get("dagman_out") or [])
        if t["rc"] and t.get("out2"):
            extra = extra or t["out2"]
        if warn and warn not in extra:
            extra = (extra + "; " if extra else "") + warn
        return out + ("; " + extra if extra else "")
    return ""


def stand_ins(t):
    """What replaced each node program, compactly: 'prog -> wasm args'."""
    seen = []
    for n in t.get("replaced", []):
        m = re.search(r"(?::|\(inline\):) (\S+) (->|kept) (.*)$", n)
        if not m:
            continue
        prog = os.path.basename(m.group(1).rstrip(","))
        to = m.group(3) if m.group(2) == "->" else "kept"
        to = re.sub(r" \(.*", "", to)
        item = "%s: %s" % (prog, to)
        if item not in seen:
            seen.append(item)
    return "; ".join(seen)


def outcome(t):
    if t.get("rc") is None and not t.get("timed_out"):
        return "not run"
    if t.get("timed_out"):
        return "timeout"
    m = t.get("metrics") or {}
    s = "exit %s" % t["rc"]
    if m:
        s += ", %s/%s nodes done" % (m.get("nodes_done"), m.get("total_nodes"))
        if m.get("nodes_failed"):
            s += ", %s failed" % m["nodes_failed"]
    if t.get("rescue"):
        s += ", rescue DAG"
    return s


def reason_class(t):
    """A short class for the summary's grouping."""
    w = why(t)
    if t["accepted"] is False and t.get("ran"):
        return "refused up front, where the .run wants DAGMan to fail (counted as expected)"
    if t["accepted"] is False and not t.get("expected"):
        return "refused; no .run to say what HTCondor does"
    if t["accepted"] is False and len(t.get("dags", [])) > 1:
        return "refused: several DAG files on one command line (%s)" % re.sub(
            r"'[^']*'", "'...'", w)
    if not t["accepted"]:
        m = re.search(r":\d+: (.*)", w)
        s = m.group(1) if m else w
        s = re.sub(r"'[^']*'|\"[^\"]*\"|`[^`]*`", "'...'", s)
        s = re.sub(r"\b[\w.+-]+\.(dag|cmd|sub|pl|sh|config)\b", "FILE", s)
        s = re.sub(r"\d+", "N", s)
        return "refused: " + s[:110]
    if t.get("panic"):
        return "panic"
    if t["name"] in TRIAGE:
        return "the stand-ins cannot do what the test's programs do"
    if any("is not among" in h for h in t.get("dagman_out") or []):
        return ("a node's submit refused: its module 'is not among root's uploads' "
                "(uploaded before, released as another job left)")
    if t.get("timed_out"):
        return "timeout"
    return "exit %s where the .run wants %s" % (t["rc"], t["expected"])


def write_page(tests, opts):
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    n = len(tests)
    acc = sum(1 for t in tests if t["accepted"])
    setup = [t for t in tests if t["accepted"] is None]
    known = [t for t in tests if t.get("expected")]
    ran_ok = [t for t in known if t.get("ran")]
    ran_bad = [t for t in known if t.get("ran") is False]
    unk = [t for t in tests if not t.get("expected")]
    unk_ran = [t for t in unk if t.get("rc") is not None or t.get("timed_out")]
    groups = {}
    for t in tests:
        if t["accepted"] is False or t.get("ran") is False or t.get("panic"):
            groups.setdefault(reason_class(t), []).append(t["name"])
    refused_args = {}
    for t in tests:
        for a in t.get("refused_args", []):
            refused_args.setdefault(a, 0)
            refused_args[a] += 1
    L = []
    L.append("# DAG conformance: HTCondor's test DAGs under andes")
    L.append("")
    L.append("HTCondor's test suite has a DAGMan test for each `job_dagman_*.run` file of its")
    L.append("`src/condor_tests` directory: a perl script that submits the test's DAG and says, in")
    L.append("its callbacks, whether DAGMan must succeed or fail. This page runs those DAGs under")
    L.append("andes, from HTCondor commit %s, with the script" % opts.commit)
    L.append("`bench/dag/conformance.py`, which says at its top what it does.")
    L.append("")
    L.append("Each test's DAG and the files it uses are copied to a scratch directory. Node jobs")
    L.append("become WebAssembly stand-ins from the sample jobs: `exit_code N` where the original")
    L.append("program exits with a fixed code N or with one of its arguments, `sleeper` for sleeps,")
    L.append("and `hello`, which exits 0, for `echo` and for programs whose exit depends on their")
    L.append("logic. `universe` lines are dropped; PRE and POST scripts run natively, as they are.")
    L.append("A test is *accepted* when `andes submit-dag -no_submit` takes it. It *ran as")
    L.append("expected* when `andes dagman`, on a personal pool of %d slots, ended within %d" % (opts.slots, opts.timeout))
    L.append("seconds with the exit status its `.run` file expects: success or failure, and the")
    L.append("exit code when the `.run` checks it. The `.run` files' checks of output files are not")
    L.append("run; a test whose `.run` acts on the DAG while it runs (removes, holds, restarts) or")
    L.append("accepts any outcome has an unknown expectation. DAG files that no `.run` names and no")
    L.append("other DAG uses are listed as tests of their own. The andes binary was %s, built %s." % (
        os.path.relpath(opts.andes_path, ROOT) if opts.andes_path.startswith(ROOT) else
        os.path.basename(opts.andes_path), opts.andes_built))
    L.append("")
    L.append("Regenerated on %s with:" % date)
    L.append("")
    L.append("```text")
    L.append("mkdir -p /tmp/htc")
    L.append("git -C HTCONDOR_REPO archive HEAD src/condor_tests src/condor_scripts | tar -x -C /tmp/htc")
    L.append("python3 bench/dag/conformance.py /tmp/htc --commit %s" % opts.commit)
    L.append("```")
    L.append("")
    L.extend(SELF_TEST)
    L.append("## Summary")
    L.append("")
    L.append("| | tests |")
    L.append("| --- | --- |")
    L.append("| test DAGs | %d (%d with a `.run` file) |" % (n, sum(1 for t in tests if not t.get("orphan"))))
    L.append("| not runnable without their `.run` (it writes the DAG or files it names) | %d |" % len(setup))
    L.append("| accepted by `andes submit-dag -no_submit` | %d of %d |" % (acc, n - len(setup)))
    L.append("| with an expectation from their `.run` | %d |" % len(known))
    L.append("| ran as expected | %d |" % len(ran_ok))
    L.append("| did not | %d |" % len(ran_bad))
    L.append("| expectation unknown (ran, not judged) | %d (%d) |" % (len(unk), len(unk_ran)))
    L.append("")
    if refused_args:
        L.append("HTCondor arguments the tests pass that andes refuses (the runs here go without them): " +
                 ", ".join("%s (%d tests)" % (cell(a), c) for a, c in
                           sorted(refused_args.items(), key=lambda x: -x[1])) + ".")
        L.append("")
    L.append("Refusals and failures, by reason (the table below has each test's message):")
    L.append("")
    L.append("| reason | tests | which |")
    L.append("| --- | --- | --- |")
    for r, names in sorted(groups.items(), key=lambda x: (-len(x[1]), x[0])):
        L.append("| %s | %d | %s |" % (cell(r), len(names), cell(", ".join(
            x.replace("job_dagman_", "") for x in names))))
    L.append("")
    L.append("## The tests")
    L.append("")
    L.append("Names without their `job_dagman_` prefix. *Outcome* is andes's: the exit status of")
    L.append("`andes dagman`, the nodes done, and whether a rescue DAG was written.")
    L.append("")
    L.append("| test | constructs | stand-ins | accepted? | ran as expected? | outcome | why not |")
    L.append("| --- | --- | --- | --- | --- | --- | --- |")
    for t in sorted(tests, key=lambda t: t["name"]):
        c = ", ".join(sorted(t.get("constructs", set())))
        if t.get("ran") is None:
            ran = "unknown (%s)" % "; ".join(t["exp_notes"])
            if t["accepted"] is None:
                ran = "-"
        else:
            ran = ("yes" if t["ran"] else "**no**") + " (%s, %s)" % (t["how"], t["expected"])
        acc_s = {True: "yes", False: "**no**", None: "n/a"}[t["accepted"]]
        L.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            cell(t["name"].replace("job_dagman_", "")), cell(c), cell(stand_ins(t)), acc_s, cell(ran),
            cell(outcome(t)), cell(why(t))))
    L.append("")
    with open(opts.out, "w") as f:
        f.write("\n".join(L))


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("htcondor", nargs="?", help="an HTCondor source tree (with src/condor_tests)")
    ap.add_argument("--commit", default="(unknown)", help="its commit, for the page")
    rel = os.path.join(ROOT, "target", "release", "andes")
    dbg = os.path.join(ROOT, "target", "debug", "andes")
    ap.add_argument("--andes", default=rel if os.path.exists(rel) else dbg)
    ap.add_argument("--samples", default=os.path.join(ROOT, "samples", "target", "wasm32-wasip1", "release"))
    ap.add_argument("--work", default="/tmp/dagconf")
    ap.add_argument("--timeout", type=int, default=150)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--only", default=None)
    ap.add_argument("--no-run", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--render", default=None,
                    help="write the page from a --json file of an earlier run, running nothing")
    opts = ap.parse_args()
    if opts.render:
        with open(opts.render) as f:
            saved = json.load(f)
        for k, v in saved["meta"].items():
            setattr(opts, k, v)
        opts.out = opts.out or os.path.join(ROOT, "docs", "src", "dag-conformance.md")
        write_page(saved["tests"], opts)
        return 0
    if not opts.htcondor:
        ap.error("the HTCondor source tree is needed (or --render FILE.json)")
    opts.corpus = os.path.join(os.path.abspath(opts.htcondor), "src", "condor_tests")
    opts.scripts = os.path.join(os.path.abspath(opts.htcondor), "src", "condor_scripts")
    if not os.path.isdir(opts.scripts):
        opts.scripts = None
    opts.andes = os.path.abspath(opts.andes)
    opts.samples = os.path.abspath(opts.samples)
    opts.work = os.path.abspath(opts.work)
    if opts.out is None and opts.only is None:
        opts.out = os.path.join(ROOT, "docs", "src", "dag-conformance.md")
    if not os.path.isdir(opts.corpus):
        sys.exit("no %s" % opts.corpus)
    tests = find_tests(opts.corpus)
    if opts.only:
        tests = [t for t in tests if re.search(opts.only, t["name"])]
    os.makedirs(opts.work, exist_ok=True)
    # A copy of the binary: a build replacing it mid-run would leave a pool and its
    # clients of different versions.
    snap = os.path.join(opts.work, "andes")
    shutil.copy2(opts.andes, snap + ".tmp")
    os.replace(snap + ".tmp", snap)
    opts.andes_built = datetime.datetime.fromtimestamp(
        os.path.getmtime(opts.andes), datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    opts.andes_path = opts.andes
    opts.andes = snap
    opts.flags_submit = andes_flags(snap, "submit-dag")
    opts.flags_dagman = andes_flags(snap, "dagman")
    env = dict(os.environ)
    env["ANDES_CONFIG_DIR"] = os.path.join(opts.work, "config")
    env.pop("ANDES_CONFIG", None)
    # Scripts that call HTCondor's commands (condor_q, condor_rm, ...) get andes's.
    bindir = os.path.join(opts.work, "bin")
    os.makedirs(bindir, exist_ok=True)
    for c in CONDOR_COMMANDS:
        link = os.path.join(bindir, c)
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(opts.andes, link)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    # Scripts that `use CondorTest;` find HTCondor's test modules.
    env["PERL5LIB"] = os.pathsep.join(
        p for p in (opts.scripts, opts.corpus, env.get("PERL5LIB")) if p)
    def stop(signum, frame):
        STOP.set()
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    pool = None
    pooldir = os.path.join(opts.work, "pool")
    try:
        if not opts.no_run:
            shutil.rmtree(pooldir, ignore_errors=True)
            os.makedirs(pooldir)
            log = open(os.path.join(opts.work, "pool.log"), "w")
            pool = subprocess.Popen([opts.andes, "pool", "up", "--dir", pooldir, "--slots",
                                     str(opts.slots), "--no-dashboard"], env=env, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            deadline = time.time() + 60
            while "pool ready" not in (read_text(os.path.join(opts.work, "pool.log")) or ""):
                if time.time() > deadline or pool.poll() is not None:
                    sys.exit("the pool did not start: see %s/pool.log" % opts.work)
                time.sleep(0.3)
            env["ANDES_CONFIG"] = os.path.join(pooldir, "andes.config")
        done = 0
        with concurrent.futures.ThreadPoolExecutor(max_workers=opts.jobs) as ex:
            futs = {ex.submit(do_test, t, opts, env): t for t in tests}
            for f in concurrent.futures.as_completed(futs):
                t = futs[f]
                try:
                    f.result()
                except Exception as e:  # noqa: BLE001 - a test's breakage is its row
                    t.setdefault("accepted", False)
                    t["why1"] = "conformance.py: %r" % e
                    t["ran"] = None
                t["timeout"] = opts.timeout
                done += 1
                with LOCK:
                    print("%3d/%d %-50s accepted=%s ran=%s %s" % (
                        done, len(tests), t["name"], t["accepted"], t.get("ran"),
                        why(t)[:100]), flush=True)
    finally:
        if pool is not None:
            subprocess.run([opts.andes, "pool", "down"], env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=60)
            try:
                pool.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(pool.pid, signal.SIGTERM)
                pool.wait(timeout=30)
    if STOP.is_set():
        print("stopped: no page written", file=sys.stderr)
        return 1
    if opts.json:
        meta = {k: getattr(opts, k) for k in META}
        with open(opts.json, "w") as f:
            json.dump({"meta": meta, "tests": [
                {k: (sorted(v) if isinstance(v, set) else v) for k, v in t.items()
                 if k != "run_text"} for t in tests]}, f, indent=1, default=str)
    if opts.out:
        write_page(tests, opts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
