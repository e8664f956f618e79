#!/usr/bin/env python3
"""Reads what table.sh needs from CRIU image directories (no crit needed).

  criu_images.py stats DIR      the dump or restore statistics CRIU left in DIR
                                (stats-dump / stats-restore), as key=value words;
                                times in microseconds, as CRIU records them
  criu_images.py pages DIR      bytes of the pages-*.img files in DIR (apparent size)
  criu_images.py changed A B    bytes of the 4 KiB pages that differ between two
                                full dumps A and B of the same process, i.e. what
                                a soft-dirty incremental dump of B on top of A
                                would at least have to write; "NA" when the two
                                dumps' page layouts differ (pagemap images or
                                page file sizes not equal)

Image format (criu/include/magic.h, images/stats.proto): stats files begin with
IMG_SERVICE_MAGIC and STATS_MAGIC (4 bytes each), then a 4-byte length and one
protobuf stats_entry {1: dump_stats_entry, 2: restore_stats_entry}.
"""
import glob
import os
import struct
import sys

DUMP_FIELDS = {
    1: "freezing_time", 2: "frozen_time", 3: "memdump_time", 4: "memwrite_time",
    5: "pages_scanned", 6: "pages_skipped_parent", 7: "pages_written",
    8: "irmap_resolve", 9: "pages_lazy", 10: "page_pipes", 11: "page_pipe_bufs",
    12: "shpages_scanned", 13: "shpages_skipped_parent", 14: "shpages_written",
}
RESTORE_FIELDS = {
    1: "pages_compared", 2: "pages_skipped_cow", 3: "forking_time",
    4: "restore_time", 5: "pages_restored",
}


def varint(buf, i):
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def fields(buf):
    """Yields (field number, value) of a protobuf message (varints and
    length-delimited fields only, which is all stats.proto uses)."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            value, i = varint(buf, i)
        elif wire == 2:
            n, i = varint(buf, i)
            value, i = buf[i:i + n], i + n
        else:
            raise ValueError(f"wire type {wire} not expected in stats")
        yield num, value


def stats(d):
    out = []
    for name, kind in (("stats-dump", 1), ("stats-restore", 2)):
        path = os.path.join(d, name)
        if not os.path.exists(path):
            continue
        data = open(path, "rb").read()
        (size,) = struct.unpack_from("<I", data, 8)
        names = DUMP_FIELDS if kind == 1 else RESTORE_FIELDS
        for num, sub in fields(data[12:12 + size]):
            if num != kind:
                continue
            for n, v in fields(sub):
                out.append(f"{names.get(n, f'field{n}')}={v}")
    print(" ".join(out) if out else "none")


def page_files(d):
    return sorted(glob.glob(os.path.join(d, "pages-*.img")))


def pages(d):
    print(sum(os.path.getsize(p) for p in page_files(d)))


def changed(a, b):
    def layout(d):
        maps = {}
        for p in sorted(glob.glob(os.path.join(d, "pagemap-*.img"))):
            maps[os.path.basename(p)] = open(p, "rb").read()
        return maps

    if layout(a) != layout(b):
        print("NA")
        return
    total = 0
    chunk, page = 1 << 16, 4096
    for pb in page_files(b):
        pa = os.path.join(a, os.path.basename(pb))
        if not os.path.exists(pa) or os.path.getsize(pa) != os.path.getsize(pb):
            print("NA")
            return
        with open(pa, "rb") as fa, open(pb, "rb") as fb:
            while True:
                ca, cb = fa.read(chunk), fb.read(chunk)
                if not cb:
                    break
                if ca == cb:
                    continue
                for off in range(0, len(cb), page):
                    if ca[off:off + page] != cb[off:off + page]:
                        total += len(cb[off:off + page])
    print(total)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    {"stats": stats, "pages": pages, "changed": changed}[cmd](*args)


if __name__ == "__main__":
    main()
