#!/usr/bin/env python3
"""Runs every ```sh and ```python block of README.md and docs/ as a user would, after the set-up.

Usage: doc_blocks_check.py SOURCE_ROOT WORK_DIR [DOC.md ...]
    PACKREC_BUILD_DIR: the build tree scripts/env.sh takes (the test's own build).

Each document runs in a folder of its own under WORK_DIR, its blocks in order, as one session:
the shell blocks share the working directory and exported variables (a block's `cd` and
`. scripts/env.sh` hold for the next), the Python blocks share one interpreter (started at the
document's first Python block, with the shell's environment and folder at that point). README.md
starts from a bare environment (no packrec on PATH, no PYTHONPATH): its "Use" block has to make
them work itself, as it tells the user to. Any other document starts after `. scripts/env.sh`.
The folder holds links `scripts` and `benchmarks` to the repository's, as a user's checkout does.

A block runs as written. An HTML comment right before it (invisible on GitHub) may say:
    <!-- doc-test given:
    CODE -->      run CODE, in the block's language, first: the files the block takes as its
                  user's (a list file, another tool's tars); the block itself stays verbatim.
    <!-- doc-test skip: REASON -->
                  not run (a cluster's paths, a user's ImageNet, a benchmark minutes long); the
                  block is still parsed (bash -n, Python's compile), each `packrec CMD --flag`
                  line in it is checked against `packrec CMD --help`, and REASON is required.
A block that fails stops the document with its file, line, code and output.
"""
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import textwrap

BLOCK = re.compile(r"^```(sh|python)\n(.*?)^```", re.M | re.S)
DIRECTIVE = re.compile(r"<!-- doc-test (given|skip):((?:(?!-->).)*)-->\s*\Z", re.S)

# The child interpreter of a document's Python blocks: reads one JSON request per line
# ({"name", "code"}), runs it in one namespace, answers on the fd it is given.
PYTHON_CHILD = r"""
import json, os, sys, traceback
answers = os.fdopen(int(sys.argv[1]), "w")
namespace = {"__name__": "__main__"}
for line in sys.stdin:
    request = json.loads(line)
    try:
        exec(compile(request["code"], request["name"], "exec"), namespace)
        answer = {"ok": True}
    except BaseException:
        answer = {"ok": False, "error": traceback.format_exc()}
    sys.stdout.flush()
    sys.stderr.flush()
    answers.write(json.dumps(answer) + "\n")
    answers.flush()
"""


def blocks_of(doc):
    """(language, code, line, directive kind or None, directive text) of each block."""
    text = doc.read_text()
    found = []
    for match in BLOCK.finditer(text):
        before = text[:match.start()]
        directive = DIRECTIVE.search(before[-4000:])
        kind, argument = (directive.group(1), directive.group(2)) if directive else (None, "")
        found.append((match.group(1), match.group(2), before.count("\n") + 1, kind,
                      textwrap.dedent(argument.strip("\n")) if kind == "given" else argument.strip()))
    return found


class Session:
    """One document's shell state (folder, exported variables) and Python interpreter."""

    def __init__(self, root, folder, after_setup):
        self.root, self.folder = root, folder
        self.env_file = folder / ".doc-test-env"
        self.cwd_file = folder / ".doc-test-cwd"
        self.python = None
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        # The shell of a Debian machine: `python3` is Debian's (with the apt packages the set-up
        # installed), not a python3 of pyenv or a venv earlier on this PATH.
        env["PATH"] = "/usr/bin:/bin:" + env.get("PATH", "")
        self.base_env = env
        for name in ("scripts", "benchmarks"):
            (folder / name).symlink_to(root / name)
        self.cwd_file.write_text(str(folder))
        self.run_shell(". scripts/env.sh" if after_setup else ":", "set-up")

    def run_shell(self, code, name):
        script = "\n".join([
            "set -euo pipefail",
            f"[ -f {shlex.quote(str(self.env_file))} ] && . {shlex.quote(str(self.env_file))}",
            f"cd {shlex.quote(self.cwd_file.read_text().strip())}",
            code,
            f"pwd > {shlex.quote(str(self.cwd_file))}",
            f"export -p > {shlex.quote(str(self.env_file))}",
        ])
        result = subprocess.run(["bash", "-c", script], env=self.base_env, capture_output=True,
                                text=True, timeout=900)
        sys.stdout.write(result.stdout[-4000:])
        if result.returncode != 0:
            raise BlockFailed(f"exit status {result.returncode}\n{result.stdout[-3000:]}{result.stderr[-3000:]}")

    def shell_env(self):
        dump = subprocess.run(["bash", "-c", f". {shlex.quote(str(self.env_file))}; env -0"],
                              env=self.base_env, capture_output=True, check=True).stdout
        return dict(item.split("=", 1) for item in dump.decode().split("\0") if "=" in item)

    def run_python(self, code, name):
        if self.python is None:
            read_fd, write_fd = os.pipe()
            self.python = subprocess.Popen(
                [sys.executable, "-c", PYTHON_CHILD, str(write_fd)], stdin=subprocess.PIPE,
                text=True, env=self.shell_env(), cwd=self.cwd_file.read_text().strip(), pass_fds=(write_fd,))
            os.close(write_fd)
            self.answers = os.fdopen(read_fd)
        self.python.stdin.write(json.dumps({"name": name, "code": code}) + "\n")
        self.python.stdin.flush()
        line = self.answers.readline()
        if not line:
            raise BlockFailed(f"the Python interpreter ended (exit status {self.python.wait()})")
        answer = json.loads(line)
        if not answer["ok"]:
            raise BlockFailed(answer["error"])

    def close(self):
        if self.python is not None:
            self.python.stdin.close()
            if self.python.wait(timeout=300) != 0:
                raise BlockFailed(f"the Python interpreter exited with {self.python.returncode}")


class BlockFailed(Exception):
    pass


def check_packrec_lines(session, code):
    """In a block that is not run, each `packrec CMD ... --flag` line still names a command and
    flags that `packrec CMD --help` lists: a renamed flag cannot linger in a skipped example."""
    for line in code.splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        if len(words) < 2 or words[0] != "packrec":
            continue
        help_text = subprocess.run(
            ["bash", "-c", f". {shlex.quote(str(session.env_file))}; packrec {shlex.quote(words[1])} --help"],
            env=session.base_env, capture_output=True, text=True).stdout
        if not help_text:
            raise BlockFailed(f"`packrec {words[1]}` is not a command (in: {line.strip()})")
        for word in words[2:]:
            flag = word.split("=", 1)[0]
            if flag.startswith("--") and flag not in help_text:
                raise BlockFailed(f"`packrec {words[1]} --help` lists no {flag} (in: {line.strip()})")


def check_syntax(language, code, name):
    if language == "python":
        try:
            compile(code, name, "exec")
        except SyntaxError as error:
            raise BlockFailed(f"does not parse: {error}") from error
        return
    result = subprocess.run(["bash", "-n"], input=code, text=True, capture_output=True)
    if result.returncode != 0:
        raise BlockFailed(f"bash -n: {result.stderr}")


def run_document(root, work, doc):
    relative = doc.relative_to(root)
    folder = work / re.sub(r"[^A-Za-z0-9]", "_", str(relative))
    folder.mkdir(parents=True)
    blocks = blocks_of(doc)
    if not blocks:
        return 0, 0
    session = Session(root, folder, after_setup=relative != pathlib.Path("README.md"))
    ran = skipped = 0
    try:
        for language, code, line, kind, argument in blocks:
            name = f"{relative}:{line}"
            print(f"--- {name} ({language}{', ' + kind if kind else ''})", flush=True)
            if kind == "skip":
                if not argument:
                    raise BlockFailed("a skipped block needs a reason: <!-- doc-test skip: WHY -->")
                check_syntax(language, code, name)
                if language == "sh":
                    check_packrec_lines(session, code)
                skipped += 1
                continue
            run = session.run_python if language == "python" else session.run_shell
            if kind == "given":
                run(argument, name + " (given)")
            run(code, name)
            ran += 1
        session.close()
    except BlockFailed as failure:
        sys.exit(f"FAILED {name}:\n{code}\n{failure}")
    return ran, skipped


def main():
    root, work = pathlib.Path(sys.argv[1]).resolve(), pathlib.Path(sys.argv[2]).resolve()
    if work.exists():
        subprocess.run(["rm", "-rf", str(work)], check=True)
    work.mkdir(parents=True)
    docs = [root / d for d in sys.argv[3:]] or [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    total_ran = total_skipped = 0
    for doc in docs:
        ran, skipped = run_document(root, work, doc)
        print(f"{doc.relative_to(root)}: {ran} blocks ran, {skipped} parsed only", flush=True)
        total_ran, total_skipped = total_ran + ran, total_skipped + skipped
    print(f"{total_ran} blocks ran, {total_skipped} parsed only (each with its reason in the doc)")


if __name__ == "__main__":
    main()
