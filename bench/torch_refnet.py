"""PyTorch twin of prism's reference network benchmark (engine issue).

The network, data shapes and training step are identical to the Go version in
engine/refnet (see docs/benchmarks.md, "Reference network"):

  encoder        2 pre-norm blocks over 10 tokens (10 values each), learned positions
  model decoder  4 blocks over 51 tokens: causal self-attention, cross-attention to
                 the encoder, AdaLN on a 64-dim Gaussian-Fourier embedding of lambda
  param decoder  4 blocks over 50 tokens: block mask from a random activity mask
                 (about half inactive), cross-attention, AdaLN on the noise level
  D=64, 4 heads x 16, MLP 4x, GELU (tanh), batch 256
  loss = BCE(logits, mask bits) summed over components + masked squared error,
         both averaged over the batch
  step = forward + backward + AGC(2.0, unit-wise) + RAdam(5e-4) + EMA(0.999)

Prints one JSON line: {"step_s": median, "infer_s": median, "steps": [...]}.
"""
import json
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

D, H, DH, W = 64, 4, 16, 256
B = 256
ENC_T, ENC_IN = 10, 10
C = 50
PTOK, PDIM = 50, 2
INFER_B = 1000


def gelu(x):
    return F.gelu(x, approximate="tanh")


class Fourier(nn.Module):
    """Gaussian-Fourier features: z = 2*pi/in * P u, [cos z, sin z]."""

    def __init__(self, out):
        super().__init__()
        self.P = nn.Parameter(torch.randn(out // 2, 1))

    def forward(self, u):  # u [B,1]
        z = (2 * math.pi) * u @ self.P.t()
        return torch.cat([torch.cos(z), torch.sin(z)], dim=-1)


class AdaLN(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(D, 2 * D)
        self.l2 = nn.Linear(2 * D, 2 * D)
        nn.init.zeros_(self.l2.weight)
        nn.init.zeros_(self.l2.bias)

    def forward(self, h, ctx):  # h [B,T,D], ctx [B,D]
        sb = self.l2(gelu(self.l1(ctx)))
        s, b = sb[:, :D], sb[:, D:]
        return h * (1 + s[:, None, :]) + b[:, None, :]


def attend(q, k, v, allow):
    # q [B,Tq,D], k/v [B,Tk,D], allow [B or 1, Tq, Tk] bool or None
    Bq, Tq, _ = q.shape
    Tk = k.shape[1]
    q = q.view(Bq, Tq, H, DH).transpose(1, 2)
    k = k.view(Bq, Tk, H, DH).transpose(1, 2)
    v = v.view(Bq, Tk, H, DH).transpose(1, 2)
    s = q @ k.transpose(-1, -2) / math.sqrt(DH)
    if allow is not None:
        s = s.masked_fill(~allow[:, None, :, :], float("-inf"))
    p = torch.softmax(s, dim=-1)
    o = p @ v
    return o.transpose(1, 2).reshape(Bq, Tq, D)


class Block(nn.Module):
    def __init__(self, adaln, cross):
        super().__init__()
        self.ln1 = nn.LayerNorm(D)
        self.qkv = nn.Linear(D, 3 * D)
        self.o = nn.Linear(D, D)
        self.ada1 = AdaLN() if adaln else None
        self.cross = cross
        if cross:
            self.ln2 = nn.LayerNorm(D)
            self.cq = nn.Linear(D, D)
            self.ckv = nn.Linear(D, 2 * D)
            self.co = nn.Linear(D, D)
        self.ln3 = nn.LayerNorm(D)
        self.ada3 = AdaLN() if adaln else None
        self.fc1 = nn.Linear(D, W)
        self.fc2 = nn.Linear(W, D)

    def forward(self, x, ctx, y, allow):
        h = self.ln1(x)
        if self.ada1 is not None:
            h = self.ada1(h, ctx)
        q, k, v = self.qkv(h).split(D, dim=-1)
        x = x + self.o(attend(q, k, v, allow))
        if self.cross:
            h = self.ln2(x)
            k, v = self.ckv(y).split(D, dim=-1)
            x = x + self.co(attend(self.cq(h), k, v, None))
        h = self.ln3(x)
        if self.ada3 is not None:
            h = self.ada3(h, ctx)
        return x + self.fc2(gelu(self.fc1(h)))


class RefNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc_in = nn.Linear(ENC_IN, D)
        self.enc_pos = nn.Parameter(0.02 * torch.randn(ENC_T, D))
        self.enc = nn.ModuleList([Block(False, False) for _ in range(2)])
        self.enc_ln = nn.LayerNorm(D)
        self.lam = Fourier(D)
        self.m_id = nn.Parameter(0.02 * torch.randn(C + 1, D))
        self.m_bit = nn.Embedding(3, D)
        self.mdec = nn.ModuleList([Block(True, True) for _ in range(4)])
        self.m_ln = nn.LayerNorm(D)
        self.m_head = nn.Linear(D, 1)
        self.sig = Fourier(D)
        self.p_id = nn.Parameter(0.02 * torch.randn(PTOK, D))
        self.p_in = nn.Linear(PDIM, D)
        self.pdec = nn.ModuleList([Block(True, True) for _ in range(4)])
        self.p_ln = nn.LayerNorm(D)
        self.p_head = nn.Linear(D, PDIM)
        nn.init.zeros_(self.p_head.weight)
        nn.init.zeros_(self.p_head.bias)

    def encode(self, xe):
        h = self.enc_in(xe) + self.enc_pos
        for blk in self.enc:
            h = blk(h, None, None, None)
        return self.enc_ln(h)

    def mask_logits(self, y, lam, bits_in, causal):
        h = self.m_id[None] + self.m_bit(bits_in)
        ctx = self.lam(lam)
        for blk in self.mdec:
            h = blk(h, ctx, y, causal)
        return self.m_head(self.m_ln(h))[..., 0][:, :C]

    def denoise(self, y, cnoise, theta, allow):
        h = self.p_id[None] + self.p_in(theta)
        ctx = self.sig(cnoise)
        for blk in self.pdec:
            h = blk(h, ctx, y, allow)
        return self.p_head(self.p_ln(h))


def make_batch(g, n):
    xe = torch.randn(n, ENC_T, ENC_IN, generator=g)
    lam = torch.rand(n, 1, generator=g)
    bits = (torch.rand(n, C, generator=g) < 0.5).float()
    bits_in = torch.cat([torch.full((n, 1), 2, dtype=torch.long), bits.long()], dim=1)
    cnoise = 0.25 * torch.log(torch.exp(torch.randn(n, 1, generator=g) * 1.2 - 1.2))
    theta = torch.randn(n, PTOK, PDIM, generator=g)
    target = torch.randn(n, PTOK, PDIM, generator=g)
    act = torch.rand(n, PTOK, generator=g) < 0.5
    allow = (act[:, :, None] & act[:, None, :]) | torch.eye(PTOK, dtype=torch.bool)[None]
    return xe, lam, bits, bits_in, cnoise, theta, target, act, allow


def agc(params, clip=2.0, eps=1e-3):
    with torch.no_grad():
        for p in params:
            g = p.grad
            if p.ndim > 1:
                # unit-wise: norm over all axes but the output axis (torch stores [out, in])
                pn = p.norm(dim=1, keepdim=True).clamp_min(eps)
                gn = g.norm(dim=1, keepdim=True).clamp_min(1e-6)
            else:
                pn = p.norm().clamp_min(eps)
                gn = g.norm().clamp_min(1e-6)
            g.mul_(torch.clamp(clip * pn / gn, max=1.0))


def main():
    torch.set_num_threads(2)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    net = RefNet()
    params = [p for p in net.parameters()]
    opt = torch.optim.RAdam(params, lr=5e-4)
    ema = [p.detach().clone() for p in params]
    causal = torch.tril(torch.ones(C + 1, C + 1, dtype=torch.bool))[None]
    xe, lam, bits, bits_in, cnoise, theta, target, act, allow = make_batch(g, B)
    w = act[..., None].float().expand(-1, -1, PDIM)

    def step():
        opt.zero_grad(set_to_none=False)
        y = net.encode(xe)
        logits = net.mask_logits(y, lam, bits_in, causal)
        bce = F.binary_cross_entropy_with_logits(logits, bits, reduction="sum") / B
        pred = net.denoise(y, cnoise, theta, allow)
        mse = ((pred - target) ** 2 * w).sum() / B
        loss = bce + mse
        loss.backward()
        agc(params)
        opt.step()
        with torch.no_grad():
            for e, p in zip(ema, params):
                e.mul_(0.999).add_(p, alpha=0.001)
        return loss.item()

    nsteps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    for _ in range(2):
        step()
    times = []
    for _ in range(nsteps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)

    xi, _, _, _, ci, thi, _, acti, allowi = make_batch(g, INFER_B)
    with torch.no_grad():
        yi = net.encode(xi)
        net.denoise(yi, ci, thi, allowi)
        itimes = []
        for _ in range(nsteps):
            t0 = time.perf_counter()
            net.denoise(yi, ci, thi, allowi)
            itimes.append(time.perf_counter() - t0)
    med = lambda a: sorted(a)[len(a) // 2]
    nparams = sum(p.numel() for p in params)
    print(json.dumps({"step_s": med(times), "infer_s": med(itimes), "steps": times, "params": nparams}))


if __name__ == "__main__":
    main()
