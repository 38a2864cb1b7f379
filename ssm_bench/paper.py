"""Facts about the primary paper's Table 2 grid that the library and the launchers share."""
from __future__ import annotations

TABLE2_GROUPS = ("C2", "C6", "C24", "C60", "C2xC4", "C2xC30", "S3", "A4", "A5")
TABLE2_MODELS = ("mamba", "negmamba", "simple_aussm", "aussm", "rnn")
TABLE2_DEPTHS = (1, 2)
