"""ONNX models in ngraph: inference of an imported ResNet-50 and GPT, and onnx's node tests,
against onnxruntime on one thread; training of an imported ResNet-18 against the same model
built with ngraph.nn. Side by side in one process, medians of interleaved repeats.

    python bench/onnx_bridge.py                      # full run (a few minutes)
    python bench/onnx_bridge.py --only resnet50,gpt  # some parts
    python bench/onnx_bridge.py --smoke              # tiny sizes, seconds (CI)

Parts:
  resnet50   PyTorch's ResNet-50 (bench/cnn.py's torch.nn definition, eval mode, random
             batch-norm statistics) exported by torch.onnx (TorchScript, opset 17);
             onnxruntime (1 intra-op and 1 inter-op thread, default optimizations) against
             ngraph (import_onnx_model, runtime("CPU").computation); outputs compared.
  gpt        bench/gpt.py's PyTorch GPT (and GPT-2 small's blocks), exported the same way.
  node       every case of onnx's node tests that ngraph.onnx.backend can prepare: the
             setup (prepare, or InferenceSession, plus the first run) and the run time of its
             data sets, summed over the cases both run.
  training   PyTorch's ResNet-18 exported in training mode, imported with trainable=True,
             softmax cross-entropy + SGD (momentum) + the graph's running-statistics updates,
             against ngraph.nn.resnet18's step (bench/cnn.py's) at the same batch and size.

The ngraph side is also profiled (set_profiling: seconds per op type), to see where time
goes. One JSON line of results on stdout; bench/results/onnx_bridge[_smoke].json. A part
whose model fails to import or computes wrong values is reported as failed (its error kept
in the results) and the script exits non-zero after the others ran.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import tempfile
import time
import traceback
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402  (one thread per framework, before any loads)
import ngraph as ng  # noqa: E402

PARTS = ("resnet50", "gpt", "node", "training")


class PartsFailed(RuntimeError):
    """Some parts failed; `.result` holds the results of all of them."""

    def __init__(self, message: str, result: dict) -> None:
        super().__init__(message)
        self.result = result


# ------------------------------------------------------------------------------- helpers


def ort_session(model):
    """An onnxruntime session on one thread (intra- and inter-op), default optimizations."""
    import onnxruntime as ort  # noqa: PLC0415

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 4  # cases it cannot run are counted
    data = model if isinstance(model, (str, bytes)) else model.SerializeToString()
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


def export(module, args, path, names, **kwargs):
    """torch.onnx.export with the TorchScript exporter at opset 17, warnings silenced."""
    import torch  # noqa: PLC0415

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, path, dynamo=False, opset_version=17,
                          input_names=names[0], output_names=names[1], **kwargs)


def profile(comp, call, calls: int = 3) -> dict:
    """Seconds per call by op type of a compiled computation (its `set_profiling` step
    times), largest first, and the share spent reordering Constant inputs (weights laid
    out for oneDNN again in every call)."""
    exe = comp.executable
    exe.set_profiling(True)
    try:
        for _ in range(calls):
            call()
        seconds = list(exe.step_seconds)
        names = list(exe.schedule)
    finally:
        exe.set_profiling(False)
    nodes = {n.name: n for n in exe.function.get_ordered_ops()}
    by_type, count = collections.Counter(), collections.Counter()
    constant_reorders = 0.0
    for name, s in zip(names, seconds):
        node = nodes.get(name)
        kind = node.get_type_name() if node is not None else name
        by_type[kind] += s / calls
        count[kind] += 1
        if kind == "CPUReorder" and node.inputs()[0].get_type_name() == "Constant":
            constant_reorders += s / calls
    return {"total_s": sum(seconds) / calls,
            "constant_reorders_s": constant_reorders,
            "by_op_type": {k: {"count": count[k], "s": v} for k, v in by_type.most_common(10)}}


def check_close(got, want, what: str, rtol: float = 1e-3, atol_scale: float = 1e-4) -> float:
    """Asserts got ≈ want (atol relative to want's largest magnitude); the largest
    difference."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        raise AssertionError(f"{what}: shape {got.shape}, onnxruntime's {want.shape}")
    diff = float(np.max(np.abs(got - want))) if want.size else 0.0
    atol = atol_scale * float(np.max(np.abs(want))) if want.size else 0.0
    if not np.allclose(got, want, rtol=rtol, atol=atol):
        raise AssertionError(f"{what}: wrong values, largest difference {diff:.3g} (largest "
                             f"magnitude {np.max(np.abs(want)):.3g})")
    return diff


def inference_part(name, module, inputs, repeats, number) -> dict:
    """`module` (eval mode) exported, then onnxruntime against ngraph on `inputs` (a dict
    name -> array): outputs compared, times side by side."""
    import torch  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, f"{name}.onnx")
        t = time.perf_counter()
        export(module, tuple(torch.from_numpy(v) for v in inputs.values()), path,
               (list(inputs), ["output"]))
        export_s = time.perf_counter() - t
        t = time.perf_counter()
        sess = ort_session(path)
        ort_setup = time.perf_counter() - t
        t = time.perf_counter()
        fn = ng.onnx.import_onnx_model(path)
        import_s = time.perf_counter() - t
    t = time.perf_counter()
    comp = ng.runtime("CPU").computation(fn)
    args = list(inputs.values())
    (got,) = comp(*args)  # the first call finishes compiling
    compile_s = time.perf_counter() - t
    (want,) = sess.run(None, inputs)
    diff = check_close(got, want, f"{name}: ngraph against onnxruntime")
    times = common.interleaved_medians(
        {"ngraph": lambda: comp(*args), "onnxruntime": lambda: sess.run(None, inputs)},
        repeats=repeats, number=number, warmup=1)
    return {"shapes": {k: list(v.shape) for k, v in inputs.items()}, "seconds": times,
            "ratio": times["ngraph"] / times["onnxruntime"], "max_abs_diff": diff,
            "export_s": export_s, "ngraph_import_s": import_s, "ngraph_compile_s": compile_s,
            "onnxruntime_session_s": ort_setup,
            "ngraph_profile": profile(comp, lambda: comp(*args), 2 if number == 1 else 3)}


# --------------------------------------------------------------------------------- parts


def randomize_batch_norms(model, seed: int = 0) -> None:
    """Random affine parameters and running statistics, so that the exported inference graph's
    batch normalizations are not identities and the outputs keep their scale."""
    import torch  # noqa: PLC0415

    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                c = m.num_features
                m.weight.copy_(0.5 + torch.rand(c, generator=g))
                m.bias.copy_(0.1 * torch.randn(c, generator=g))
                m.running_mean.copy_(0.1 * torch.randn(c, generator=g))
                m.running_var.copy_(0.5 + torch.rand(c, generator=g))


def resnet50(smoke: bool) -> dict:
    import torch  # noqa: PLC0415
    from cnn import torch_resnet  # noqa: PLC0415

    batch, size = (1, 32) if smoke else (8, 224)
    torch.manual_seed(0)
    model = torch_resnet("resnet50", 1000).eval()
    randomize_batch_norms(model)
    x = np.random.default_rng(0).standard_normal((batch, 3, size, size), dtype=np.float32)
    res = inference_part("resnet50", model, {"images": x}, 2 if smoke else 5, 1)
    return {"batch": batch, "image_size": size, **res}


def gpt(smoke: bool) -> dict:
    import gpt as gpt_bench  # noqa: PLC0415
    import torch  # noqa: PLC0415

    res = {}
    for name in ["small"] if smoke else ["example", "gpt2-blocks"]:
        vocab, ctx, _, _, width, batch = gpt_bench.MODELS[name]
        torch.manual_seed(0)
        model = gpt_bench.torch_model(name).eval()
        rng = np.random.default_rng(0)
        x = (rng.integers(0, vocab, (batch, ctx)) if vocab
             else rng.standard_normal((batch, ctx, width), dtype=np.float32))
        res[name] = {"batch": batch, "context": ctx,
                     **inference_part(name, model, {"tokens" if vocab else "x": x},
                                      2 if smoke else 7, 1 if smoke else 5)}
    return res


def node_tests(smoke: bool) -> dict:
    """onnx's node tests through ngraph.onnx.backend against onnxruntime: setup time (prepare
    or InferenceSession, plus the first pass over the data sets) and run time (median of
    interleaved passes), summed over the cases both prepare."""
    import ngraph.onnx.backend as backend  # noqa: PLC0415
    import onnx  # noqa: PLC0415
    from onnx import numpy_helper  # noqa: PLC0415
    from onnx.backend.test.loader import load_model_tests  # noqa: PLC0415

    def array(v):
        return numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else v

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = load_model_tests(kind="node")
    if smoke:
        cases = cases[::80]
    passes = 1 if smoke else 5
    counts = collections.Counter()
    totals = collections.Counter()
    per_case = []
    prepare_errors = collections.Counter()
    disagree = []
    for case in cases:
        if case.model is None or not case.data_sets:
            counts["no in-memory model"] += 1
            continue
        counts["cases"] += 1
        if not backend.is_compatible(case.model):
            counts["not compatible"] += 1
            continue
        data = [([array(i) for i in ins], [array(o) for o in outs])
                for ins, outs in case.data_sets]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                t = time.perf_counter()
                rep = backend.prepare(case.model, "CPU")
                outs = [rep.run(ins) for ins, _ in data]
                ng_setup = time.perf_counter() - t
            except Exception as e:  # noqa: BLE001 - counted, as the test suite would fail it
                counts["ngraph cannot prepare or run"] += 1
                prepare_errors[type(e).__name__] += 1
                continue
            counts["ngraph prepares"] += 1
            agree = all(len(o) == len(ref) and all(_similar(a, b, case.rtol, case.atol)
                                                   for a, b in zip(o, ref))
                        for o, (_, ref) in zip(outs, data))
            counts["ngraph agrees with the expected outputs"] += bool(agree)
            if not agree:
                disagree.append(case.name)
            names = [i.name for i in case.model.graph.input
                     if i.name not in {t.name for t in case.model.graph.initializer}]
            feeds = [dict(zip(names, ins)) for ins, _ in data]
            try:
                t = time.perf_counter()
                sess = ort_session(case.model)
                for f in feeds:
                    sess.run(None, f)
                ort_setup = time.perf_counter() - t
            except Exception:  # noqa: BLE001 - onnxruntime lacks the op or opset
                counts["onnxruntime cannot run"] += 1
                continue
        counts["timed (both run)"] += 1

        def ng_pass(rep=rep, data=data):
            for ins, _ in data:
                rep.run(ins)

        def ort_pass(sess=sess, feeds=feeds):
            for f in feeds:
                sess.run(None, f)

        # Interleaved passes, no pause between them (common.interleaved_medians's 50 ms pause
        # per contender would dominate ~1000 cases of microseconds; both run on this thread).
        samples = {"ngraph": [], "onnxruntime": []}
        for _ in range(passes):
            samples["ngraph"].append(_once(ng_pass))
            samples["onnxruntime"].append(_once(ort_pass))
        times = {k: statistics.median(v) for k, v in samples.items()}
        totals["ngraph_setup_s"] += ng_setup
        totals["onnxruntime_setup_s"] += ort_setup
        totals["ngraph_run_s"] += times["ngraph"]
        totals["onnxruntime_run_s"] += times["onnxruntime"]
        per_case.append((case.name, times["ngraph"], times["onnxruntime"]))
    if not counts["timed (both run)"]:
        raise RuntimeError("no node test case ran on both ngraph and onnxruntime")
    ratios = sorted(n / o for _, n, o in per_case)
    slowest = sorted(per_case, key=lambda c: c[2] - c[1])[:8]
    return {"counts": dict(counts), "prepare_errors": dict(prepare_errors),
            "ngraph_disagrees": disagree,
            "seconds": dict(totals),
            "run_ratio": totals["ngraph_run_s"] / totals["onnxruntime_run_s"],
            "setup_ratio": totals["ngraph_setup_s"] / totals["onnxruntime_setup_s"],
            "median_case_run_ratio": statistics.median(ratios),
            "median_case_run_s": {
                "ngraph": statistics.median(n for _, n, _ in per_case),
                "onnxruntime": statistics.median(o for _, _, o in per_case)},
            "largest_differences": [{"case": c, "ngraph_s": n, "onnxruntime_s": o}
                                    for c, n, o in slowest]}


def _similar(got, want, rtol, atol) -> bool:
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return False
    if want.dtype.kind in "fc" and got.dtype.kind in "fc":
        return bool(np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True))
    return bool(np.array_equal(got, want))


def _once(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def training(smoke: bool) -> dict:
    """ResNet-18 training step: the imported PyTorch model against ngraph.nn.resnet18, the
    same loss, optimizer (SGD, momentum 0.9), batch and images."""
    import torch  # noqa: PLC0415
    from cnn import ngraph_step, torch_resnet  # noqa: PLC0415

    batch, size = (2, 32) if smoke else (16, 112)
    classes = 1000
    torch.manual_seed(0)
    model = torch_resnet("resnet18", classes).train()
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((batch, 3, size, size), dtype=np.float32)
    ys = rng.integers(0, classes, batch)
    with torch.no_grad():  # PyTorch's loss on the first step, before the export moves its stats
        want = float(torch.nn.functional.cross_entropy(model(torch.from_numpy(xs)),
                                                       torch.from_numpy(ys)))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "resnet18_train.onnx")
        export(model, (torch.from_numpy(xs),), path, (["images"], ["logits"]),
               training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
        g = ng.onnx.import_onnx_graph(path, trainable=True)
    x = g.inputs["images"]
    (logits,) = g.outputs.values()
    y = ng.parameter([batch], np.int64, name="labels")
    loss = ng.softmax_cross_entropy(logits, y)
    buffers = [v for v, _ in g.updates]
    params = [v for v in g.variables.values() if not any(v.same_node(b) for b in buffers)]
    updates = ng.optimizers.SGD(0.01, momentum=0.9).updates(loss, params)
    step = ng.runtime().computation(loss, x, y, updates=updates + list(g.updates))
    (got,) = step(xs, ys)
    if not np.isclose(float(got), want, rtol=1e-3):
        raise AssertionError(f"imported ResNet-18: first-step loss {float(got)}, PyTorch's "
                             f"{want}")

    class Comm:  # cnn.ngraph_step's communicator, one rank
        size, rank = 1, 0

    nn_step = ngraph_step("resnet18", batch, size, Comm())

    def imported():
        return step(xs, ys)

    times = common.interleaved_medians({"imported": imported, "ngraph_nn": nn_step},
                                       repeats=2 if smoke else 7, number=1, warmup=1)
    return {"batch": batch, "image_size": size, "seconds": times,
            "ratio": times["imported"] / times["ngraph_nn"],
            "variables": len(params), "buffer_updates": len(g.updates),
            "first_loss": float(got), "pytorch_first_loss": want,
            "ngraph_profile": profile(step, imported, 2)}


# ----------------------------------------------------------------------------------- main


def report(res: dict) -> None:
    rows = []
    for label, r in [("ResNet-50", res.get("resnet50")),
                     *[(f"GPT {k}", v) for k, v in (res.get("gpt") or {}).items()
                       if isinstance(v, dict) and "seconds" in v]]:
        if r and "seconds" in r:
            shape = " ".join("x".join(map(str, s)) for s in r["shapes"].values())
            p = r["ngraph_profile"]
            rows.append([label, shape, f"{r['seconds']['ngraph'] * 1e3:.2f}",
                         f"{r['seconds']['onnxruntime'] * 1e3:.2f}", f"{r['ratio']:.2f}",
                         f"{100 * p['constant_reorders_s'] / p['total_s']:.0f}%"])
    if rows:
        print(common.table(rows, ["inference", "input", "ngraph ms", "onnxruntime ms",
                                  "ngraph / ort", "weights reordered per call"]))
    n = res.get("node")
    if n and "seconds" in n:
        s = n["seconds"]
        print(f"node tests: {n['counts']}")
        print(f"  run (data sets): ngraph {s['ngraph_run_s'] * 1e3:.1f} ms, onnxruntime "
              f"{s['onnxruntime_run_s'] * 1e3:.1f} ms ({n['run_ratio']:.2f}x; median case "
              f"{n['median_case_run_ratio']:.2f}x)")
        print(f"  setup (prepare/session + first run): ngraph {s['ngraph_setup_s']:.2f} s, "
              f"onnxruntime {s['onnxruntime_setup_s']:.2f} s ({n['setup_ratio']:.2f}x)")
    t = res.get("training")
    if t and "seconds" in t:
        print(f"ResNet-18 training step, batch {t['batch']}, {t['image_size']}px: imported "
              f"{t['seconds']['imported'] * 1e3:.1f} ms, ngraph.nn "
              f"{t['seconds']['ngraph_nn'] * 1e3:.1f} ms ({t['ratio']:.3f}x)")
    for part, r in res.items():
        if isinstance(r, dict) and "error" in r:
            print(f"FAILED {part}: {r['error']}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script runs")
    ap.add_argument("--only", default=None, help=f"comma-separated parts of {', '.join(PARTS)}")
    args = ap.parse_args(argv)
    parts = args.only.split(",") if args.only else list(PARTS)
    if set(parts) - set(PARTS):
        ap.error(f"unknown parts {sorted(set(parts) - set(PARTS))}; choose from {PARTS}")
    name = "onnx_bridge_smoke" if args.smoke else "onnx_bridge"
    # --only reruns some parts and keeps the others' last results.
    res = {**((common.load(name) or {}) if args.only else {}), "smoke": args.smoke}
    if not all(common.have(m) for m in ("onnx", "onnxruntime", "torch")):
        print("(onnx, onnxruntime or torch missing: the ONNX benchmark is skipped)")
        return res
    import ngraph.onnx  # noqa: F401, PLC0415
    import torch  # noqa: PLC0415

    torch.set_num_threads(1)
    ng.set_num_threads(1)
    res["cpu"] = cpu_name()
    funcs = {"resnet50": resnet50, "gpt": gpt, "node": node_tests, "training": training}
    for part in parts:
        try:
            res[part] = funcs[part](args.smoke)
        except Exception as e:  # noqa: BLE001 - reported, and the run fails at the end
            res[part] = {"error": f"{type(e).__name__}: {e}",
                         "traceback": traceback.format_exc(limit=-6)}
    report(res)
    print(json.dumps(ratios(res)), flush=True)
    path = common.save(name, res)
    print("saved", path)
    failed = [p for p in parts if "error" in res[p]]
    if failed:
        raise PartsFailed(f"onnx_bridge: failed parts {failed}", res)
    return res


def ratios(res: dict) -> dict:
    """The headline figures: ngraph / onnxruntime per model and for the node tests' run
    time, imported / ngraph.nn for the training step; None where a part failed."""
    out = {"cpu": res.get("cpu")}
    for part in ("resnet50", "training"):
        if part in res:
            out[part] = res[part].get("ratio")
    if "gpt" in res:
        if "error" in res["gpt"]:
            out["gpt"] = None
        for name, r in res["gpt"].items():
            if isinstance(r, dict):
                out[f"gpt {name}"] = r.get("ratio")
    if "node" in res:
        out["node run"], out["node setup"] = (res["node"].get("run_ratio"),
                                              res["node"].get("setup_ratio"))
    return out


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


if __name__ == "__main__":
    try:
        main()
    except PartsFailed as e:
        sys.exit(str(e))
