"""A model of data-parallel training throughput on N nodes, fitted to and checked against the
measurements of bench/multihost.py (bench/results/multihost_engine.json); see docs/scaling.md.

    python bench/scaling_model.py                                # fit, validation table
    python bench/scaling_model.py --chart docs/scaling.png       # and the chart
    python bench/scaling_model.py --markdown                     # the table for the docs
    python bench/scaling_model.py --smoke                        # the committed results, no chart
    python bench/scaling_model.py --results bench/results/multihost_zen4.json --compute lone

A step of N = H x L ranks (H nodes of L ranks) is simulated from three measured inputs:

- compute: the step time of one rank when N lone processes share the CPU (no exchange),
  measured in the same rounds as the step it predicts (bench/multihost.py's paired rounds);
  where the rounds also measured the N ranks in lockstep (each its step without the exchange,
  a one-value allreduce after each), that less the allreduce alone (`--compute lone` keeps
  the lone processes);
  and where in that compute each gradient bucket's exchange starts and where the step first
  waits for it (the timeline of a 2-node step: the overlap the executable plans; the
  exchange through the node's shared region is blocking, and a 16-bit one always is);
- the network, as ngraph's exchange engine moves a bucket of S bytes between H nodes: the
  node's shared-memory reduction (L > 1), then an MPI_Ialltoallv and an MPI_Iallgatherv,
  2(H-1) messages per rank (latency a each), 2(H-1)/H S bytes (halved on a 16-bit wire)
  through each host's link (w_R per byte at rate R) and S/L of them through each rank's CPU
  (c per byte, scaled by the measured CPU sharing), plus the 16-bit wire's encoding and
  decoding (e per f32 byte) and, with L > 1, the two arrivals of the node's ranks around
  the exchange (g each, scaled by the sharing: a rank spins for one that may not hold a
  core); fitted by least squares to the allreduce measured alone (4 KB to 64 MB) in every
  configuration and series;
- shared memory: with L > 1 ranks per node, the one-node reduction (fitted on 2 ranks).

Collectives run one at a time in bucket order, each starting when its bucket is ready and
the previous one is done; the compute stops where it needs a bucket that has not arrived.
The sharded update (reduce-scatter, the update of 1/N of the weights, an allgather of the
weights) moves the same bytes as the allreduce and is modelled as one. The projection to
2,048 nodes takes one rank alone per node (no CPU sharing) and the wire at the nominal rate
times the efficiency measured on the 1 Gbit/s links.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
# The measurements of ngraph's exchange engine (paired rounds); the first passes' (Open MPI's
# MPI_Allreduce between hosts, lone processes measured apart) are in multihost.json.
DEFAULT = os.path.join(HERE, "results", "multihost_engine.json")
if not os.path.exists(DEFAULT):
    DEFAULT = os.path.join(HERE, "results", "multihost.json")


def rate_bits(rate: str) -> float:
    """Bits per second of a tc rate ("1gbit", "500mbit"); infinite for "off"."""
    if rate == "off":
        return float("inf")
    number, unit = re.fullmatch(r"(\d+)([kmg]?)bit", rate).groups()
    return float(number) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[unit]


# Published figures (docs/scaling.md says where each was read).
# You et al. 2017 (arXiv 1709.05011): 90-epoch ResNet-50 in 20 minutes on 2,048 Xeon Phi 7250
# (KNL); with ImageNet-1k's 1,281,167 training images that is 96,088 images/s in all.
YOU_2048 = {"nodes": 2048, "images_per_s": 90 * 1_281_167 / (20 * 60)}
# Das et al. 2016 (arXiv 1602.06709), speedups: VGG-A (minibatch 512) 90x on 128 nodes, VGG-A
# and OverFeat-FAST (minibatch 256) 53x and 42x on 64 nodes, a 7-layer DNN 6.5x on 16 nodes,
# and ~14x on 16 nodes of an Ethernet AWS cluster.
DAS = [("VGG-A, mb 512", 128, 90), ("VGG-A, mb 256", 64, 53), ("OverFeat-FAST, mb 256", 64, 42),
       ("7-layer DNN", 16, 6.5), ("AWS Ethernet", 16, 14)]


def load(path):
    with open(path) as f:
        return json.load(f)


def compute_s(res, model, n, near=None, rate=None):
    """The mean step of one of n lone processes: measured just before configuration `near`
    ("HxL") ran at `rate` where it was (bench/multihost.py --lone-each-rate), else before and
    after that configuration (the machine's load drifts), else every time it was."""
    entry = res["lone"][f"{model}/{n}"]
    if near and rate and f"at {near}@{rate}" in entry:
        return entry[f"at {near}@{rate}"]["mean_step_s"]
    close = [v for k, v in entry.items() if near and k in (f"before {near}", f"after {near}")]
    return statistics.mean(v["mean_step_s"] for v in close or entry.values())


def nnls(xs, ys):
    """Least squares with every coefficient >= 0: refits without the negative ones."""
    x, y = np.array(xs, float), np.array(ys, float)
    keep = list(range(x.shape[1]))
    while True:
        coef = np.zeros(x.shape[1])
        if keep:
            sol, *_ = np.linalg.lstsq(x[:, keep], y, rcond=None)
            coef[keep] = sol
        if (coef >= 0).all():
            return coef
        keep = [i for i in keep if coef[i] > 0]


def fit_line(xs, ys):
    """Least squares y = a x0 + b x1 with a, b >= 0."""
    a, b = nnls(xs, ys)
    return float(a), float(b)


def sharing(res, n, near=None, rate=None):
    """How much slower one process computes when n share the CPU (and other jobs load it):
    lone(n), measured around configuration `near`, over lone(1) (the first passes' protocol;
    the paired rounds record it with each step, see share_of)."""
    return compute_s(res, "resnet50", n, near, rate) / compute_s(res, "resnet50", 1)


def share_of(res, series, hosts, slots, rate):
    """The CPU sharing s_N of a configuration at a rate: measured in the same rounds as its
    ResNet-50 step (lone(N) / one process alone, medians), else with its allreduce, else by
    the first passes' lone processes."""
    where = f"{hosts}x{slots}@{rate}"
    for key in (f"{series}/resnet50/{where}", *(k for k in res["step"]
                                                if k.endswith(f"/resnet50/{where}"))):
        if res["step"].get(key, {}).get("share"):
            return res["step"][key]["share"]
    for key in (f"{series}/{where}", *(k for k in res["allreduce"] if k.endswith(f"/{where}"))):
        if res["allreduce"].get(key, {}).get("share"):
            return res["allreduce"][key]["share"]
    return sharing(res, hosts * slots, f"{hosts}x{slots}", rate)


def fit_shm(res, series):
    r = res["shm"].get(f"{series}/1x2") or res["shm"]["f32/1x2"]
    return fit_line([[1.0, s["bytes"]] for s in r["sizes"]], [s["seconds"] for s in r["sizes"]])


def shm_share(res, series):
    r = res["shm"].get(f"{series}/1x2") or res["shm"]["f32/1x2"]
    return r.get("share") or sharing(res, 2, "1x2")


def wire_of(entry):
    """Bytes per value on the wire between nodes: 4 (f32) or 2 (bf16, fp16); 3 for a step that
    ran the sharded update across nodes with a 16-bit exchange (NGRAPH_SHM_SHARDED_COMPRESSED:
    the gradients' reduce-scatter in 16 bits, the weights' allgather in f32), whose encoding
    and decoding is costed as the compressed allreduce's."""
    if entry.get("compression", "none") in ("none", None):
        return 4
    return 3 if entry.get("sharded") and entry.get("hosts", 1) > 1 else 2


def burst_bytes(rate: str) -> float:
    """The token bucket's burst on a link of `rate` (tools/multihost.sh: 1 ms of the rate, at
    least 64 KB); 0 unlimited."""
    return 0.0 if rate == "off" else max(rate_bits(rate) / 8 / 1000, 65536.0)


def tbf_binds(res, rate: str) -> bool:
    """Whether the tbf limit is what bounds a transfer on links of `rate`: one TCP transfer
    (bench/multihost.py's probe) reaches 90% of the nominal rate. Where it does not (25
    Gbit/s here: 19.5, this CPU through a veth) the bucket never runs dry and its burst saves
    nothing."""
    got = res.get("link", {}).get(rate)
    return bool(got) and rate != "off" and 8 * got / rate_bits(rate) > 0.9


# The shared region's arrivals per collective with L > 1 ranks per node (shared_region.cpp):
# one before the reduction (every rank's inputs written), one after the exchange (every
# piece back in every slot).
ARRIVALS = 2


def exchange_terms(nbytes, hosts, slots, wire):
    """The exchange engine's shape for a bucket of nbytes (f32) on hosts of slots ranks:
    (messages per rank, bytes through each rank, bytes through each host's link, f32 bytes
    each rank encodes to and decodes from the 16-bit wire, whether the node's shared-memory
    reduction comes on top).

    The node's ranks reduce in shared memory (L > 1), then local rank l of every node
    exchanges piece l of the node's sum with the others (CrossNodeExchange): an
    MPI_Ialltoallv (the reduce-scatter: H-1 messages per rank, the sums in rank order) and an
    MPI_Iallgatherv (H-1 more), 2(H-1)/H S between the H nodes, S/L of it through each rank.
    A 16-bit wire halves those bytes and encodes and decodes each rank's S/L."""
    scale = wire / 4
    return (2 * (hosts - 1), 2 * (hosts - 1) / hosts * nbytes * scale / slots,
            2 * (hosts - 1) / hosts * nbytes * scale, nbytes / slots if wire != 4 else 0.0,
            slots > 1)


class Links:
    """The network's costs, as ngraph's exchange engine moves a bucket of S bytes between H
    hosts of L ranks (N = H L processes sharing the CPU, each slowed s_N), on links of rate R:

        m a s_N + B_rank c s_N + E e s_N + B_host w_R
            (L > 1: + 2 g s_N + the one-node reduction's bytes)

    (exchange_terms: m messages per rank, 2(H-1) for an alltoallv and an allgatherv; B_rank the
    bytes through a rank, B_host through a host's link, E the bytes a 16-bit wire encodes and
    decodes). a: a message's latency, which on this shared CPU is mostly the wait for a core,
    so it scales with s_N like the work; c: the CPU's work per byte (copies, TCP, the sums);
    e: the 16-bit wire's encoding and decoding per f32 byte; w_R: the wire's time per byte at
    rate R (0 unlimited); g: one arrival of a node's L ranks in the shared region (two per
    collective, ARRIVALS: before the reduction and after the exchange), which the one-node
    reduction's fit does not hold (its intercept is ~0 on 2 ranks with a core each): with more
    ranks than cores a rank spinning at an arrival waits for one that is not running, so g
    scales with s_N like a. Every L > 1 configuration measured here is 2x2 (s_N 2.2 to 2.3),
    so the data cannot tell a g that scales from one that does not; the projection (L = 1)
    has no arrivals. Where the tbf limit binds (tbf_binds: 1 and 10 Gbit/s here) the first
    burst_bytes of each collective through a host's link leave at once, the bucket's tokens
    gathered while the link was idle before it (the allreduce alone: a barrier and a copy
    between calls; the step: its compute), so B_host less one burst goes at w_R. Fitted
    together, by least squares of the relative error with every term
    >= 0, to the allreduce measured alone (4 KB to 64 MB) in every configuration and series
    of the results."""

    def __init__(self, res, series=None, exclude=()):
        """`exclude`: (hosts, slots, rate) of configurations whose allreduce to leave out of
        the fit (leave_one_out)."""
        series = [series] if isinstance(series, str) else series
        self.shm = fit_shm(res, "f32")
        self.shm_share = shm_share(res, "f32")
        rows, ys, self.points = [], [], []
        entries = {k: r for k, r in res["allreduce"].items()
                   if (series is None or k.startswith(tuple(f"{s}/" for s in series)))
                   and (r["hosts"], r["slots"], r["rate"]) not in exclude}
        self.rates = sorted({r["rate"] for r in entries.values() if r["rate"] != "off"},
                            key=rate_bits)
        self.burst = {r["rate"]: burst_bytes(r["rate"]) if tbf_binds(res, r["rate"]) else 0.0
                      for r in entries.values()}
        for key, r in entries.items():
            h, slots, rate = r["hosts"], r["slots"], r["rate"]
            share = r.get("share") or share_of(res, key.split("/")[0], h, slots, rate)
            for p in r["sizes"]:
                s = p["bytes"]
                msgs, b_rank, b_host, codec, two_level = exchange_terms(s, h, slots, wire_of(r))
                rows.append([msgs * share, b_rank * share, codec * share,
                             ARRIVALS * share if two_level else 0.0]
                            + [self.wire_bytes(b_host, rate) if rate == x else 0.0
                               for x in self.rates])
                shm = self.shm_cost(s, share) if two_level else 0.0
                ys.append(p["seconds"] - shm)
                self.points.append((key, s, p["seconds"], shm))
        # Relative errors: each point weighted by 1 / its time, so that the 4 KB and 2 MB
        # exchanges (latency, the MLP's bucket) weigh as much as the 64 MB ones.
        weight = 1 / np.maximum(np.array([p[2] for p in self.points]), 1e-6)
        coef = nnls(np.array(rows) * weight[:, None], np.array(ys) * weight)
        self.a, self.c, self.e, self.g = (float(v) for v in coef[:4])
        self.w = {"off": 0.0, **{rate: float(w) for rate, w in zip(self.rates, coef[4:])}}
        pred = np.array(rows) @ coef + np.array([p[3] for p in self.points])
        meas = np.array([p[2] for p in self.points])
        self.rel_errors = pred / meas - 1

    def wire_bytes(self, b_host, rate):
        """The bytes through a host's link that go at the wire's rate: one tbf burst fewer
        where the limit binds."""
        return max(0.0, b_host - self.burst.get(rate, 0.0))

    def shm_cost(self, nbytes, share):
        """The one-node reduction (fitted on 2 ranks) at CPU sharing `share`."""
        return (self.shm[0] + self.shm[1] * nbytes) * share / self.shm_share

    def eta(self):
        """The wire's efficiency (the exchange's achieved / nominal rate) on the slowest
        limited link, the one where the wire, not this CPU, is what limits (on faster ones
        the fitted w is near 0 and says nothing about the wire)."""
        limited = [r for r in sorted(self.w, key=rate_bits) if r != "off" and self.w[r] > 0]
        return 8 / (rate_bits(limited[0]) * self.w[limited[0]]) if limited else 1.0

    def cost(self, nbytes, hosts, slots, rate, share, wire=4, projected=False):
        """A bucket's exchange; `projected`: the wire at the nominal rate times eta (any
        rate, measured or not; a real link has no token bucket, so no burst)."""
        if hosts == 1:
            return self.shm_cost(nbytes, share)
        msgs, b_rank, b_host, codec, two_level = exchange_terms(nbytes, hosts, slots, wire)
        w = 8 / (self.eta() * rate_bits(rate)) if projected else self.w.get(rate, 0.0)
        t = (msgs * self.a + b_rank * self.c + codec * self.e) * share \
            + (b_host if projected else self.wire_bytes(b_host, rate)) * w
        if two_level:
            t += ARRIVALS * self.g * share + self.shm_cost(nbytes, share)
        return t


def simulate(t_compute, buckets, cost):
    """Step time: compute t_compute, buckets [(bytes, ready, needed)] as fractions of it,
    cost(bytes) of each collective, run one at a time in order."""
    events = []
    for i, (_, ready, needed) in enumerate(buckets):
        events += [(ready, 0, i), (needed, 1, i)]
    stall, net_free, ends = 0.0, 0.0, {}
    for frac, kind, i in sorted(events):
        now = frac * t_compute + stall
        if kind == 0:
            ends[i] = max(now, net_free) + cost(buckets[i][0])
            net_free = ends[i]
        elif ends[i] > now:
            stall += ends[i] - now
    return t_compute + stall


def timeline_of(res, series, model):
    """The series' 2-host timeline, else f32's: (the series it was measured in, the entry)."""
    key = series if f"{series}/{model}" in res["timeline"] else "f32"
    return key, res["timeline"][f"{key}/{model}"]


def timeline_ranks(res, series, model):
    """How many ways the update was split in the 2-host timeline the series uses: 2 where that
    timeline's 2x1 step ran the sharded update across the nodes (each rank updated half the
    weights), else 1."""
    key, tl = timeline_of(res, series, model)
    ranks = (tl.get("hosts", 2), tl.get("slots", 1))
    if "sharded" in tl:
        return ranks[0] * ranks[1] if tl["sharded"] else 1
    steps = [r for r in res.get("step", {}).values() if r.get("series") == key and
             r["model"] == model and (r["hosts"], r["slots"]) == ranks]
    return ranks[0] * ranks[1] if steps and steps[0].get("sharded") else 1


def update_share(res, series, model):
    """The optimizer update's share of a lone process's step, from the series' 2-host
    timeline: the kernel time after the last bucket is ready is the update (the exchange is
    blocking there, so the backward pass is done), of 1/n of the weights where the timeline's
    step was sharded n ways. Checked on the committed timelines: the unsharded ResNet-50's
    tail is 20.0 ms, the sharded one's 10.1 ms, so 20.2 ms for all the weights, 15% of a lone
    step (the MLP: 22% and 24%)."""
    tail = 1 - timeline_of(res, series, model)[1]["buckets"][-1]["ready"]
    n = timeline_ranks(res, series, model)
    return n * tail / (1 - tail + n * tail)


def buckets_of(res, series, model, blocking=False):
    """The buckets of the series' 2-host timeline (else f32's): (bytes, ready, needed) as
    fractions of a lone process's step, which updates every weight (the timeline's own step
    may have updated half of them); a compressed exchange runs blocking (needed where it is
    ready)."""
    tl = timeline_of(res, series, model)[1]
    tail = 1 - tl["buckets"][-1]["ready"]
    n = timeline_ranks(res, series, model)
    full = 1 - tail + n * tail  # the timeline's step is this fraction of a lone one
    return [(b["bytes"], b["ready"] / full, (b["ready"] if blocking else b["needed"]) / full)
            for b in tl["buckets"]]


def sharded_compute(res, series, model, t_c, ranks, sharded, scale=1.0, blocking=False):
    """A step's compute from t_c, the lone processes' or the lockstep's (each rank updates
    every weight in both): a sharded
    update across the N ranks updates 1/N of them, so (1 - 1/N) of the update is not done;
    and the buckets' positions as fractions of that compute. `scale`: the measured model's
    lone step over this one's (224x224 against the timeline's 64x64): the update takes the
    same seconds (the same weights), a share `u scale` of the longer step, and the forward and
    backward passes the rest, so a bucket's moment in them, `ready / (1 - u)` of them, becomes
    `ready (1 - u scale) / (1 - u)` of the step. `blocking` as buckets_of."""
    u = update_share(res, series, model)
    cut = u * scale * (1 - 1 / ranks) if sharded and ranks > 1 else 0.0
    t = t_c * (1 - cut)
    stretch = (1 - u * scale) / (1 - u) * t_c / t
    return t, [(s, ready * stretch, needed * stretch)
               for s, ready, needed in buckets_of(res, series, model, blocking)]


def step_compute(res, r, basis="lockstep"):
    """A measured step's compute input and where it came from: with `basis` "lockstep" and
    the row's rounds measured it, the N ranks in lockstep (each its step without the exchange,
    a one-value allreduce after each) less that allreduce alone, per round, the median over
    the rounds: the compute of N ranks that wait for each other every step, as the step's own
    ranks do at its exchange; else the N lone processes' (which never wait: with more ranks
    than cores they pack the CPU better than ranks in step)."""
    if basis == "lockstep" and r.get("lockstep_s"):
        per_round = [x["lockstep_s"] - (x.get("barrier_s") or 0.0) for x in r.get("rounds", [])
                     if x.get("lockstep_s")]
        if per_round:
            return statistics.median(per_round), "lockstep"
        return r["lockstep_s"] - (r.get("barrier_s") or 0.0), "lockstep"
    hosts, slots = r["hosts"], r["slots"]
    return (r.get("compute_s") or compute_s(res, r["model"], hosts * slots, f"{hosts}x{slots}",
                                            r["rate"])), "lone"


def round_spread(r):
    """How far apart a measured step's rounds are: the slowest round's step over the fastest's,
    less 1 (None with fewer than two rounds). The measurement's own scatter, beside the
    model's error on the row's median."""
    steps = [x["step_s"] for x in r.get("rounds", []) if x.get("step_s")]
    return max(steps) / min(steps) - 1 if len(steps) > 1 else None


def predict(res, series, r, links, basis="lockstep"):
    """A measured step's prediction: (step seconds, compute seconds, the compute's basis)."""
    hosts, slots, rate = r["hosts"], r["slots"], r["rate"]
    t_c, source = step_compute(res, r, basis)
    share = share_of(res, series, hosts, slots, rate)
    wire = wire_of(r)
    t, buckets = sharded_compute(res, series, r["model"], t_c, hosts * slots, r.get("sharded"),
                                 blocking=wire != 4)  # a compressed exchange is blocking
    step = simulate(t, buckets, lambda s: links.cost(s, hosts, slots, rate, share, wire))
    return step, t_c, source


def exchange_path(r):
    """How a measured step's gradients crossed the nodes: "engine" (ngraph's exchange, the
    one the allreduce measurements and the model cost), "MPI" (no byte through the engine
    and no shared region: every rank fell back to MPI's own allreduce, as it does when
    /dev/shm cannot hold the region; the fit has no measurement of that path), or None
    where the row does not say."""
    sent = r.get("sent_per_step")
    if not sent:
        return None
    if any(sent.values()) or r.get("shared_memory"):
        return "engine"
    return "MPI"


def series_of(res):
    return sorted({k.split("/")[0] for k in res["step"]}, key=lambda s: (s != "f32", s))


def validation(res, series=None, basis="lockstep"):
    """Every measured step of the series (all by default) against its prediction; `basis`
    as step_compute."""
    series = series or series_of(res)
    links = Links(res)
    rows = []
    for key, r in sorted(res["step"].items(), key=lambda kv: (
            series.index(kv[0].split("/")[0]) if kv[0].split("/")[0] in series else -1,
            kv[1]["model"], kv[1]["hosts"], kv[1]["slots"], rate_bits(kv[1]["rate"])
            if kv[1]["rate"] != "shm" else 0)):
        name = key.split("/")[0]
        if name not in series or r["hosts"] < 2:
            continue
        t, t_c, source = predict(res, name, r, links, basis)
        ips = r["ranks"] * r["batch_per_rank"] / t
        load = r.get("load")
        rows.append({"series": name, "model": r["model"],
                     "config": f"{r['hosts']}x{r['slots']}", "rate": r["rate"],
                     "compute_s": t_c, "compute_from": source, "predicted_s": t,
                     "lone_s": step_compute(res, r, "lone")[0],
                     "measured_s": r["mean_step_s"], "predicted_ips": ips,
                     "measured_ips": r["images_per_s"],
                     "error": ips / r["images_per_s"] - 1, "sharded": r.get("sharded"),
                     "path": exchange_path(r),
                     "load": max(load) if isinstance(load, list) else load,
                     "rounds": len(r.get("rounds", [])) or 1, "spread": round_spread(r)})
    return rows, links


def leave_one_out(res, rows, basis="lockstep"):
    """Each validated row predicted by a fit without the allreduce of its configuration (its
    hosts, ranks per host and rate, every series): the errors, in the rows' order."""
    errors = []
    for r in rows:
        hosts, slots = (int(x) for x in r["config"].split("x"))
        links = Links(res, exclude={(hosts, slots, r["rate"])})
        step = next(x for k, x in res["step"].items() if k.split("/")[0] == r["series"]
                    and (x["model"], x["hosts"], x["slots"], x["rate"])
                    == (r["model"], hosts, slots, r["rate"]))
        t, _, _ = predict(res, r["series"], step, links, basis)
        errors.append(step["ranks"] * step["batch_per_rank"] / t / step["images_per_s"] - 1)
    return errors


def projection(res, series, model, t_node, rate, links, nodes):
    """images/s on each number of nodes, one rank alone on each (no CPU sharing), on a link
    of `rate` (any tc rate: the wire at that rate times the measured efficiency); a series
    whose steps shard the update across the nodes updates 1/m of the weights on m nodes."""
    steps = [r for r in res["step"].values()
             if r.get("series") == series and r["model"] == model and r["hosts"] > 1]
    sharded = any(r.get("sharded") for r in steps)
    compression = steps[0].get("compression", "none") if steps else "none"
    batch = 8 if model == "resnet50" else 64
    scale = compute_s(res, model, 1) / t_node
    out = []
    for m in nodes:
        wire = wire_of({"compression": compression, "sharded": sharded, "hosts": m})
        t, buckets = sharded_compute(res, series, model, t_node, m, sharded, scale, wire != 4)
        out.append(m * batch / simulate(t, buckets, lambda s, m=m, wire=wire: links.cost(
            s, m, 1, rate, 1.0, wire, projected=True) if m > 1 else 0.0))
    return out


def table_text(rows, markdown=False):
    """The validation table; a "compute from" column where a row's compute is the lockstep's.
    "weak scaling vs no exchange" is the lone processes' compute over the measured step."""
    sources = any(r.get("compute_from", "lone") != "lone" for r in rows)
    head = ["series", "model", "config", "link", "compute ms", *(["compute from"] * sources),
            "predicted ms", "measured ms", "predicted img/s", "measured img/s", "error",
            "weak scaling vs no exchange", "load"]
    lines = []
    for r in rows:
        lines.append([r.get("series", "f32"), r["model"], r["config"], r["rate"],
                      f"{1e3 * r['compute_s']:.1f}",
                      *([r.get("compute_from", "lone")] * sources),
                      f"{1e3 * r['predicted_s']:.1f}", f"{1e3 * r['measured_s']:.1f}",
                      f"{r['predicted_ips']:,.1f}", f"{r['measured_ips']:,.1f}",
                      f"{100 * r['error']:+.0f}%",
                      f"{100 * r.get('lone_s', r['compute_s']) / r['measured_s']:.0f}%",
                      "-" if r.get("load") is None else f"{r['load']:.1f}"])
    return _format(head, lines, markdown)


def _format(head, lines, markdown):
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        return "\n".join(out + ["| " + " | ".join(x) + " |" for x in lines])
    widths = [max(len(h), *(len(x[i]) for x in lines)) for i, h in enumerate(head)]
    out = ["  ".join(h.ljust(w) for h, w in zip(head, widths))]
    return "\n".join(out + ["  ".join(c.ljust(w) for c, w in zip(x, widths)) for x in lines])


def compare_text(res, markdown=False):
    """Each row predicted from the lone processes' compute and from the lockstep's, side by
    side, and the count within 15% of each (docs/scaling.md, the Zen 4's table)."""
    by = {}
    for basis in ("lone", "lockstep"):
        for r in validation(res, None, basis)[0]:
            by.setdefault((r["series"], r["model"], r["config"], r["rate"]), {})[basis] = r
    head = ["series", "model", "config", "link", "lone ms", "lockstep ms", "measured ms",
            "predicted from lone", "error", "predicted from lockstep", "error"]
    lines = []
    for key, v in by.items():
        a, b = v["lone"], v["lockstep"]
        lines.append([*key, f"{1e3 * a['compute_s']:.1f}",
                      f"{1e3 * b['compute_s']:.1f}" if b["compute_from"] == "lockstep" else "-",
                      f"{1e3 * a['measured_s']:.1f}", f"{1e3 * a['predicted_s']:.1f}",
                      f"{100 * a['error']:+.0f}%", f"{1e3 * b['predicted_s']:.1f}",
                      f"{100 * b['error']:+.0f}%"])
    counts = ", ".join(f"{basis}: {sum(abs(v[basis]['error']) <= 0.15 for v in by.values())} "
                       f"of {len(by)} within 15%" for basis in ("lone", "lockstep"))
    return _format(head, lines, markdown) + "\n" + counts


def summary(rows):
    """Within 15%, per series and model: [(series, model, within, count, median |error|)]."""
    out = []
    for key in sorted({(r["series"], r["model"]) for r in rows}):
        errs = [abs(r["error"]) for r in rows if (r["series"], r["model"]) == key]
        out.append((*key, sum(e <= 0.15 for e in errs), len(errs), statistics.median(errs)))
    return out


def _label(rate):
    return "unlimited veth" if rate == "off" else rate.replace("gbit", " Gbit/s")


def chart(res, series, rows, links, path):
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, axes = plt.subplots(1, 3, figsize=(18, 5.2))
    resnet = [x for x in rows if x["model"] == "resnet50" and x["config"].endswith("x1")
              and x["series"] == series]
    # (a) The seeds' chart on the harness: ResNet-50 images/s on 1, 2, 4, 8 nodes (hosts of
    # one rank), measured, predicted, and the ceiling without communication (N lone
    # processes sharing the same 2 cores).
    ax = axes[0]
    rates = [r for r in ("off", "25gbit", "10gbit", "1gbit") if any(x["rate"] == r
                                                                    for x in resnet)]
    width = 0.8 / len(rates)
    nodes = [1, 2, 4, 8]
    one = 8 / compute_s(res, "resnet50", 1)
    ax.bar([0], [one], 0.8 * width * 2, color="gray", label="1 node: one rank alone")
    for j, rate in enumerate(rates):
        xs, meas, pred, ceil = [], [], [], []
        for i, m in enumerate(nodes[1:], start=1):
            r = next((x for x in resnet if x["config"] == f"{m}x1" and x["rate"] == rate), None)
            if r:
                xs.append(i + (j - (len(rates) - 1) / 2) * width)
                meas.append(r["measured_ips"])
                pred.append(r["predicted_ips"])
                ceil.append(8 * m / r["compute_s"])
        ax.bar(xs, meas, width, label=f"measured, {_label(rate)}")
        ax.plot(xs, pred, "k_", markersize=14, markeredgewidth=2.5,
                label="model" if j == 0 else None)
        ax.plot(xs, ceil, "_", color="tab:gray", markersize=14, markeredgewidth=1.5,
                label="no exchange (lone processes)" if j == 0 else None)
    ax.set_xticks(range(len(nodes)), [f"{m} node{'s' if m > 1 else ''}" for m in nodes])
    ax.set(ylabel="images/s in all (higher is better)",
           title="ResNet-50 64x64, batch 8 per node: the harness\n"
                 "(every node's rank on the same 2 shared cores)")
    ax.legend(fontsize="x-small")
    # (b) Projection: images/s per node on 1 to 2,048 nodes, one rank alone per node.
    ax = axes[1]
    many = [2 ** k for k in range(12)]
    node224 = res.get("node", {}).get("resnet50@224")
    sizes = [("64x64", compute_s(res, "resnet50", 1), "tab:blue")]
    if node224:
        sizes.append(("224x224", node224["mean_step_s"], "tab:green"))
    for name, t_node, color in sizes:
        for rate, style in (("10gbit", "-"), ("25gbit", "--"), ("100gbit", ":")):
            ips = projection(res, series, "resnet50", t_node, rate, links, many)
            ax.plot(many, [v / m for v, m in zip(ips, many)], style, color=color,
                    label=f"{name}, {_label(rate)} (projected)")
        ax.plot([1], [8 / t_node], "o", color=color, label=f"{name}, 1 node (measured)")
    ax.plot([YOU_2048["nodes"]], [YOU_2048["images_per_s"] / YOU_2048["nodes"]], "*",
            color="black", markersize=13,
            label="You et al. 2017: 2,048 Xeon Phi nodes,\n224x224 (90 epochs in 20 min)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set(xlabel="nodes", ylabel="images/s per node (weak scaling, batch 8 per node)",
           title="Projection: one rank (one core of this CPU) per node")
    ax.legend(fontsize="x-small")
    # (c) Scaling efficiency: projected and measured, beside Das et al.'s speedups.
    ax = axes[2]
    if node224:
        for rate, style in (("10gbit", "-"), ("25gbit", "--"), ("100gbit", ":")):
            ips = projection(res, series, "resnet50", node224["mean_step_s"], rate, links, many)
            ax.plot(many, [v / (m * ips[0]) for v, m in zip(ips, many)], style,
                    color="tab:green", label=f"model, 224x224, {_label(rate)}")
    for rate in rates:
        pts = sorted((int(x["config"].split("x")[0]), x["measured_ips"] * x["compute_s"]
                      / (8 * int(x["config"].split("x")[0])))
                     for x in resnet if x["rate"] == rate)
        if pts:
            ax.plot(*zip(*pts), "o", alpha=0.7,
                    label=f"measured, harness 64x64, {_label(rate)}")
    for name, m, speedup in DAS:
        ax.plot([m], [speedup / m], "s", markersize=8, label=f"Das et al. 2016: {name}")
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 1.3)
    ax.set(xlabel="nodes", ylabel="throughput / (nodes x one node's)",
           title="Scaling efficiency (harness: against the same CPU\n"
                 "sharing without exchange; Das et al.: their networks)")
    ax.legend(fontsize="x-small", ncol=2)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", default=DEFAULT)
    ap.add_argument("--series", default=None,
                    help="the driver's series (tags), comma-separated; default every one")
    ap.add_argument("--chart", default=None)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="the committed results, no chart")
    ap.add_argument("--compare", action="store_true",
                    help="also the rows predicted from each compute input, side by side")
    ap.add_argument("--compute", choices=["lockstep", "lone"], default="lockstep",
                    help="the steps' compute input: the ranks in lockstep where the rounds "
                         "measured them (else the lone processes), or the lone processes")
    args = ap.parse_args(argv)
    res = load(args.results)
    rows, links = validation(res, args.series.split(",") if args.series else None, args.compute)
    print(f"results of {res['machine']['date']} on {res['machine']['cpu']}, "
          f"{res['machine']['cores']} cores")
    print(f"fit of {len(links.points)} allreduce measurements (ngraph's exchange): latency "
          f"a = {1e6 * links.a:.1f} us per message, the CPU's own cost 1/c = "
          + (f"{8 / links.c / 1e9:.2f} Gbit/s" if links.c else "-")
          + " per rank alone on a core, the 16-bit wire's encoding and decoding 1/e = "
          + (f"{1 / links.e / 1e9:.2f} GB/s of f32" if links.e else "-")
          + f", a node's arrival (L > 1) g = {1e6 * links.g:.1f} us"
          + "; the wire 1/w: "
          + ", ".join(f"{r} {8 / w / 1e9:.2f} Gbit/s" if w else f"{r} -"
                      for r, w in links.w.items() if r != "off")
          + f" (efficiency {links.eta():.2f}); fit errors "
          f"{100 * np.median(np.abs(links.rel_errors)):.0f}% median, "
          f"{100 * np.max(np.abs(links.rel_errors)):.0f}% largest")
    print("TCP transfers: " + ", ".join(f"{r} {8 * v / 1e9:.2f} Gbit/s"
                                        for r, v in res["link"].items()))
    print(f"shared memory (2 ranks): {1e6 * links.shm[0]:.0f} us + "
          f"{1 / links.shm[1] / 1e9:.2f} GB/s" if links.shm[1] else "shared memory: -")
    print(table_text(rows, args.markdown))
    if args.compare:
        print(compare_text(res, args.markdown))
    for name, model, within, count, med in summary(rows):
        print(f"{name} {model}: {within} of {count} within 15% (median error {100 * med:.0f}%)")
    mpi = [r for r in rows if r.get("path") == "MPI"]
    if mpi:
        print("through MPI's own allreduce, not the engine the model costs (no shared region, "
              "0 bytes through the engine): " + ", ".join(
                  f"{r['series']} {r['model']} {r['config']}@{r['rate']} "
                  f"{100 * r['error']:+.0f}%" for r in mpi))
    worst = max(abs(r["error"]) for r in rows)
    within = sum(abs(r["error"]) <= 0.15 for r in rows)
    loads = [r["load"] for r in rows if r.get("load") is not None]
    print(f"{within} of {len(rows)} configurations within 15%; the largest error "
          f"{100 * worst:.0f}%" + (f"; load average {min(loads):.1f} to {max(loads):.1f} "
                                   "during the steps" if loads else ""))
    spreads = [(r["spread"], abs(r["error"]) > 0.15) for r in rows if r["spread"] is not None]
    if spreads:
        wide = [miss for sp, miss in spreads if sp > 0.15]
        print(f"the measured steps' rounds (slowest over fastest, less 1): median "
              f"{100 * statistics.median(sp for sp, _ in spreads):.0f}%, more than 15% apart in "
              f"{len(wide)} of {len(spreads)} rows ({sum(wide)} of them outside 15% of the "
              "model)")
    loo = leave_one_out(res, rows, args.compute)
    print(f"leave one configuration out (its allreduce out of the fit): "
          f"{sum(abs(e) <= 0.15 for e in loo)} of {len(loo)} within 15%; the largest error "
          f"{100 * max(abs(e) for e in loo):.0f}%")
    node224 = res.get("node", {}).get("resnet50@224")
    for name, t_node in (("64x64", compute_s(res, "resnet50", 1)),
                         ("224x224", node224 and node224["mean_step_s"])):
        if t_node and "f32/resnet50" in res["timeline"]:
            eff = []
            for rate in ("10gbit", "25gbit", "100gbit"):
                one, many = projection(res, "f32", "resnet50", t_node, rate, links, [1, 2048])
                eff.append(f"{_label(rate)} {100 * many / (2048 * one):.0f}%")
            print(f"projection, ResNet-50 {name} (one rank alone {1e3 * t_node:.0f} ms a step): "
                  "efficiency at 2,048 nodes " + ", ".join(eff))
    if args.chart and not args.smoke:
        chart(res, "f32", rows, links, args.chart)
        print("wrote", args.chart)
    return {"rows": rows, "links": links, "loo": loo}


if __name__ == "__main__":
    sys.exit(main() and 0)
