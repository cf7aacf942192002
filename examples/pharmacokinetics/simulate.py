#!/usr/bin/env python3
"""Pharmacokinetic simulator for prism (examples/pharmacokinetics).

Reads batches of (mask, natural parameters, seed) from stdin and writes the
simulated concentrations to stdout in prism's framing (docs/spec.md). Only
numpy is needed.

Model: a dose D = 100 mg at t = 0, amounts (mg) in a gut depot g, the
central compartment c and a peripheral compartment p:

    dg/dt = -ka g                                   (Absorption on; else g = 0
                                                     and the dose is an IV bolus
                                                     into c)
    dc/dt =  ka g - k12 c + k21 p - E(c)
    dp/dt =  k12 c - k21 p                          (Peripheral on)
    E(c)  =  CL c / V          (LinearElim)   or   Vmax (c/V) / (Km + c/V)
                                                    (SaturableElim)

observed concentration C = c / V (mg/L) at the grid times, with additive
(sd) or proportional (cv · C) Gaussian error. Integrated with classical
Runge-Kutta (dt = 0.025 h), vectorised over the batch.

`python3 simulate.py --bench` times the simulator alone (batches of 256
prior draws) for docs/benchmarks.md.
"""
import json
import struct
import sys
import time

import numpy as np

DOSE = 100.0
DT = 0.025


def simulate(t, masks, cols, params, seeds):
    """Concentrations (n x len(t)) for a batch; cols maps column names."""
    comp = {name: i for i, name in enumerate(COMPONENTS)}
    n = len(masks)
    absorb = masks[:, comp["Absorption"]]
    periph = masks[:, comp["Peripheral"]]
    sat = masks[:, comp["SaturableElim"]]
    p = lambda name: np.nan_to_num(params[:, cols[name]])  # inactive: NaN -> 0
    V, ka, k12, k21 = p("V"), p("Absorption.ka"), p("Peripheral.k12"), p("Peripheral.k21")
    CL, Vmax, Km = p("LinearElim.CL"), p("SaturableElim.Vmax"), p("SaturableElim.Km")
    Km = np.where(sat, Km, 1.0)

    def rates(y):
        g, c, q = y
        conc = c / V
        elim = np.where(sat, Vmax * conc / (Km + conc), CL * conc)
        absorbed = ka * g
        exchange = k12 * c - k21 * q
        return np.stack([-absorbed, absorbed - exchange - elim, exchange])

    y = np.zeros((3, n))
    y[0] = np.where(absorb, DOSE, 0.0)
    y[1] = np.where(absorb, 0.0, DOSE)
    out = np.empty((n, len(t)))
    steps = np.rint(t / DT).astype(int)
    k = 0
    for i in range(steps[-1] + 1):
        while k < len(t) and steps[k] == i:
            out[:, k] = y[1] / V
            k += 1
        if k == len(t):
            break
        k1 = rates(y)
        k2 = rates(y + 0.5 * DT * k1)
        k3 = rates(y + 0.5 * DT * k2)
        k4 = rates(y + DT * k3)
        y = y + DT / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
    proportional = masks[:, comp["Proportional"]]
    sd = np.where(proportional[:, None], p("Proportional.cv")[:, None] * np.abs(out), p("Additive.sd")[:, None])
    for i in range(n):
        out[i] += sd[i] * np.random.default_rng(int(seeds[i])).standard_normal(len(t))
    return out


def read_exact(f, n):
    b = f.read(n)
    if len(b) != n:
        raise EOFError("prism closed the stream mid-frame")
    return b


COMPONENTS = []


def serve():
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    if inp.read(4) != b"PRSM":
        sys.exit("simulate.py: expected prism's hello frame on stdin")
    (size,) = struct.unpack("<I", read_exact(inp, 4))
    hello = json.loads(read_exact(inp, size))
    t = np.array(hello["grid"])
    COMPONENTS[:] = hello["components"]
    cols = {name: i for i, name in enumerate(hello["columns"])}
    C, P = len(COMPONENTS), len(cols)
    while True:
        tag = inp.read(4)
        if not tag:
            return  # prism closed stdin: done
        if tag != b"BTCH":
            sys.exit("simulate.py: unexpected frame %r" % tag)
        (n,) = struct.unpack("<I", read_exact(inp, 4))
        masks = np.frombuffer(read_exact(inp, n * C), np.uint8).reshape(n, C).astype(bool)
        params = np.frombuffer(read_exact(inp, n * P * 8), "<f8").reshape(n, P)
        seeds = np.frombuffer(read_exact(inp, n * 8), "<u8")
        x = simulate(t, masks, cols, params, seeds)
        out.write(b"OBSV" + struct.pack("<II", n, len(t)) + x.astype("<f8").tobytes())
        out.flush()


def bench(batches=20, n=256):
    """Samples per second of simulate() alone on prior draws."""
    COMPONENTS[:] = ["Absorption", "Peripheral", "LinearElim", "SaturableElim", "Additive", "Proportional"]
    names = ["V", "Absorption.ka", "Peripheral.k12", "Peripheral.k21", "LinearElim.CL",
             "SaturableElim.Vmax", "SaturableElim.Km", "Additive.sd", "Proportional.cv"]
    cols = {name: i for i, name in enumerate(names)}
    rng = np.random.default_rng(1)
    t = 0.5 + np.arange(24.0)
    total = 0.0
    for _ in range(batches):
        masks = np.zeros((n, 6), bool)
        masks[:, 0:2] = rng.random((n, 2)) < 0.5
        sat = rng.random(n) < 0.5
        masks[:, 2], masks[:, 3] = ~sat, sat
        noise = rng.random(n) < 0.5
        masks[:, 4], masks[:, 5] = ~noise, noise
        lo = np.array([5, 0.2, 0.05, 0.05, 0.5, 5, 0.5, 0.01, 0.05])
        hi = np.array([80, 3, 1, 1, 10, 100, 20, 0.3, 0.3])
        params = np.exp(np.log(lo) + (np.log(hi) - np.log(lo)) * rng.random((n, 9)))
        seeds = rng.integers(0, 2**63, n, dtype=np.uint64)
        t0 = time.perf_counter()
        simulate(t, masks, cols, params, seeds)
        total += time.perf_counter() - t0
    print("numpy alone: %d batches of %d in %.3f s: %.0f samples/s" % (batches, n, total, batches * n / total))


if __name__ == "__main__":
    if sys.argv[1:] == ["--bench"]:
        bench()
    else:
        serve()
