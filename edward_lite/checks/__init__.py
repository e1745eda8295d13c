"""Checks at the boundary: call arguments, observed values against their
support, program structure and control flow, and the words for a program
that fails.  (Which term of a density is not finite, and why, runs the
model: ``model/nonfinite.py``.)"""
