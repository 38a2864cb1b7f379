"""A researcher's class with no theorem of its own that includes complex_diagonal (so the signed,
unit-modulus and non-negative classes through it): what it tracks comes from those, as `≤ k`."""
from ssm_bench import theory

theory.register_class(
    "decay_and_phase_plus", "complex diagonal transitions and more", "none proven yet",
    includes={"complex_diagonal": "its diagonal part is any complex diagonal"})
