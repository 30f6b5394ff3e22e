"""Run the commands of README.md as written, in a checkout, and report what each did.

The README's fenced ``bash``/``sh`` and ``python`` blocks run in order, shell blocks with
``bash -e`` (environment changes such as ``export PATH`` carry over to later blocks), Python
blocks with the ``python`` the PATH then finds. An HTML comment on the line before a block
says how to run it:

- ``<!-- readme-test: background until "TEXT" -->``: start it, go on once its output shows
  TEXT (a server, a consumer that prints what it gets); stopped (SIGTERM) at the end.
- ``<!-- readme-test: retry N -->``: run again until it succeeds, for at most N seconds (a
  command that shows what another block produces a moment later).
- ``<!-- readme-test: network -->``: needs a package registry; runs in phase 1.
- ``<!-- readme-test: skip REASON -->``: not run (the test suite itself, the benchmark).

Placeholders a reader fills in (``<originMsgId>``, ``<msgId>``) are filled from the node's own
answers, through the same ``rockafka admin --json`` commands a reader would use.

Phase 1 (with network) runs the blocks up to the last ``network`` block and installs what
``make serve`` installs; phase 2 (run inside a fresh network namespace, where the README's
default ports are free) starts the background blocks and runs the rest. Usage:
``python readme_runner.py PHASE CHECKOUT STATE_DIR`` -> ``STATE_DIR/report-PHASE.json``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

NOTE = re.compile(r"<!--\s*readme-test:\s*(?P<what>[a-z]+)\s*(?P<rest>.*?)\s*-->")
RUN_LANGS = {"bash", "sh", "python"}
BLOCK_TIMEOUT_S = 240
BACKGROUND_WAIT_S = 240


@dataclass
class Block:
    line: int
    lang: str
    code: str
    mode: str = "run"          # run | background | retry | network | skip
    arg: str = ""


@dataclass
class Outcome:
    line: int
    lang: str
    mode: str
    ok: bool
    rc: int | None
    output: str = ""
    detail: str = ""
    first_line: str = field(default="")


def _clip(text: str, keep: int = 3000) -> str:
    return text if len(text) <= 2 * keep else text[:keep] + "\n…\n" + text[-keep:]


def parse(readme: str) -> list[Block]:
    blocks: list[Block] = []
    lines = readme.splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        lang, start = m.group(1), i
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        prev = next((lines[k] for k in range(start - 1, -1, -1) if lines[k].strip()), "")
        note = NOTE.search(prev)
        block = Block(start + 1, lang, "\n".join(lines[start + 1:j]) + "\n")
        if note:
            block.mode = note.group("what")
            block.arg = note.group("rest")
        blocks.append(block)
        i = j + 1
    return blocks


def runnable(blocks: list[Block]) -> list[Block]:
    return [b for b in blocks if b.lang in RUN_LANGS]


def split_phases(blocks: list[Block]) -> tuple[list[Block], list[Block]]:
    """Phase 1: everything up to the last network block except background and skipped blocks;
    phase 2: those background blocks, then the rest."""
    last = max((i for i, b in enumerate(blocks) if b.mode == "network"), default=-1)
    head, tail = blocks[:last + 1], blocks[last + 1:]
    phase1 = [b for b in head if b.mode not in ("background", "skip")]
    phase2 = [b for b in head if b.mode == "background"] + tail
    return phase1, phase2


class Runner:
    def __init__(self, checkout: Path, state_dir: Path):
        self.checkout = checkout
        self.state_dir = state_dir
        self.env_file = state_dir / "env.json"
        self.env = json.loads(self.env_file.read_text()) if self.env_file.exists() else dict(os.environ)
        self.background: list[tuple[subprocess.Popen, Path]] = []

    # -- placeholders ------------------------------------------------------------------------
    def admin_json(self, *args: str) -> object:
        out = subprocess.run(["bash", "-c", "rockafka admin --json " + " ".join(args)], cwd=self.checkout,
                             env=self.env, capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            raise RuntimeError(out.stderr.strip())
        return json.loads(out.stdout)

    def fill(self, code: str) -> str:
        if "<originMsgId>" in code:
            rows = self.admin_json("dlq", "list", "billing")
            if not rows:
                raise RuntimeError("no dead letter of billing yet")
            code = code.replace("<originMsgId>", rows[0]["originMsgId"])
        if "<msgId>" in code:
            rows = self.admin_json("query", "key", "--topic", "orders", "order-1")
            code = code.replace("<msgId>", rows[0]["msgId"])
        return code

    # -- blocks ------------------------------------------------------------------------------
    def script(self, block: Block, code: str) -> Path:
        n = block.line
        if block.lang == "python":
            src = self.state_dir / f"block-{n}.py"
            src.write_text(code)
            body = f'python -u "{src}"\n'
        else:
            body = code
        env_out = self.state_dir / f"env-{n}.json"
        path = self.state_dir / f"block-{n}.sh"
        path.write_text(f"set -e\n{body}\n" + (
            f"python3 -c 'import json, os; json.dump(dict(os.environ), open(\"{env_out}\", \"w\"))'\n"
            if block.lang != "python" else ""))
        return path

    def run_once(self, block: Block) -> Outcome:
        try:
            code = self.fill(block.code)
        except (RuntimeError, ValueError, KeyError, IndexError) as exc:
            return Outcome(block.line, block.lang, block.mode, False, None, detail=f"placeholder: {exc}")
        path = self.script(block, code)
        try:
            out = subprocess.run(["bash", str(path)], cwd=self.checkout, env=self.env, capture_output=True,
                                 text=True, timeout=BLOCK_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            return Outcome(block.line, block.lang, block.mode, False, None, str(exc.stdout or "")[-4000:],
                           f"timed out after {BLOCK_TIMEOUT_S}s")
        env_out = self.state_dir / f"env-{block.line}.json"
        if out.returncode == 0 and env_out.exists():
            self.env = json.loads(env_out.read_text())
        return Outcome(block.line, block.lang, block.mode, out.returncode == 0, out.returncode,
                       _clip(out.stdout + out.stderr))

    def run_background(self, block: Block) -> Outcome:
        m = re.search(r'until\s+"(.*)"', block.arg)
        expect = m.group(1) if m else ""
        path = self.script(block, block.code)
        log = self.state_dir / f"block-{block.line}.log"
        handle = open(log, "wb")
        proc = subprocess.Popen(["bash", str(path)], cwd=self.checkout, env=self.env, stdout=handle,
                                stderr=subprocess.STDOUT, start_new_session=True)
        self.background.append((proc, log))
        deadline = time.monotonic() + BACKGROUND_WAIT_S
        while time.monotonic() < deadline:
            text = log.read_text(errors="replace")
            if expect in text:
                return Outcome(block.line, block.lang, block.mode, True, None, text[-4000:])
            if proc.poll() is not None:
                return Outcome(block.line, block.lang, block.mode, False, proc.returncode, text[-4000:],
                               f"ended before printing {expect!r}")
            time.sleep(0.2)
        return Outcome(block.line, block.lang, block.mode, False, None, log.read_text(errors="replace")[-4000:],
                       f"no {expect!r} within {BACKGROUND_WAIT_S}s")

    def run(self, block: Block) -> Outcome:
        if block.mode == "background":
            result = self.run_background(block)
        elif block.mode == "retry":
            deadline = time.monotonic() + float(block.arg.split()[0])
            result = self.run_once(block)
            while not result.ok and time.monotonic() < deadline:
                time.sleep(1.0)
                result = self.run_once(block)
        else:
            result = self.run_once(block)
        result.first_line = block.code.splitlines()[0] if block.code.strip() else ""
        return result

    def stop_background(self) -> list[str]:
        problems = []
        for proc, log in reversed(self.background):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(10)
                    problems.append(f"{log.name} ignored SIGTERM")
        return problems

    def save_env(self) -> None:
        self.env_file.write_text(json.dumps(self.env))


def main(argv: list[str]) -> int:
    phase, checkout, state_dir = argv[0], Path(argv[1]), Path(argv[2])
    blocks = runnable(parse((checkout / "README.md").read_text()))
    phase1, phase2 = split_phases(blocks)
    runner = Runner(checkout, state_dir)
    outcomes: list[Outcome] = []
    if phase == "2":
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    try:
        for block in phase1 if phase == "1" else phase2:
            if block.mode == "skip":
                continue
            outcome = runner.run(block)
            outcomes.append(outcome)
            if not outcome.ok:
                break
    finally:
        stop_problems = runner.stop_background()
        runner.save_env()
    report = {"outcomes": [asdict(o) for o in outcomes], "stop_problems": stop_problems,
              "skipped": [{"line": b.line, "reason": b.arg} for b in blocks if b.mode == "skip"]}
    (state_dir / f"report-{phase}.json").write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
