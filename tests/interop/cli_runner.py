"""What the interop checks share to drive the packrec CLI: a fresh work directory and a run
function that fails loudly (the command, its exit code and its output) unless told not to."""
import os
import shutil
import subprocess


def start(cli, work):
    """Empties `work` and returns run(*args, ok=True) for `cli`: the CompletedProcess, text
    output captured; with ok, an AssertionError when the command fails."""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)

    def run(*args, ok=True):
        result = subprocess.run([cli, *args], capture_output=True, text=True)
        if ok and result.returncode != 0:
            raise AssertionError(f"packrec {' '.join(args)} failed ({result.returncode}):\n"
                                 f"{result.stdout}{result.stderr}")
        return result

    return run
