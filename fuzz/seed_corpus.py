#!/usr/bin/env python3
"""Writes the seed corpora fuzz/corpus/{parse,eval,config,submit,cron,wire,
classad_json,guest_abi,trust} from the test data and the samples below.

Run from anywhere: python3 fuzz/seed_corpus.py
parse:  each `expr`, `my`, `target` of classad_public.jsonl and each `job`,
        `machine` of matchmaking.jsonl, one file each.
eval:   flag byte (bit 0 = strict) + expr + NUL + my + NUL + target, for
        both flag values; matchmaking rows as `MY.Requirements` with the job
        as MY and the machine as TARGET.
submit: each submit description of submit/tests/data/submit_public.jsonl.
config: each file of config/tests/data, plus CONFIG_SEEDS below
        (include paths are relative: the target resolves them against
        fuzz/include_root/ and skips inputs with both `include` and `/`).
cron:   each row of cron/tests/data/cron_public.jsonl: zone byte (the row's
        place modulo 16, with bit 5 so the start is the row's `now_epoch`
        as is), the start as i64 LE, the five fields one a line.
wire:   WIRE_SEEDS below: the type's place in the target's TYPES table, then
        a JSON body of that type; ads from matchmaking.jsonl fill the ad fields.
classad_json: JSON_SEEDS below, and each matchmaking ad in ClassAd syntax
        (which the target also sends through JSON).
guest_abi: GUEST_SEEDS below: sequences of import calls against a memory
        image holding names, values and log text at known places.
trust:  trust files and secret key files built from RFC 8032's test keys.
"""
import base64
import hashlib
import json
import pathlib
import struct

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

NEW_TARGETS = ("cron", "wire", "classad_json", "guest_abi", "trust")

CRON_FIELDS = ("minute", "hour", "day_of_month", "month", "day_of_week")


def cron_seeds():
    rows = open(FUZZ.parent / "cron" / "tests" / "data" / "cron_public.jsonl", encoding="utf-8")
    for i, line in enumerate(rows):
        row = json.loads(line)
        text = "\n".join(row["fields"].get(f, "") for f in CRON_FIELDS)
        put("cron", bytes([0x20 | (i % 16)]) + struct.pack("<q", row["now_epoch"]) + text.encode())


def matchmaking_ads():
    ads = []
    for line in open(DATA / "matchmaking.jsonl", encoding="utf-8"):
        row = json.loads(line)
        ads += [row["job"], row["machine"]]
    return ads


def wire_bodies(job, machine):
    """(place in TYPES, body) for each type of fuzz_targets/wire.rs, in order."""
    f = {"name": "out/result.txt", "data": base64.b64encode(b"42\n").decode()}
    snap = {"hash": "ab" * 32, "bytes": base64.b64encode(b"ANDESNAP" + bytes(40)).decode(),
            "blobs": [{"name": "cd" * 32, "data": "AAEC"}], "stopping": True}
    claim = "slot1@exec-1#1700000000#1#abcdef"
    targets = {"ids": [{"Job": {"cluster": 12, "proc": 3}}, {"Cluster": 13}],
               "owners": ["alice"], "constraint": "JobStatus == 1 && Owner == \"alice\""}
    report = {"version": 3, "state": "Exited", "job": "schedd#12.3#1700000000",
              "update": "[ RemoteUserCpu = 1.5; ImageSize = 1024 ]",
              "ending": "[ ExitCode = 0; ExitBySignal = false ]", "outputs": [f],
              "evicted": False, "claim_alive": True, "saved_state": {"seq": 2, "data": "AQID"},
              "snapshot": snap, "ended": [{"job": "schedd#12.2#1700000000", "version": 2,
                                           "update": "[ ImageSize = 1 ]", "ending": "[ ExitCode = 1 ]",
                                           "outputs": [], "evicted": False}], "queued": 1}
    return [
        f,
        {"slot": "slot1@exec-1", "claim_id": claim},
        {"claim_id": claim, "owner": "alice", "user": "alice@pool", "client_machine": "schedd@s",
         "ad": job},
        {"accepted": True, "reason": None, "slot_ad": machine},
        {"claim_id": claim, "job": job, "module_digest": "ef" * 32, "inputs": [f],
         "lease_secs": 1200, "wait_ms": 50, "saved_state": {"seq": 1, "data": "AAAA"},
         "snapshot": snap, "more": [{"job": job, "module_digest": "ef" * 32, "inputs": []}]},
        {"claim_id": claim, "since": 2, "saved_seq": 1, "snapshot": "ab" * 32},
        report,
        {"claim_id": claim, "attrs": "[ Progress = 0.5; ChirpX = \"y\" ]"},
        {"claim_id": claim, "cluster": 12, "proc": 4},
        {"withdrawn": True},
        {"claim_id": claim},
        {"significant": ["RequestMemory", "Owner", "Requirements"]},
        {"schedd": "schedd@s", "groups": [{"autocluster": 1, "submitter": "alice@pool", "ad": job,
                                          "idle": 10}], "running": [["alice@pool", 2]]},
        {"matches": [{"autocluster": 1, "slot_ad": machine, "claim_id": claim,
                      "host_address": "127.0.0.1:9618", "preempting": False}],
         "rejections": [{"autocluster": 2, "reason": "no match found"}]},
        {"taken": 1},
        {"kind": "Machine", "ad": machine, "private": "[ ClaimId = \"%s\" ]" % claim},
        {"kind": "Scheduler", "name": "schedd@s"},
        {"kind": "Machine", "constraint": "Memory > 1024", "projection": ["Name", "Memory"]},
        {"ads": [machine, job]},
        {"error": "no such job 12.7"},
        {"cluster": 12, "cluster_ad": job, "procs": ["[ ProcId = 0 ]", "[ ProcId = 1; Args = \"x\" ]"]},
        {"cluster": 12},
        {"cluster": 12, "count": 2},
        {"targets": targets, "projection": ["Owner", "JobStatus"], "limit": 10},
        {"ads": [job]},
        {"owners": ["alice", "bob"]},
        {"schedd": "schedd@s", "rows": [{"owner": "alice", "batch": "ID: 12", "submitted": 1700000000,
                                        "done": 1, "run": 2, "idle": 3, "held": 0, "suspended": 0,
                                        "deferred": 1, "next_run": 1700000600,
                                        "ids": [[12, 0, 5]]}],
         "totals": {"jobs": 6, "completed": 1, "removed": 0, "idle": 3, "running": 2, "held": 0,
                    "suspended": 0}},
        {"targets": targets, "change": {"Edit": {"attr": "RequestMemory", "expr": "2048 * 2"}}},
        {"changed": [{"cluster": 12, "proc": 0}], "skipped": [[{"cluster": 12, "proc": 1}, "not held"]]},
        {"constraint": "ExitCode != 0", "owners": ["alice"], "limit": 5, "projection": []},
        {"lifetime": 900},
        {"removed": True},
        {"rows": [{"name": "alice@pool", "effective_priority": 0.5, "real_priority": 0.5,
                   "priority_factor": 1.0, "in_use": 2, "usage_hours": 3.25,
                   "last_usage": 1700000000}]},
        {"submitter": "alice@pool", "factor": 1000.0},
        {"routes": [["Site A", "batch slurm site-a"]], "jobs": [job]},
        {"from": 1700000000, "to": 1700086400},
        [{"route": "Site A", "grid_resource": "batch slurm", "routed": 1700000000,
          "ended": 1700000100, "wall_seconds": 98.5, "completed": True}],
        {"ads": [machine]},
        {"slot": 2, "fast": True},
        {"mode": "graceful"},
        {"slot": None, "name": "KeyboardIdle", "value": "600"},
        {"message": "vacating slot 1"},
        {"incarnation": "7f3a9c", "claims": ["<127.0.0.1:9619>#1#9f2c"]},
        {"unknown": ["<127.0.0.1:9619>#1#9f2c"], "released": 1},
        {"lifetime": 900, "incarnation": "c0ffee"},
        {"job": {"cluster": 12, "proc": 0}},
        {"ad": job, "files": [f], "log": "000 (012.000.000) ...\n"},
        {"jobs": [{"cluster": 12, "proc": 0}, {"cluster": 12, "proc": 1}]},
    ]


def wire_seeds():
    ads = matchmaking_ads()
    for k in range(0, len(ads) - 1, 2):
        for i, body in enumerate(wire_bodies(ads[k], ads[k + 1])):
            put("wire", bytes([i]) + json.dumps(body).encode())
            if k == 0:
                put("wire", bytes([i]) + json.dumps(body, indent=1).encode())


JSON_SEEDS = [
    '{}',
    '{"a": 1, "b": 2.5, "c": "x", "d": true, "e": null, "f": [1, "two", [3]], "g": {"h": 1}}',
    '{"Requirements": "\\/Expr(TARGET.Memory > 1024 && Arch == \\"X86_64\\")\\/", '
    '"Rank": "\\/Expr(Mips * 2)\\/"}',
    '{"x": "/Expr(undefined)/", "y": "/Expr(error)/", "z": "/Expr(-0.0)/", '
    '"w": "/Expr(real(\\"INF\\"))/"}',
    '{"big": 18446744073709551615, "neg": -9223372036854775808, "r": 1e300, "s": -1.5e-300}',
    '{"s": "\\u00e9\\t\\"q\\"", "A": 1, "a": 2}',
    '{"nested": {"deeper": {"list": [{"k": "/Expr(MY.k + 1)/"}]}}}',
    '[1, 2]',
    '"/Expr([a = 1; b = {1, 2}])/"',
]


def json_seeds():
    for text in JSON_SEEDS:
        put("classad_json", text.encode())
    for ad in matchmaking_ads():
        put("classad_json", ad.encode())


def guest_op(op, *args):
    args = list(args) + [0] * (5 - len(args))
    return bytes([op]) + struct.pack("<5i", *args)


def guest_image():
    """A page's start: names, values and log text at known places."""
    img = bytearray(1024)
    for at, text in [(0, b"Progress"), (16, b"0.42"), (32, b"ChirpNoteAA"), (48, b"Owner"),
                     (64, b"hello from the guest"), (96, b"\"x\" + 1"), (112, b"ClusterId"),
                     (128, b"Requirements"), (144, b"\xff\xfe"), (160, b"state bytes")]:
        img[at:at + len(text)] = text
    return bytes(img)


GUEST_SEEDS = [
    # get Progress, Owner, a missing name; answers at 512, strings at 600.
    [(8, 600), (2, 0, 8, 512), (2, 48, 5, 512), (2, 32, 9, 512), (2, 128, 12, 512)],
    # set Progress and a Chirp name, then a refused one, then get it back.
    [(8, 700), (3, 0, 8, 16, 4, 512), (3, 32, 11, 96, 7, 512), (3, 112, 9, 16, 4, 512),
     (2, 32, 11, 520)],
    # log lines at each level, a bad level, a long one, a non-UTF-8 one.
    [(4, 0, 64, 20), (4, 3, 64, 20), (4, 4, 64, 20), (4, 1, 0, 5000), (4, 2, 144, 2)],
    # save, load, checkpoint requests.
    [(11,), (5,), (6, 160, 11, 512), (5,), (8, 800), (7, 540)],
    # vacate: flag, deadline, time passes.
    [(0,), (1, 512), (10, 30), (0,), (1, 512), (15, 100), (1, 512)],
    # many log lines, many attributes.
    [(12, 1, 64, 20, 10050), (13, 32, 11, 16, 4, 300)],
    # cabi_realloc answers out of bounds, traps, re-enters.
    [(8, 70000), (2, 0, 8, 512), (8, 0, 0x100), (2, 0, 8, 512),
     (8, 600, 1, 64, 20), (2, 0, 8, 512), (8, 600, 2 | (50 << 2), 0, 8, 520), (2, 0, 8, 512),
     (8, 600, 3, 160, 11, 530), (3, 112, 9, 16, 4, 512)],
    # memory grows; raw pointers at the end of the address space.
    [(9, 2), (2, 0, 8, 131000), (0x12, -8, 8, 512), (0x14, 1, -1, 4096), (0x16, 0, 0x7fffffff, 512)],
]


def guest_seeds():
    img = guest_image()
    for seq in GUEST_SEEDS:
        ops = b"".join(guest_op(*o) for o in seq)
        for flags in (0, 1, 2):
            put("guest_abi", bytes([flags, len(seq)]) + ops + img)


# RFC 8032, section 7.1, tests 1 to 3: (secret seed, public key), hex.
RFC8032 = [
    ("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
     "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"),
    ("4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
     "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c"),
    ("c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
     "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025"),
]


def trust_seeds():
    b64 = [(base64.b64encode(bytes.fromhex(s)).decode(), base64.b64encode(bytes.fromhex(p)).decode())
           for s, p in RFC8032]
    (s1, p1), (s2, p2), (s3, p3) = b64
    for text in [
        f"# the pool\nuser alice ed25519 {p1} alice  # laptop\n\n"
        f"schedd schedd@submit-1 ed25519 {p2}\nHOST exec-17 ed25519 {p3} exec-17\n",
        f"admin root ed25519 {p1}\nnegotiator cm ed25519 {p2}\n\tuser  bob\ted25519 {p3}\r\n",
        f"user alice ed25519 {p1}\nuser bob ed25519 {p1}\n",
        f"user a/b ed25519 {p1}\n",
        f"user alice rsa {p1}\n",
        f"user alice ed25519 {p1[:-2]}\n",
        f"ed25519-secret {s1} alice\n",
        f"\n  ed25519-secret {s2} schedd@submit-1\n",
        f"ed25519 {p3} exec-17\n",
        f"ed25519-secret {s3}\n",
        f"{p2}\n{s3}\nalice\n.hidden\n",
    ]:
        put("trust", text.encode())


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
    for f in sorted((FUZZ.parent / "config" / "tests" / "data").iterdir()):
        put("config", f.read_bytes())
    for text in CONFIG_SEEDS:
        put("config", text.encode())
    submit_data = FUZZ.parent / "submit" / "tests" / "data" / "submit_public.jsonl"
    for line in open(submit_data, encoding="utf-8"):
        put("submit", json.loads(line)["submit"].encode())
    cron_seeds()
    wire_seeds()
    json_seeds()
    guest_seeds()
    trust_seeds()
    for kind in ("parse", "eval", "config", "submit", *NEW_TARGETS):
        print(kind, len(list((FUZZ / "corpus" / kind).iterdir())), "files")


if __name__ == "__main__":
    main()
