"""Runs img2dataset over the internet scenario's first JOBS URLs, and reports as the driver does.

    python img2dataset-run.py --img2dataset BIN --jobs-file FILE --jobs N --work-dir DIR \
        --rows FILE --markdown FILE --command TEXT [--ca FILE] [--processes 2] [--threads 64]

img2dataset (PyPI, in a venv that scripts/bench.sh makes) reads a URL list and downloads with
urllib: resize off (resize_mode no), no re-encoding (disable_all_reencoding), files output in a
temporary folder, 2 processes x 64 threads, shards of a sixth of the jobs so that both processes
have work to the end. It trusts the run's CA through SSL_CERT_FILE and resolves the origins through
/etc/hosts.

Figures: messages/s over img2dataset's own download window (the earliest shard start to the latest
shard end, from its *_stats.json; Python's start and imports are not in it), the whole run's wall
time, CPU per job (every process of the run, start included, from RUSAGE_CHILDREN), the peak of the
summed RSS of its processes (sampled every 100 ms), and the outcomes from its stats' status_dict.
"""
import argparse
import glob
import json
import math
import os
import resource
import subprocess
import sys
import time
from datetime import datetime, timezone


def tree(root):
    """The pids of root and its descendants, from /proc."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo.extend(children.get(pid, []))
    return pids


def rss(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def outcome(message):
    if message == "success":
        return "ok"
    if message.startswith("HTTP Error"):
        return "http_error"
    return message[:60]


def main():
    parser = argparse.ArgumentParser()
    for key in ("img2dataset", "jobs-file", "work-dir", "rows", "markdown", "command"):
        parser.add_argument(f"--{key}", required=True)
    parser.add_argument("--jobs", type=int, required=True)
    parser.add_argument("--ca")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--threads", type=int, default=64)
    parser.add_argument("--versions", default="")
    args = parser.parse_args()
    name = "internet-img2dataset"

    kinds = {}
    urls = os.path.join(args.work_dir, "img2dataset-urls.txt")
    with open(args.jobs_file) as source, open(urls, "w") as out:
        for n, line in enumerate(source):
            if n >= args.jobs:
                break
            url, kind = line.split("\t")[:2]
            out.write(url + "\n")
            kinds[kind] = kinds.get(kind, 0) + 1
    output = os.path.join(args.work_dir, "img2dataset-out")
    env = dict(os.environ, NO_ALBUMENTATIONS_UPDATE="1", WANDB_MODE="disabled")
    if args.ca:
        env["SSL_CERT_FILE"] = args.ca
    command = [args.img2dataset, "--url_list", urls, "--input_format", "txt", "--output_folder", output,
               "--output_format", "files", "--processes_count", str(args.processes),
               "--thread_count", str(args.threads), "--resize_mode", "no", "--disable_all_reencoding", "True",
               "--number_sample_per_shard", str(max(1, math.ceil(args.jobs / (3 * args.processes)))),
               "--timeout", "30", "--retries", "0", "--enable_wandb", "False"]
    load_start = open("/proc/loadavg").read().split()[:3]
    log = open(os.path.join(args.work_dir, "img2dataset.log"), "w")
    started = time.monotonic()
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    peak = 0
    while process.poll() is None:
        peak = max(peak, sum(rss(pid) for pid in tree(process.pid)))
        time.sleep(0.1)
    wall = time.monotonic() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime

    counts, first, last, done = {}, math.inf, -math.inf, 0
    for path in glob.glob(os.path.join(output, "*_stats.json")):
        with open(path) as f:
            stats = json.load(f)
        first, last = min(first, stats["start_time"]), max(last, stats["end_time"])
        done += stats["count"]
        for message, count in stats.get("status_dict", {}).items():
            counts[outcome(message)] = counts.get(outcome(message), 0) + count
    window = last - first if done else math.nan
    ok = counts.get("ok", 0)
    images, cut = kinds.get("image", 0), kinds.get("cut", 0)
    # With disable_all_reencoding img2dataset never decodes what it gets: an HTML page or a cut
    # JPEG answered 200 is a success to it.
    pages = kinds.get("html", 0)
    expected = (images <= ok <= images + cut + pages and counts.get("http_error", 0) == kinds.get("missing", 0))
    listed = ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))
    figures = [
        ("results", f"{done} of {args.jobs} in its stats; exit {process.returncode}", "one per job, exit 0",
         "yes" if done == args.jobs and process.returncode == 0 else "no"),
        ("outcomes", listed, f"ok {images} (+ up to {cut} cut JPEGs and {pages} HTML pages: it does not decode), "
                             f"http_error {kinds.get('missing', 0)}", "yes" if expected else "no"),
        ("messages/s", f"{args.jobs / window:,.0f}" if done else "—", "—", "—"),
        ("whole run (start and imports included)", f"{wall:.1f} s ({args.jobs / wall:,.1f} jobs/s)", "—", "—"),
        ("CPU µs/message (all its processes, whole run)", f"{cpu / args.jobs * 1e6:,.0f}", "—", "—"),
        ("peak RSS (sum of its processes)", f"{peak / 1048576:.1f} MB", "—", "—"),
    ]
    load_end = open("/proc/loadavg").read().split()[:3]
    print(f"\n== {name}: the internet scenario's first {args.jobs:,} URLs through img2dataset "
          f"({args.processes} processes x {args.threads} threads)")
    print(f"   load average {' '.join(load_start)} at start, {' '.join(load_end)} at end")
    for figure, value, target, met in figures:
        print(f"   {figure:<46} {value}  [target {target}: {met}]")
    with open(args.rows, "a") as rows:
        for figure, value, target, met in figures:
            rows.write(f"{name}\t{figure}\t{value}\t{target}\t{met}\n")
    date = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    md = (f"### {name}: the internet scenario's first URLs through img2dataset, {args.processes} processes × "
          f"{args.threads} threads, resize off, no re-encoding\n\n"
          f"Measured {date} with `{args.command}`: {args.jobs:,} jobs. Load average (1, 5, 15 min) "
          f"{' '.join(load_start)} at the start, {' '.join(load_end)} at the end.\n\n"
          "| figure | value | target | met |\n|---|---|---|---|\n")
    for figure, value, target, met in figures:
        md += f"| {figure} | {value} | {target} | {met} |\n"
    md += (f"\nmessages/s is over img2dataset's own download window ({window:.1f} s, from its shards' stats); "
           "CPU counts every process of the run, Python's start included.\n")
    if args.versions:
        md += f"\nVersions: {args.versions}.\n"
    with open(args.markdown, "w") as f:
        f.write(md)
    return 0 if process.returncode == 0 and done == args.jobs else 1


if __name__ == "__main__":
    sys.exit(main())
