"""What test_launcher.py checks that a launched module sees: `python -m launcher_probe <mode>`."""
import gc
import json
import os
import sys
import time

if __name__ == "__main__":
  mode = sys.argv[1]
  if mode == "report":
    jax = sys.modules.get("jax")
    print(json.dumps({"argv": sys.argv[1:], "file": os.path.basename(sys.argv[0]),
                      "cwd": os.getcwd(), "path0": sys.path[0], "probe": os.environ.get("PROBE"),
                      "jax_imported": jax is not None,
                      "jax_platforms": jax and jax.config.jax_platforms,
                      "backends": bool(jax and jax._src.xla_bridge._backends),
                      "frozen": gc.get_freeze_count(), "gc": gc.isenabled()}))
    print("to stderr", file=sys.stderr)
    sys.exit(int(sys.argv[2]))
  if mode == "raise":
    raise ValueError("probe failed")
  if mode == "hang":
    with open(sys.argv[2], "w") as f:
      f.write(str(os.getpid()))
    print("hanging", flush=True)
    time.sleep(600)
