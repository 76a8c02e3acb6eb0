"""train.tensorboard: TensorBoard's own reader (EventAccumulator, the code behind its UI) reads back
every scalar metrics.jsonl holds (train loss, lr, grad norm, tokens/s; eval loss, perplexity,
accuracy), at the same steps and to float32 rounding; after a resume from an earlier checkpoint
the events past it are dropped as metrics.jsonl's records are, so each step appears once.
Usage: test_tensorboard.py ROFORMER_BINARY REPO. Exit 77 (skipped) without the tensorboard package.
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
except ImportError:
    print("tensorboard is not installed: skipped")
    sys.exit(77)

BINARY, REPO = sys.argv[1], sys.argv[2]
TRAIN_TAGS = ["loss", "lr", "grad_norm", "tokens_per_s", "tflops", "elapsed_s", "tokens"]
EVAL_TAGS = ["loss", "ppl", "accuracy", "tokens"]


def run(args):
    r = subprocess.run([BINARY, *args], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, " ".join(args) + "\n" + r.stdout + r.stderr
    return r


def dataset(tmp):
    text = "".join(open(p, encoding="utf-8").read() for p in sorted(glob.glob(os.path.join(REPO, "docs", "*.md"))))
    cut = len(text) * 9 // 10
    open(os.path.join(tmp, "train.txt"), "w").write(text[:cut])
    open(os.path.join(tmp, "valid.txt"), "w").write(text[cut:])
    out = os.path.join(tmp, "ds")
    run(["prepare-data", "--input", os.path.join(tmp, "train.txt"), os.path.join(tmp, "valid.txt"), "--out", out])
    return out


def expected_scalars(run_dir):
    """{tag: {step: value}} from metrics.jsonl, tagged as the writer tags them."""
    out = {}
    for line in open(os.path.join(run_dir, "metrics.jsonl")):
        r = json.loads(line)
        if r.get("type") not in ("train", "eval"):
            continue
        for key in TRAIN_TAGS if r["type"] == "train" else EVAL_TAGS:
            if key in r:
                out.setdefault(r["type"] + "/" + key, {})[r["step"]] = r[key]
    return out


def read_back(run_dir):
    acc = EventAccumulator(os.path.join(run_dir, "tensorboard"), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def check_same(run_dir, label):
    expected, got = expected_scalars(run_dir), read_back(run_dir)
    assert set(got) == set(expected), f"{label}: tags {sorted(got)} != {sorted(expected)}"
    for tag, by_step in expected.items():
        steps = [s for s, _ in got[tag]]
        assert steps == sorted(by_step), f"{label}: {tag} at steps {steps}, metrics.jsonl has {sorted(by_step)}"
        for step, value in got[tag]:
            want = by_step[step]
            assert abs(value - want) <= 1e-6 * max(1.0, abs(want)), f"{label}: {tag}@{step} {value} != {want}"
    return expected


def main():
    with tempfile.TemporaryDirectory() as tmp:
        ds = dataset(tmp)
        run_dir = os.path.join(tmp, "run")
        args = ["train", os.path.join(REPO, "configs/quickstart/rope.yaml"), "--run-dir", run_dir,
                "--set", f"data.path={ds}", "--set", "train.device=cpu", "--set", "train.tensorboard=true",
                "--set", "train.steps=10", "--set", "train.batch_size=4", "--set", "train.log_every=2",
                "--set", "train.eval_every=5", "--set", "train.eval_batches=2", "--set", "train.checkpoint_every=5",
                "--set", "train.keep_checkpoints=3"]
        run(args)
        first = check_same(run_dir, "fresh run")
        assert len(first["train/loss"]) == 5 and len(first["eval/ppl"]) >= 2, first
        # Resume from step 5: steps 6-10 are trained again and logged once more by a second writer.
        shutil.rmtree(os.path.join(run_dir, "checkpoints", "step_10"))
        run(args + ["--resume", "auto"])
        assert len(glob.glob(os.path.join(run_dir, "tensorboard", "events.out.tfevents.*"))) == 2
        again = check_same(run_dir, "resumed run")
        assert sorted(again["train/loss"]) == sorted(first["train/loss"]), again["train/loss"]
    print("tensorboard: every metrics.jsonl scalar read back by TensorBoard's reader, also after a resume")


if __name__ == "__main__":
    main()
