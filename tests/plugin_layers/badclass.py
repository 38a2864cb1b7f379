"""A plugin whose theory class cannot be registered: a name with a capital and a dash."""
from ssm_bench import theory

theory.register_class("My-Class", "a researcher's class", "a conjecture",
                      step=lambda group, subgroup, param: subgroup)
