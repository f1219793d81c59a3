"""Runs the shell blocks of README.md that a comment marks for a phase of
scripts/test-readme, against a server the test started, and checks what
they print against the output the README shows.

A block is marked by the line `<!-- test: PHASE -->` just before its ```sh
fence. Each line of the block that is not a comment is a command; the
`# …` lines right after a command are the output the README shows for it.
A command passes when it exits 0 (a streaming `curl -N`, stopped after a
few seconds, may end on its time limit), prints no API error, and prints,
for each shown line, a line of that shape: `…` stands for any text and a
run of spaces for any run of spaces, so table widths and ids may differ.

Before running, `localhost:7311` and `127.0.0.1:7311` become the test
server's address, and `<id>` the id of a completed job of the queue emails.

With `files`, it checks instead that each block marked by the line
`<!-- file: PATH -->` just before its fence shows PATH (relative to the
README) exactly.

usage: readme_blocks.py README PHASE ADDR | readme_blocks.py README files
"""
import json
import os
import re
import subprocess
import sys
import urllib.request

STREAM_SECONDS = 3
COMMAND_SECONDS = 60


def blocks(readme, phase):
    """Yields (line number, [lines]) for each ```sh block marked for phase."""
    lines = open(readme, encoding="utf-8").read().split("\n")
    marker = "<!-- test: %s -->" % phase
    i = 0
    while i < len(lines):
        if lines[i].strip() == marker:
            if i + 1 >= len(lines) or lines[i + 1].strip() != "```sh":
                sys.exit("%s:%d: %s is not followed by a ```sh block" % (readme, i + 1, marker))
            start = i + 2
            end = start
            while end < len(lines) and lines[end].strip() != "```":
                end += 1
            yield start + 1, lines[start:end]
            i = end
        i += 1


def commands(block):
    """Yields (offset, command, [shown output lines]) for a block's lines."""
    current = None
    for n, line in enumerate(block):
        if line.startswith("#"):
            if current is not None:
                current[2].append(line[1:].strip())
            continue
        if not line.strip():
            continue
        if current is not None:
            yield current
        current = (n, line, [])
    if current is not None:
        yield current


def shape(shown):
    """The regular expression a printed line must match for a shown line."""
    parts = []
    for text in shown.split("…"):
        words = re.split(r"\s+", text)
        parts.append(r"\s+".join(re.escape(w) for w in words))
    return re.compile(".*".join(parts))


def completed_id(addr):
    url = "http://%s/v1/jobs?queue=emails&state=completed&limit=1" % addr
    with urllib.request.urlopen(url, timeout=10) as r:
        jobs = json.load(r)["jobs"]
    if not jobs:
        sys.exit("no completed job in emails to put in place of <id>")
    return jobs[0]["id"]


def run(readme, phase, addr):
    env = dict(os.environ, SPOOL_SERVER="http://" + addr)
    ran = 0
    failures = []
    for line_no, block in blocks(readme, phase):
        for offset, command, shown in commands(block):
            where = "%s:%d" % (readme, line_no + offset)
            cmd = command.replace("localhost:7311", addr).replace("127.0.0.1:7311", addr)
            if "<id>" in cmd:
                cmd = cmd.replace("<id>", completed_id(addr))
            streaming = re.match(r"curl\s+-\w*N", cmd) is not None
            if streaming:
                cmd = cmd.replace("curl", "curl --max-time %d" % STREAM_SECONDS, 1)
            print("$ " + command, flush=True)
            p = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], env=env,
                               capture_output=True, text=True, timeout=COMMAND_SECONDS)
            out = p.stdout.strip("\n").split("\n") if p.stdout.strip() else []
            for line in out[:12]:
                print("  " + line)
            if len(out) > 12:
                print("  … %d more lines" % (len(out) - 12))
            ran += 1
            ok_exit = p.returncode == 0 or (streaming and p.returncode == 28)
            if not ok_exit:
                failures.append("%s: exit %d: %s\n%s" % (where, p.returncode, command, p.stderr.strip()))
                continue
            if '"error":{' in p.stdout:
                failures.append("%s: the server answered an error: %s\n%s" % (where, command, p.stdout.strip()))
                continue
            for want in (w for w in shown if w):
                pattern = shape(want)
                if not any(pattern.fullmatch(got.strip()) for got in out):
                    failures.append("%s: no line of the output has the shape the README shows:\n  %s\n  README: %s"
                                    % (where, command, want))
    if ran == 0:
        failures.append("%s: no command is marked <!-- test: %s -->" % (readme, phase))
    for f in failures:
        print("FAIL " + f, file=sys.stderr)
    print("%s: %d commands, %d failures" % (phase, ran, len(failures)), flush=True)
    return 1 if failures else 0


def check_files(readme):
    """Checks that each block marked <!-- file: PATH --> shows PATH."""
    lines = open(readme, encoding="utf-8").read().split("\n")
    base = os.path.dirname(os.path.abspath(readme))
    checked = 0
    failures = []
    for i, line in enumerate(lines):
        m = re.fullmatch(r"<!-- file: (\S+) -->", line.strip())
        if not m:
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
            failures.append("%s:%d: %s is not followed by a block" % (readme, i + 1, line.strip()))
            continue
        end = i + 2
        while end < len(lines) and lines[end] != "```":
            end += 1
        shown = "\n".join(lines[i + 2:end])
        path = os.path.join(base, m.group(1))
        with open(path, encoding="utf-8") as f:
            want = f.read().rstrip("\n")
        checked += 1
        if shown != want:
            failures.append("%s:%d: the block differs from %s" % (readme, i + 1, m.group(1)))
    if checked == 0:
        failures.append("%s: no block is marked <!-- file: PATH -->" % readme)
    for f in failures:
        print("FAIL " + f, file=sys.stderr)
    print("files: %d blocks, %d failures" % (checked, len(failures)), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[2] == "files":
        sys.exit(check_files(sys.argv[1]))
    if len(sys.argv) != 4:
        sys.exit(__doc__.strip().split("\n")[-1])
    sys.exit(run(*sys.argv[1:]))
