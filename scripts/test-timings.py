#!/usr/bin/env python3
"""The timing table that ends scripts/test.sh: each phase of the run, each test binary, each
module of the integration suite, and the ten slowest tests, from the phases the script
recorded and nextest's JUnit report. Ends with the plain `N passed, N failed` line."""

import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path


def table(title, head, rows):
    print(f"\n{title}")
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    line = lambda r: "  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
    print(line(head))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line(r))


def minutes(seconds):
    return f"{seconds:7.1f} s  ({seconds / 60:4.1f} min)"


def main():
    timings, junit = Path(sys.argv[1]), Path(sys.argv[2])
    phases = []
    if (timings / "phases.tsv").is_file():
        for row in (timings / "phases.tsv").read_text().splitlines():
            name, ms, status, start = row.split("\t")
            phases.append((name, int(ms) / 1000, "ok" if status == "0" else f"FAILED ({status})", int(start) / 1000))
    if phases:
        # Wall clock: phases that ran beside others (the web app's build) are not added twice.
        total = max(start + secs for _, secs, _, start in phases) - min(start for *_, start in phases)
        phases.sort(key=lambda p: p[3])
        table("test.sh: time by phase", ("phase", "time", "status"), [(n, minutes(s), st) for n, s, st, _ in phases] + [("total (wall clock)", minutes(total), "")])
    if not junit.is_file():
        print("\ntest.sh: no test report (the tests did not run)")
        return
    cases = []
    for suite in ET.parse(junit).getroot().iter("testsuite"):
        for case in suite.iter("testcase"):
            failed = case.find("failure") is not None or case.find("error") is not None
            skipped = case.find("skipped") is not None
            cases.append((suite.get("name"), case.get("name"), float(case.get("time") or 0), failed, skipped))
    binaries, modules = defaultdict(lambda: [0, 0.0]), defaultdict(lambda: [0, 0.0])
    for binary, name, secs, _, _ in cases:
        binaries[binary][0] += 1
        binaries[binary][1] += secs
        if binary.endswith("::suite") and "::" in name:
            modules[name.split("::")[0]][0] += 1
            modules[name.split("::")[0]][1] += secs
    note = "(test time added up: tests run side by side, so this exceeds the wall clock)"
    table(f"test.sh: time by test binary {note}", ("binary", "tests", "time"), [(b, n, minutes(s)) for b, (n, s) in sorted(binaries.items(), key=lambda kv: -kv[1][1])])
    if modules:
        table("test.sh: time by module of the integration suite (overeager::suite)", ("module", "tests", "time"), [(m, n, minutes(s)) for m, (n, s) in sorted(modules.items(), key=lambda kv: -kv[1][1])])
    slowest = sorted(cases, key=lambda c: -c[2])[:10]
    table("test.sh: the ten slowest tests", ("test", "binary", "time"), [(name, binary, minutes(secs)) for binary, name, secs, _, _ in slowest])
    passed = sum(1 for c in cases if not c[3] and not c[4])
    failed = sum(1 for c in cases if c[3])
    skipped = sum(1 for c in cases if c[4])
    print()
    print(f"tests: {passed} passed, {failed} failed, {skipped} skipped")


if __name__ == "__main__":
    main()
