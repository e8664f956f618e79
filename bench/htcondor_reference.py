#!/usr/bin/env python3
"""HTCondor's own ClassAd library on the workloads of classad/benches/classad.rs.

Side-by-side reference for BENCHMARKS.md; not used by the build or CI.

The data is the Rust bench's, written to a directory when ANDES_BENCH_DUMP is set:

    ANDES_BENCH_DUMP=/tmp/andes-bench-data cargo bench -p classad --bench classad -- --test
    python3 -m venv /tmp/htc-venv && /tmp/htc-venv/bin/pip install htcondor==25.14.1
    /tmp/htc-venv/bin/python bench/htcondor_reference.py /tmp/andes-bench-data

Files read: job.ad (the MY job ad, old syntax), machines.ads (10,000 machine ads, old
syntax, blank-line separated), match_expr.txt, jobs_old.ads and jobs_new.ads (the parse
corpus in old and new syntax).

The library is called as /work/shared/oracle/README.md describes: `import htcondor2`
first (it runs ClassAd::Reconfig(), so HTCondor's default, non-strict semantics hold),
then `classad2`; ExprTree.eval(scope=job, target=machine) builds a MatchClassAd with
the job on the left (MY) and the machine on the right (TARGET), as the negotiator does.

Every figure is the best of REPEATS runs (and the median is printed too). Python's own
cost is measured with the same loops around calls that do almost nothing in C++
(evaluating the literal `1` with the same scope and target; parsing a one-line ad), so
the C++ share is roughly "figure - overhead".
"""

import os
import statistics
import sys
import time

os.environ["TZ"] = "UTC"
time.tzset()

import htcondor2  # noqa: E402,F401  (initialises config: default semantics)
import classad2  # noqa: E402
from classad2.classad2_impl import _classad_parse_next  # noqa: E402

REPEATS = 7


def bench(label, fn, repeats=REPEATS):
    """Runs fn() `repeats` times; returns (best, median) seconds and fn's last result."""
    times = []
    result = None
    for _ in range(repeats):
        result = None  # free the previous run's objects outside the timed region
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    best, med = min(times), statistics.median(times)
    print(f"  {label:<46} best {best * 1e3:9.2f} ms   median {med * 1e3:9.2f} ms", flush=True)
    return best, med, result


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]

    def read(name):
        with open(os.path.join(d, name), encoding="utf-8") as f:
            return f.read()

    print(f"classad2 {classad2.version()}, Python {sys.version.split()[0]}")
    job = classad2.parseOne(read("job.ad"), classad2.ParserType.Old)
    machines = list(classad2.parseAds(read("machines.ads"), classad2.ParserType.Old))
    expr = classad2.ExprTree(read("match_expr.txt").strip())
    lit = classad2.ExprTree("1")
    n = len(machines)
    print(f"job ad: {len(job)} attributes; {n} machine ads, "
          f"{sum(len(m) for m in machines) / n:.1f} attributes each on average")
    print(f"expression: {expr}")

    # ---------------------------------------------------------------- 1. scan
    print(f"\n1. matchmaking scan ({n} evaluations per run)")

    def scan():
        c = 0
        for m in machines:
            if expr.eval(scope=job, target=m) is True:
                c += 1
        return c

    def scan_lit():
        c = 0
        for m in machines:
            if lit.eval(scope=job, target=m) is True:
                c += 1
        return c

    def scan_empty():
        c = 0
        for m in machines:
            if m is True:
                c += 1
        return c

    def scan_lit_scope_only():
        for m in machines:
            lit.eval(scope=job)

    # The expression repeated K times in one tree, `(E) + (E) + ...` (a bool
    # is 0 or 1 under `+`): one call, one MatchClassAd, K evaluations, so the
    # per-call cost is spread over K and the slope is the C++ cost of E. The
    # machine ad is cache-hot after the first of the K.
    expr_text = read("match_expr.txt").strip()
    amplified = {k: classad2.ExprTree(" + ".join([f"({expr_text})"] * k)) for k in (10, 100)}

    def scan_amplified(k):
        e = amplified[k]

        def run():
            c = 0
            for m in machines:
                c += e.eval(scope=job, target=m)
            return c

        return run

    def symmetric():
        c = 0
        for m in machines:
            if job.symmetricMatch(m):
                c += 1
        return c

    best, _, matched = bench("expr.eval(scope=job, target=machine)", scan)
    lit_best, _, _ = bench("overhead: ExprTree('1').eval(job, machine)", scan_lit)
    empty_best, _, _ = bench("overhead: empty Python loop", scan_empty)
    scope_best, _, _ = bench("overhead: ExprTree('1').eval(job) (no target)", scan_lit_scope_only)
    a10, _, c10 = bench("(E) + ... 10 times, eval(job, machine)", scan_amplified(10), repeats=3)
    a100, _, c100 = bench("(E) + ... 100 times, eval(job, machine)", scan_amplified(100), repeats=3)
    assert c10 == 10 * matched and c100 == 100 * matched, (c10, c100, matched)
    sym_best, _, sym = bench("job.symmetricMatch(machine)", symmetric, repeats=3)
    print(f"  matched {matched} of {n}; symmetric match {sym} of {n}")
    print(f"  per evaluation: {best / n * 1e9:.0f} ns, of which: Python loop "
          f"{empty_best / n * 1e9:.0f} ns, binding call {scope_best / n * 1e9:.0f} ns, "
          f"MatchClassAd set-up and tear-down {(lit_best - scope_best) / n * 1e9:.0f} ns "
          f"(literal with target minus literal without), the expression itself "
          f"{(a100 - a10) / (90 * n) * 1e9:.0f} ns (slope between 10 and 100 copies, cache-hot)")
    print(f"  symmetric match per machine: {sym_best / n * 1e9:.0f} ns")

    # ---------------------------------------------------------------- 2. parse
    old_text = read("jobs_old.ads")
    new_text = read("jobs_new.ads")
    old_each = [t + "\n" for t in old_text.split("\n\n")]
    old_bytes = len(old_text.encode())
    new_bytes = len(new_text.encode())
    print(f"\n2. parse ({len(old_each)} job ads; old syntax {old_bytes} bytes, "
          f"new syntax {new_bytes} bytes)")

    def parse_old_all():
        return list(classad2.parseAds(old_text, classad2.ParserType.Old))

    def parse_old_each():
        return [_classad_parse_next(t, 0, 0)[0] for t in old_each]

    def parse_new_all():
        return list(classad2.parseAds(new_text, classad2.ParserType.New))

    tiny = ["A = 1\n"] * len(old_each)

    def parse_tiny_each():
        return [_classad_parse_next(t, 0, 0)[0] for t in tiny]

    b_all, _, ads = bench("parseAds(old_text, ParserType.Old)", parse_old_all)
    assert len(ads) == len(old_each), len(ads)
    assert len(ads[0]) == len(classad2.parseOne(old_each[0], classad2.ParserType.Old))
    del ads
    b_each, _, _ = bench("_classad_parse_next(ad_text, Old) per ad", parse_old_each)
    b_new, _, ads = bench("parseAds(new_text, ParserType.New)", parse_new_all)
    assert len(ads) == len(old_each), len(ads)
    del ads
    b_tiny, _, _ = bench("overhead: parse 'A = 1' per ad", parse_tiny_each)

    mb = 1e6
    print(f"  old syntax, parseAds:       {old_bytes / b_all / mb:6.1f} MB/s")
    print(f"  old syntax, one call per ad: {old_bytes / b_each / mb:6.1f} MB/s; "
          f"minus the per-call overhead ({b_tiny / len(old_each) * 1e6:.1f} us/ad): "
          f"{old_bytes / (b_each - b_tiny) / mb:6.1f} MB/s")
    print(f"  new syntax, parseAds:       {new_bytes / b_new / mb:6.1f} MB/s")


if __name__ == "__main__":
    main()
