# Before anything else an entry point imports (jax takes seconds): a Ctrl-C from the first
# line on stops the command with one line (launch/interrupts.py).
from launch import interrupts as _interrupts

_interrupts.install()
