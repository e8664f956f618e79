#!/usr/bin/env python3
"""Writes the seed corpora fuzz/corpus/{parse,eval,config,submit} from the test data.

Run from anywhere: python3 fuzz/seed_corpus.py
parse:  each `expr`, `my`, `target` of classad_public.jsonl and each `job`,
        `machine` of matchmaking.jsonl, one file each.
eval:   flag byte (bit 0 = strict) + expr + NUL + my + NUL + target, for
        both flag values; matchmaking rows as `MY.Requirements` with the job
        as MY and the machine as TARGET.
submit: each submit description of submit/tests/data/submit_public.jsonl.
config: each file of classad/tests/data/config, plus CONFIG_SEEDS below
        (include paths are relative: the target resolves them against
        fuzz/include_root/ and skips inputs with both `include` and `/`).
"""
import hashlib
import json
import pathlib

FUZZ = pathlib.Path(__file__).resolve().parent
DATA = FUZZ.parent / "classad" / "tests" / "data"

CONFIG_SEEDS = [
    "include : defs.config\nD = $(C) $(B)\n",
    "include ifexist : missing.config\ninclude : self.config\n",
    "include : ping.config\n",
    "include command : echo A = 1\n",
    "include : echo A = 1 |\n",
    "A = 1\ninclude : bad.config\n",
    "if defined A\nX = 1\nelif version >= 8.9.1\nX = 2\nelse\nX = 3\nendif\n",
    "if !$(FLAG:false)\nif true\nY = 1\nendif\nendif\n",
    "M @=end\n  line one $(A)\n  line two\n  @end\n",
    "A = x \\\n  y \\\n# comment\n  z\n",
    "A = 1\nA += 2\nA ,= 3\nA &&= 4\nA ||= 5\nB = $(A) $(A:d) $$(JOBTIME) $(DOLLAR)\n",
    "A = $(B)\nB = $(A)\nC = $(C) more\n",
    "N = 7\nI = $INT(N,%05d) $REAL(N,%.3f) $INT(N,%x)\nS = $SUBSTR(abcdef, 1, 3)\n",
    "L = a,b,c\nC = $CHOICE(1, L) $BASENAME(dir/file.txt) $DIRNAME(dir/file.txt)\n",
    "E = $ENV(HOME:none) $RANDOM_CHOICE(a,b) $EVAL(1+1) $F(x)\n",
    "STARTD.A = sub\nA = plain\nB = $(A)\n",
    "warning : careful $(A)\nerror : stop\n",
    "[section]\nA = 1\n",
]


def put(kind, data):
    d = FUZZ / "corpus" / kind
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()).write_bytes(data)


def main():
    for line in open(DATA / "classad_public.jsonl", encoding="utf-8"):
        row = json.loads(line)
        parts = [row.get(k) or "" for k in ("expr", "my", "target")]
        for p in parts:
            if p:
                put("parse", p.encode())
        body = "\0".join(parts).encode()
        for flag in (0, 1):
            put("eval", bytes([flag]) + body)
    for line in open(DATA / "matchmaking.jsonl", encoding="utf-8"):
        row = json.loads(line)
        for k in ("job", "machine"):
            put("parse", row[k].encode())
        body = "\0".join(["MY.Requirements && TARGET.Requirements", row["job"], row["machine"]])
        for flag in (0, 1):
            put("eval", bytes([flag]) + body.encode())
    for f in sorted((DATA / "config").iterdir()):
        put("config", f.read_bytes())
    for text in CONFIG_SEEDS:
        put("config", text.encode())
    submit_data = FUZZ.parent / "submit" / "tests" / "data" / "submit_public.jsonl"
    for line in open(submit_data, encoding="utf-8"):
        put("submit", json.loads(line)["submit"].encode())
    for kind in ("parse", "eval", "config", "submit"):
        print(kind, len(list((FUZZ / "corpus" / kind).iterdir())), "files")


if __name__ == "__main__":
    main()
