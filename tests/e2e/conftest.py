"""Shared fixtures for cube's end-to-end tests.

The tests drive the real `cube` binary (and real kubectl, openssl, curl) the
way a user would, and assert on what a user would see.

Fixtures:
  cube  -- path of the binary under test: $CUBE_BIN, else /work/main/build/cube
  tmp   -- a fresh, empty directory for this test (a pathlib.Path)
  run   -- run(*argv, check=True, env=None, input=None, timeout=60) runs a
           command and returns a subprocess.CompletedProcess with text stdout
           and stderr, e.g. run(cube, "pki", "init", "--dir", tmp / "c")
           or run("openssl", "verify", ...).
  show  -- show(proc) formats a CompletedProcess (command, exit status,
           stdout, stderr) for assertion messages.

Each command runs with a clean, per-test environment: HOME points into the
test's tmp dir, KUBECONFIG and CUBE_CLOCK_OFFSET are unset, and `env` (a
dict) is merged on top of that.
"""

import os
import shlex
import signal
import subprocess

import pytest

DEFAULT_CUBE = "/work/main/build/cube"

# Variables from the caller's shell that would change what cube or kubectl
# do; each test starts without them.
_SCRUBBED_ENV = ("KUBECONFIG", "CUBE_CLOCK_OFFSET")


@pytest.fixture(scope="session")
def cube():
    """Path of the cube binary under test."""
    path = os.environ.get("CUBE_BIN") or DEFAULT_CUBE
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        pytest.fail(f"cube binary not found or not executable: {path} "
                    "(build it, or set CUBE_BIN)", pytrace=False)
    return path


@pytest.fixture
def tmp(tmp_path):
    """A fresh, empty directory for this test."""
    work = tmp_path / "work"
    work.mkdir()
    return work


def _describe(proc):
    return (f"$ {shlex.join(proc.args)}\n"
            f"exit status: {proc.returncode}\n"
            f"--- stdout ---\n{proc.stdout}"
            f"--- stderr ---\n{proc.stderr}")


@pytest.fixture
def run(tmp_path):
    """run(*argv, check=True, env=None, input=None, timeout=60).

    check=True fails the test unless the command exits 0; check=False
    returns whatever happened. A command killed by a signal (a crash)
    always fails the test.
    """
    home = tmp_path / "home"
    home.mkdir()
    base_env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV}
    base_env.update(HOME=str(home), LC_ALL="C")

    def _run(*argv, check=True, env=None, input=None, timeout=60):
        args = [str(a) for a in argv]
        full_env = dict(base_env)
        if env:
            full_env.update({k: str(v) for k, v in env.items()})
        try:
            proc = subprocess.run(args, env=full_env, input=input, text=True,
                                  capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"$ {shlex.join(args)}\ntimed out after {timeout}s\n"
                        f"--- stdout ---\n{e.stdout}\n--- stderr ---\n{e.stderr}")
        if proc.returncode < 0:
            try:
                name = signal.Signals(-proc.returncode).name
            except ValueError:
                name = f"signal {-proc.returncode}"
            pytest.fail(f"command crashed with {name}\n{_describe(proc)}")
        if check and proc.returncode != 0:
            pytest.fail(f"command failed\n{_describe(proc)}")
        return proc

    return _run


@pytest.fixture
def show():
    """show(proc) -> the command line, exit status and output, for
    assertion messages."""
    return _describe
