"""Checks at the boundary: call arguments, observed values against their
support, program structure and control flow, and the words for a program or
density that fails (which term is not finite, and why)."""
