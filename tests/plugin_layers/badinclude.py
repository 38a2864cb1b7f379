"""A plugin whose class includes another plugin's (examples.clock's roots_of_unity): refused
unless that plugin was loaded first."""
from ssm_bench import theory

theory.register_class("clock_and_more", "roots of unity and more", "a conjecture",
                      includes={"roots_of_unity": "every m-th root of unity is one of its values"})
