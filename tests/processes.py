"""Finding processes by their command line: for tests that check nothing was left running."""
import glob
import time


def running_with(needle: str, wait_s: float = 0.0) -> list[str]:
  """Pids of live processes whose command line contains `needle`, after waiting up to wait_s
  for there to be none (Linux /proc; a process gone meanwhile is skipped)."""
  deadline = time.time() + wait_s
  while True:
    pids = []
    for path in glob.glob("/proc/[0-9]*/cmdline"):
      try:
        with open(path, "rb") as f:
          if needle.encode() in f.read():
            pids.append(path.split("/")[2])
      except OSError:
        pass
    if not pids or time.time() >= deadline:
      return pids
    time.sleep(0.2)
