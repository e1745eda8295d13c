"""ed.plot: every plot draws something readable and saves it as a PNG.

One small MCMC run and one small VI fit of a 2-parameter regression serve
every test; each saved PNG is read back and must have a plausible size and
non-blank content.
"""

import copy
import os
import subprocess
import sys

import numpy as np
import pytest

import edward_lite as ed

plt = pytest.importorskip("matplotlib.pyplot")
az = pytest.importorskip("arviz")
mpimg = pytest.importorskip("matplotlib.image")


def line(x):
  a = ed.Normal(0., 3., name="a")
  b = ed.Normal(0., 3., name="b")
  return ed.Normal(a + b * x, 1., name="y")


X = np.linspace(-1., 1., 20).astype(np.float32)
Y = (0.5 + 1.5 * X + np.random.default_rng(0).normal(size=20)).astype(np.float32)


@pytest.fixture(scope="module")
def posterior():
  return ed.mcmc.sample(line, X, observed={"y": Y}, chains=2, warmup=100, draws=100, seed=0,
                        progress=False)


@pytest.fixture(scope="module")
def fit():
  return ed.vi.fit(line, X, observed={"y": Y}, steps=300, seed=0, progress=False)


def check_png(fig, path, min_width=600, min_height=350):
  """The figure was returned and saved; the PNG is big enough and not blank."""
  assert isinstance(fig, plt.Figure)
  assert fig.get_suptitle() or any(ax.get_title() for ax in fig.axes)
  assert os.path.exists(path)
  pixels = mpimg.imread(path)[..., :3]
  height, width = pixels.shape[:2]
  assert min_width <= width <= 2500 and min_height <= height <= 2500, pixels.shape
  assert pixels.var() > 5e-3, pixels.var()  # not one colour
  assert np.mean(pixels.min(-1) < 0.5) > 0.003  # dark ink: lines, labels
  plt.close(fig)
  return pixels


def marker_sets(ax):
  """The (x, y) points of each line and each scatter of ``ax`` (ArviZ 0.2x
  marks divergences with a line of markers, 1.x with a scatter per chain)."""
  arrays = ([line.get_xydata() for line in ax.get_lines()] +
            [np.asarray(points.get_offsets()) for points in ax.collections])
  return [{(float(x), float(y)) for x, y in xy} for xy in arrays if np.ndim(xy) == 2]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["trace", "rank"])
def test_trace_and_rank(posterior, tmp_path, kind):
  path = tmp_path / f"{kind}.png"
  fig = ed.plot.trace(posterior, kind=kind, path=path)
  check_png(fig, path, min_width=900)
  assert len(fig.axes) == (4 if kind == "trace" else 2)  # a and b
  assert all(ax.get_xlabel() and ax.get_ylabel() for ax in fig.axes)


def test_trace_of_some_variables(posterior, tmp_path):
  fig = ed.plot.trace(posterior, var_names=["b"], path=tmp_path / "b.png")
  assert [ax.get_title() for ax in fig.axes] == ["b", "b"]
  plt.close(fig)


def test_pair_marks_the_divergent_transitions(posterior, tmp_path):
  idata = posterior.to_arviz(log_likelihood=False, posterior_predictive=False)
  assert idata.sample_stats["diverging"].dtype == bool
  path = tmp_path / "pair.png"
  fig = ed.plot.pair(posterior, path=path)
  check_png(fig, path)
  assert any(ax.get_xlabel() == "a" and ax.get_ylabel() == "b" for ax in fig.axes)
  # With divergent transitions (made up here) they are drawn over the draws.
  diverging = np.zeros_like(posterior.sample_stats["diverging"])
  diverging[::20] = True
  marked = copy.copy(posterior)
  marked.sample_stats = {**posterior.sample_stats, "diverging": diverging}
  fig = ed.plot.pair(marked)
  divergent = {(float(a), float(b)) for a, b in zip(posterior.draws["a"][diverging],
                                                   posterior.draws["b"][diverging])}
  drawn = set()
  for points in (p for ax in fig.axes for p in marker_sets(ax)):
    if points and points <= divergent:  # an artist that draws divergent transitions only
      drawn |= points
  assert drawn == divergent and len(divergent) == 10
  assert "10 divergent" in fig.get_suptitle()
  plt.close(fig)


def test_pair_of_one_quantity_is_a_clear_error(posterior):
  with pytest.raises(ValueError, match="pair needs at least two scalar quantities to pair; a hold 1"):
    ed.plot.pair(posterior, var_names=["a"])


def test_plots_of_results_loaded_without_their_model(posterior, fit, tmp_path):
  posterior.save(tmp_path / "post.npz")
  fit.save(tmp_path / "fit.npz")
  loaded, loaded_fit = ed.load(tmp_path / "post.npz"), ed.load(tmp_path / "fit.npz")
  check_png(ed.plot.trace(loaded, path=tmp_path / "t.png"), tmp_path / "t.png")
  check_png(ed.plot.pair(loaded, path=tmp_path / "p.png"), tmp_path / "p.png")
  check_png(ed.plot.elbo(loaded_fit, path=tmp_path / "e.png"), tmp_path / "e.png")
  with pytest.raises(ValueError, match="loaded without its model"):
    ed.plot.khat(loaded_fit)


def test_elbo(fit, tmp_path):
  path = tmp_path / "elbo.png"
  fig = ed.plot.elbo(fit, path=path)
  check_png(fig, path)
  ax = fig.axes[0]
  assert ax.get_xlabel() == "optimization step" and "ELBO" in ax.get_ylabel()
  low, high = ax.get_ylim()
  assert low < np.mean(fit.elbo[-30:]) < high
  # The y-range fits the converged part: the final ELBO is not squeezed
  # against the top by first steps far below (a fit started far from the
  # posterior; the default start is near it, so the trace is made here).
  elbo = -30. - 200. * np.exp(-np.arange(1000) / 30.)
  elbo += np.random.default_rng(0).normal(0., 0.1, 1000)
  low, high = ed.plot.elbo(elbo, path=tmp_path / "far.png").axes[0].get_ylim()
  final = np.mean(elbo[-30:])
  assert np.min(elbo) < low and low < final < high
  assert (high - final) < 0.2 * (high - low)


def test_elbo_marks_skipped_steps(tmp_path):
  values = -10. - 50. * np.exp(-np.arange(400) / 30.)
  values[[50, 51, 300]] = np.nan
  fig = ed.plot.elbo(values, path=tmp_path / "elbo.png")
  labels = fig.axes[0].get_legend_handles_labels()[1]
  assert "3 skipped steps (non-finite)" in labels
  check_png(fig, tmp_path / "elbo.png")


def test_khat_of_a_vi_fit(fit, tmp_path):
  path = tmp_path / "khat_vi.png"
  fig = ed.plot.khat(fit, path=path)
  check_png(fig, path)
  assert f"{fit.k_hat:.2f}" in fig.get_suptitle()
  left = fig.axes[0]
  assert 0.7 in [line.get_ydata()[0] for line in left.get_lines()]  # the threshold


@pytest.mark.slow
def test_khat_of_pointwise_loo(posterior, tmp_path):
  path = tmp_path / "khat_loo.png"
  fig = ed.plot.khat(posterior, path=path)
  check_png(fig, path)
  assert "of 20 observations" in fig.get_suptitle()
  loo = az.loo(posterior.to_arviz(posterior_predictive=False), pointwise=True)
  fig = ed.plot.khat(loo)
  assert fig.axes[0].get_ylabel() == "Pareto k-hat"
  plt.close(fig)


def test_wrong_inputs_are_refused(fit):
  with pytest.raises(TypeError, match="ed.plot.elbo"):
    ed.plot.trace(fit)
  with pytest.raises(ValueError, match="'trace' or 'rank'"):
    ed.plot.trace(fit.target, kind="ranks")
  with pytest.raises(TypeError, match="MCMCResult"):
    ed.plot.pair({"a": np.zeros(3)})


def test_missing_matplotlib_names_the_extra(monkeypatch):
  monkeypatch.setitem(sys.modules, "matplotlib", None)
  with pytest.raises(ImportError, match=r"pip install 'edward_lite\[plot\]'"):
    ed.plot.elbo(np.zeros(5))


@pytest.mark.slow
def test_import_edward_lite_leaves_plot_unloaded():
  code = ("import sys, edward_lite as ed\n"
          "assert 'edward_lite.analysis.plot' not in sys.modules\n"
          "assert callable(ed.plot.trace) and 'edward_lite.analysis.plot' in sys.modules\n")
  result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  assert result.returncode == 0, result.stderr[-2000:]
