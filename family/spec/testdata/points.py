#!/usr/bin/env python3
"""External simulator for per-observation designs (standard library only).

The family (points.yaml) has a Level component with parameter a; every
observation is measured at sampling times t of its own, which each batch
carries after the seeds. x_j = a + t_j (a = 0 when Level is off).
"""
import json
import struct
import sys

inp, out = sys.stdin.buffer, sys.stdout.buffer
assert inp.read(4) == b"PRSM"
(size,) = struct.unpack("<I", inp.read(4))
hello = json.loads(inp.read(size))
assert hello["grid"] is None and hello["covariate"] == "t", hello
C, P = len(hello["components"]), len(hello["columns"])
while True:
    tag = inp.read(4)
    if not tag:
        break
    (n,) = struct.unpack("<I", inp.read(4))
    masks = inp.read(n * C)
    params = struct.unpack("<%dd" % (n * P), inp.read(n * P * 8))
    inp.read(n * 8)  # seeds: this simulator has no noise of its own
    (N,) = struct.unpack("<I", inp.read(4))
    times = struct.unpack("<%dd" % (n * N), inp.read(n * N * 8))
    vals = []
    for i in range(n):
        a = params[i * P] if masks[i * C] else 0.0
        vals.extend(a + times[i * N + j] for j in range(N))
    out.write(b"OBSV" + struct.pack("<II", n, N) + struct.pack("<%dd" % len(vals), *vals))
    out.flush()
