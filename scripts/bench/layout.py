"""How much of the hot-code list (src/hot-code.order) a binary holds, and how close together:
with the layout build.rs asks for, the listed functions sit within a few hundred KiB;
linked without it (or with a stale list), they spread over the whole binary.

Usage: layout.py BINARY ORDER_FILE"""
import subprocess
import sys

binary, order = sys.argv[1], sys.argv[2]
want = {l.strip() for l in open(order) if l.strip() and not l.startswith("#")}
found = {}
nm = subprocess.run(["nm", "-S", "--defined-only", binary], capture_output=True, text=True)
for line in nm.stdout.splitlines():
    p = line.split()
    if len(p) == 4 and p[3] in want and p[3] not in found:
        found[p[3]] = (int(p[0], 16), int(p[1], 16))
if not found:
    print(f"0 of {len(want)} listed functions found")
else:
    lo = min(a for a, _ in found.values())
    hi = max(a + s for a, s in found.values())
    size = sum(s for _, s in found.values())
    print(f"{len(found)} of {len(want)} listed functions found: {size // 1024} KiB of code "
          f"within {(hi - lo) // 1024} KiB of the binary")
