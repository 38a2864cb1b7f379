"""`python -m launch.<entry> ...` for tests, without paying Python's and the libraries' start-up
each time: `run` is `subprocess.run` for such a command.

A server process imports the third-party libraries every entry point imports (jax, flax, optax,
orbax, tensorboard, absl; about 1.7 s of each launch here) once, and forks one child per
command. The child runs the module as `python -m` does (runpy, as `__main__`, with the command's
arguments, working directory, environment and PYTHONPATH), so the entry point's own code, the
package's imports and the backend's start all happen in the child as in a fresh process: the
server imports no project module and starts no backend (importing jax starts none). The
variables a library reads at import (JAX_*, XLA_*, PYTHON* but PYTHONPATH, thread-pool sizes)
cannot change after the fork: each set of them has its own server, started with them. Tests that
signal or kill a launch, or find it by its command line (a child's is its server's), use
subprocess themselves.
"""
import atexit
import json
import os
import subprocess
import sys
import tempfile
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# read by a library at import or by the dynamic loader: a child cannot change them after the fork
_IMPORT_TIME_ENV = ("JAX", "XLA", "TF_", "PYTHON", "OPENBLAS", "OMP", "MKL", "LD_", "CUDA", "TPU")


def _import_time_env(env):
  return {k: v for k, v in env.items()
          if k.startswith(_IMPORT_TIME_ENV) and k != "PYTHONPATH"}


class _Command:
  """A command sent to the server: its pid once forked, its exit status once reaped."""

  def __init__(self):
    self.forked, self.done = threading.Event(), threading.Event()
    self.pid = self.rc = None


class _Server:
  """The server process and a reader thread that hands each finished command its exit status."""

  def __init__(self, env):
    env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    self.proc = subprocess.Popen([sys.executable, "-u", os.path.abspath(__file__)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                 cwd=ROOT, env=env)
    self.lock = threading.Lock()
    self.pending = {}  # request id -> _Command
    self.next_id = 0
    threading.Thread(target=self._read, daemon=True).start()
    atexit.register(self.proc.kill)

  def _read(self):
    for line in self.proc.stdout:
      msg = json.loads(line)
      with self.lock:
        command = self.pending[msg["id"]]
      if "pid" in msg:
        command.pid = msg["pid"]
        command.forked.set()
      else:
        command.rc = msg["rc"]
        command.done.set()
    with self.lock:  # the server is gone: no command will report again
      for command in self.pending.values():
        command.rc = -9 if command.rc is None else command.rc
        command.forked.set()
        command.done.set()

  def run(self, args, cwd, env, timeout):
    out = tempfile.NamedTemporaryFile("w+", prefix="launch-out-", delete=False)
    err = tempfile.NamedTemporaryFile("w+", prefix="launch-err-", delete=False)
    out.close(), err.close()
    with self.lock:
      self.next_id += 1
      key = self.next_id
      command = self.pending[key] = _Command()
      self.proc.stdin.write(json.dumps({"id": key, "args": args, "cwd": cwd, "env": env,
                                        "stdout": out.name, "stderr": err.name}) + "\n")
      self.proc.stdin.flush()
    try:
      done = command.done.wait(timeout)
      if not done:
        command.forked.wait()
        try:
          os.killpg(command.pid, 9)
        except (ProcessLookupError, TypeError):  # it ended meanwhile, or the server did
          pass
        command.done.wait(30)  # reaped: its output is complete
      with open(out.name) as f, open(err.name) as g:
        stdout, stderr = f.read(), g.read()
    finally:
      os.unlink(out.name), os.unlink(err.name)
      with self.lock:
        del self.pending[key]
    if not done:
      raise subprocess.TimeoutExpired(args, timeout, stdout, stderr)
    return subprocess.CompletedProcess(args, command.rc, stdout, stderr)


_servers = {}  # a command's import-time variables -> the server started with them
_servers_lock = threading.Lock()


def run(args, *, cwd=None, env=None, timeout=None):
  """`subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, ...)`, where
  args[0] is the module: a forked child of the server for the command's import-time
  variables."""
  env = dict(os.environ if env is None else env)
  key = tuple(sorted(_import_time_env(env).items()))
  with _servers_lock:
    if key not in _servers or _servers[key].proc.poll() is not None:
      _servers[key] = _Server(env)
    server = _servers[key]
  return server.run(list(args), os.path.abspath(cwd or os.getcwd()), env, timeout)


# The server -------------------------------------------------------------------------------------

def _child(request, base_path):
  """Becomes `python -m <module> <args>` in the request's directory, environment and files; never
  returns (the module's SystemExit, or an exception's traceback and status 1, end the process
  through the interpreter's normal exit, atexit handlers included)."""
  import runpy
  os.setpgid(0, 0)  # a timed-out command is killed with what it started, as a terminal would
  for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
    os.dup2(os.open(path, os.O_WRONLY | os.O_TRUNC), fd)
  os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
  # buffered as a fresh process's are (this server runs with -u)
  sys.stdin = open(0, closefd=False)
  sys.stdout = open(1, "w", closefd=False)
  sys.stderr = open(2, "w", buffering=1, errors="backslashreplace", closefd=False)
  os.chdir(request["cwd"])
  os.environ.clear()
  os.environ.update(request["env"])
  extra = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
  sys.path[:] = [request["cwd"], *map(os.path.abspath, extra), *base_path]
  module, *args = request["args"]
  sys.argv = [module, *args]  # runpy sets argv[0] to the module's file, as -m does
  runpy.run_module(module, run_name="__main__", alter_sys=True)
  raise SystemExit(0)


def _serve():
  import gc
  import selectors
  base_path = sys.path[1:]  # without this file's directory, which `python -m` would not add
  # what the entry points import from outside the project (the project's own modules are not
  # imported here: each child imports them, as a fresh process would)
  import numpy  # noqa: F401
  import jax  # noqa: F401
  import jax.numpy  # noqa: F401
  import flax.linen  # noqa: F401
  import optax  # noqa: F401
  import orbax.checkpoint  # noqa: F401
  from absl import app, flags, logging  # noqa: F401
  from tensorboard.plugins.hparams import metadata  # noqa: F401
  from tensorboard.summary.writer import event_file_writer  # noqa: F401
  # The libraries' objects are never garbage: kept out of every collection, a child's collections
  # and its exit's skip them (a normal exit took 0.43 s, 0.13 s frozen), and its pages stay shared
  gc.collect()
  gc.freeze()
  children = {}  # pid -> request id
  reply = lambda msg: print(json.dumps(msg), flush=True)
  select = selectors.DefaultSelector()
  select.register(0, selectors.EVENT_READ)
  buffered, open_input = b"", True
  while open_input or children:
    if open_input and select.select(timeout=0.02):
      data = os.read(0, 1 << 16)
      open_input = bool(data)  # the tests' process is gone: finish the commands running
      *lines, buffered = (buffered + data).split(b"\n")
      for line in lines:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
          _child(request, base_path)
        try:
          os.setpgid(pid, pid)  # as the child does: whichever runs first
        except OSError:
          pass
        children[pid] = request["id"]
        reply({"id": request["id"], "pid": pid})
    while children:
      pid, status = os.waitpid(-1, os.WNOHANG if open_input else 0)
      if pid == 0:
        break
      reply({"id": children.pop(pid), "rc": os.waitstatus_to_exitcode(status)})


if __name__ == "__main__":
  _serve()
