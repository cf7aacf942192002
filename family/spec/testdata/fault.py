#!/usr/bin/env python3
"""A tiny external simulator for prism's fault tests (standard library only).

x_j = a + noise-free grid value, on a 4-point grid; argv[1] selects a fault:
ok, crash, hang, short, count, nan-some, nan-all, flaky (crashes on the
first batch of each process whose marker file does not exist yet).
"""
import math
import os
import struct
import sys
import time

mode = sys.argv[1]
inp, out = sys.stdin.buffer, sys.stdout.buffer
assert inp.read(4) == b"PRSM"
(size,) = struct.unpack("<I", inp.read(4))
hello = inp.read(size)
C, P, N = 2, 1, 4  # components (Level, Gaussian), columns (Level.a), grid points
while True:
    tag = inp.read(4)
    if not tag:
        break
    (n,) = struct.unpack("<I", inp.read(4))
    masks = inp.read(n * C)
    params = struct.unpack("<%dd" % (n * P), inp.read(n * P * 8))
    seeds = inp.read(n * 8)
    if mode == "crash":
        sys.stderr.write("boom: simulated crash\n")
        sys.exit(3)
    if mode == "hang":
        time.sleep(3600)
    if mode == "flaky" and not os.path.exists(sys.argv[2]):
        open(sys.argv[2], "w").close()
        sys.exit(4)
    vals = []
    for i in range(n):
        a = params[i] if masks[i * C] else 0.0
        for j in range(N):
            v = a + j
            if mode == "nan-all" or (mode == "nan-some" and a > 0.5):
                v = math.nan
            vals.append(v)
    per = N - 1 if mode == "count" else N
    if mode == "count":
        vals = [v for k, v in enumerate(vals) if k % N != N - 1]
    body = struct.pack("<%dd" % len(vals), *vals)
    if mode == "short":
        body = body[: len(body) // 2]
    out.write(b"OBSV" + struct.pack("<II", n, per) + body)
    out.flush()
    if mode == "short":
        sys.exit(0)
