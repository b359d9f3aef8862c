#!/usr/bin/env python3
"""Removes stale executables from the shared cargo target folder.

A test binary is linked under a new hashed name (`deps/<name>-<hash>`) whenever what it
depends on changes, and the old one stays: after some weeks of runs the cache held
47 GB of them. This keeps, for every executable name this build uses, only the file the
build uses now, and leaves everything it does not recognise alone.

    prune_target.py PROFILE_DIR BINARIES_JSON

PROFILE_DIR is the profile's folder (e.g. `$CARGO_TARGET_DIR/debug`); BINARIES_JSON is
the output of `cargo nextest list --list-type binaries-only --message-format json`.
The executables linked into PROFILE_DIR itself (`continuity`, the Lambda binaries) are
current too. Prints what it freed.
"""

import json
import os
import stat
import sys


def stem(file_name):
    """`store_embedded-0123abcd` -> `store_embedded`; None for a name with no hash."""
    name, sep, digest = file_name.rpartition("-")
    if not sep or not name or len(digest) != 16 or any(c not in "0123456789abcdef" for c in digest):
        return None
    return name


def executable(path):
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode) or not st.st_mode & 0o111:
        return None
    return st


def main(profile_dir, binaries_json):
    with open(binaries_json, encoding="utf-8") as f:
        listed = json.load(f)
    current = set()  # (device, inode) of every executable in use
    for binary in listed.get("rust-binaries", {}).values():
        st = executable(binary["binary-path"])
        if st:
            current.add((st.st_dev, st.st_ino))
    for entry in os.scandir(profile_dir):
        st = executable(entry.path)
        if st:
            current.add((st.st_dev, st.st_ino))
    deps = os.path.join(profile_dir, "deps")
    in_use, candidates = set(), []
    for entry in os.scandir(deps):
        if "." in entry.name:
            continue
        name, st = stem(entry.name), executable(entry.path)
        if name is None or st is None:
            continue
        if (st.st_dev, st.st_ino) in current:
            in_use.add(name)
        else:
            candidates.append((name, entry.path, st.st_size))
    freed = removed = 0
    for name, path, size in candidates:
        # Only an older copy of something in use: an executable this build does not
        # know by name may belong to another command's build, so it stays.
        if name not in in_use:
            continue
        os.remove(path)
        try:
            os.remove(path + ".d")
        except FileNotFoundError:
            pass
        freed += size
        removed += 1
    print(f"    removed {removed} stale executables, {freed / 2**30:.1f} GiB freed; {len(in_use)} in use")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
