"""ed.graph: the model's random variables and their dependencies (issue 30, item 4)."""

import shutil
import sys

import numpy as np
import pytest
import tensorflow as tf

import edward_lite as ed
from edward_lite.analysis.graph import Node

SIGMA = np.array([15., 10., 16., 11., 9., 11., 10., 18.], np.float32)
Y = np.array([28., 8., -3., 7., -1., 1., 18., 12.], np.float32)


def eight_schools(sigma):
  mu = ed.Normal(0., 5., name="mu")
  tau = ed.HalfCauchy(0., 5., name="tau")
  theta_tilde = ed.Normal(tf.zeros(8), 1., name="theta_tilde")
  theta = ed.Deterministic(mu + tau * theta_tilde, name="theta")
  return ed.Normal(theta, sigma, name="y")


def regression(x):
  a = ed.Normal(0., 10., name="a")
  b = ed.Normal(0., 10., name="b")
  sigma = ed.HalfNormal(1., name="sigma")
  z = ed.Normal(0., 1., name="z")  # in the program, used by nothing
  del z
  return ed.Normal(a + b * x, sigma, name="y")


def test_nodes_and_edges_of_eight_schools():
  structure = ed.model_graph(eight_schools, SIGMA, observed={"y": Y})
  assert structure.nodes == (Node("mu", "Normal", (), "latent"),
                             Node("tau", "HalfCauchy", (), "latent"),
                             Node("theta_tilde", "Normal", (8,), "latent"),
                             Node("theta", "Deterministic", (8,), "deterministic"),
                             Node("y", "Normal", (8,), "observed"))
  # y depends on the latents through theta only; data (sigma) is no node.
  assert structure.edges == (("mu", "theta"), ("tau", "theta"), ("theta_tilde", "theta"),
                             ("theta", "y"))


def test_edges_follow_the_computation_not_the_program_order():
  x = np.linspace(-1., 1., 5).astype(np.float32)
  structure = ed.model_graph(regression, x, observed={"y": x})
  assert [n.name for n in structure.nodes] == ["a", "b", "sigma", "z", "y"]
  assert structure.edges == (("a", "y"), ("b", "y"), ("sigma", "y"))
  with pytest.raises(ValueError, match=r"observed names \['w'\] are not random variables"):
    ed.model_graph(regression, x, observed={"w": x})


def test_graph_draws_observed_shaded_and_deterministic_boxed():
  pytest.importorskip("graphviz")
  dot = ed.graph(eight_schools, SIGMA, observed={"y": Y})
  source = dot.source
  assert 'y [label="y\nNormal\n8" fillcolor=lightgray shape=ellipse style=filled]' in source
  assert 'theta [label="theta\nDeterministic\n8" shape=box]' in source
  assert 'mu [label="mu\nNormal\nscalar" shape=ellipse]' in source
  assert source.count("->") == 4 and "theta -> y" in source


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot program is not installed")
def test_graph_renders_to_a_file(tmp_path):
  pytest.importorskip("graphviz")
  path = ed.graph(eight_schools, SIGMA, observed={"y": Y}).render(
      tmp_path / "eight_schools", format="svg")
  assert open(path).read().count("<g id=\"node") == 5


def test_without_graphviz_the_error_names_the_package_and_dot(monkeypatch):
  monkeypatch.setitem(sys.modules, "graphviz", None)
  with pytest.raises(ImportError, match=r"graphviz.*edward_lite\[graph\].*apt install graphviz"):
    ed.graph(eight_schools, SIGMA, observed={"y": Y})
