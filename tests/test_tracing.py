"""Tests of the tracer stack: ed.trace, ed.traceable, ed.get_next_tracer, ed.tape."""

import os
import threading

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import edward_lite as ed  # noqa: E402

tfd = tfp.distributions


def recorder(label, log):
  """A tracer that logs (label, rv name) and forwards to the next tracer."""

  def tracer(fn, *args, **kwargs):
    log.append((label, kwargs.get("name")))
    return ed.traceable(fn)(*args, **kwargs)

  return tracer


@pytest.fixture(autouse=True)
def _seed():
  tf.random.set_seed(0)


def test_innermost_tracer_called_first():
  log = []
  with ed.trace(recorder("outer", log)):
    with ed.trace(recorder("inner", log)):
      x = ed.Normal(0., 1., name="x")
    y = ed.Normal(0., 1., name="y")
  ed.Normal(0., 1., name="z")  # no tracer left
  assert log == [("inner", "x"), ("outer", "x"), ("outer", "y")]
  assert isinstance(x, ed.RandomVariable) and isinstance(y, ed.RandomVariable)


def test_forwarding_tracer_reaches_outer_with_changed_arguments():
  seen = []

  def outer(fn, *args, **kwargs):
    seen.append(dict(kwargs))
    return ed.traceable(fn)(*args, **kwargs)

  def inner(fn, *args, **kwargs):
    kwargs["value"] = 3.
    return ed.traceable(fn)(*args, **kwargs)

  with ed.trace(outer):
    with ed.trace(inner):
      x = ed.Normal(0., 1., name="x")
  assert len(seen) == 1
  assert seen[0]["name"] == "x" and seen[0]["value"] == 3.
  assert x.numpy() == 3.


def test_direct_call_stops_the_chain():
  log = []

  def stopper(fn, *args, **kwargs):
    log.append(("stopper", kwargs.get("name")))
    kwargs["value"] = -1.
    return fn(*args, **kwargs)

  with ed.trace(recorder("outer", log)):
    with ed.trace(stopper):
      x = ed.Normal(0., 1., name="x")
  assert log == [("stopper", "x")]  # outer never saw it
  assert isinstance(x, ed.RandomVariable) and x.numpy() == -1.


def test_tracer_may_return_something_else():
  log = []
  with ed.trace(recorder("outer", log)):
    with ed.trace(lambda fn, *a, **k: "replaced"):
      out = ed.Normal(0., 1., name="x")
  assert out == "replaced"
  assert log == []


def test_tracer_is_off_the_stack_while_it_runs():
  log, nexts = [], []
  outer = recorder("outer", log)

  def inner(fn, *args, **kwargs):
    log.append(("inner", kwargs.get("name")))
    if kwargs.get("name") == "x":
      with ed.get_next_tracer() as nxt:
        nexts.append(nxt)
      # A traceable call made inside the tracer goes to the next tracer out.
      ed.Normal(0., 1., name="made_inside")
    return ed.traceable(fn)(*args, **kwargs)

  with ed.trace(outer):
    with ed.trace(inner):
      ed.Normal(0., 1., name="x")
      with ed.get_next_tracer() as top:
        assert top is inner
  assert nexts == [outer]
  assert log == [("inner", "x"), ("outer", "made_inside"), ("outer", "x")]


def test_get_next_tracer_at_bottom_calls_function():
  with ed.get_next_tracer() as bottom:
    assert bottom(lambda a, b=0: a + b, 1, b=2) == 3
    with ed.get_next_tracer() as again:  # the bottom tracer is never removed
      assert again is bottom


def test_traceable_arbitrary_function():
  def add(a, b):
    """Adds."""
    return a + b

  traced_add = ed.traceable(add)
  assert traced_add.__name__ == "add" and traced_add.__doc__ == "Adds."
  assert traced_add(2, 3) == 5

  def double_args(fn, *args, **kwargs):
    return ed.traceable(fn)(*[2 * a for a in args], **kwargs)

  with ed.trace(double_args):
    assert traced_add(2, 3) == 10
  assert traced_add(2, 3) == 5


def test_stack_popped_on_exception():
  log = []
  with pytest.raises(RuntimeError, match="boom"):
    with ed.trace(recorder("t", log)):
      ed.Normal(0., 1., name="before")
      raise RuntimeError("boom")
  ed.Normal(0., 1., name="after")
  assert log == [("t", "before")]
  with ed.get_next_tracer() as nxt:  # only the bottom tracer is left
    assert nxt(lambda: "bottom") == "bottom"


def test_exception_in_inner_block_keeps_outer_tracer():
  log = []
  with ed.trace(recorder("outer", log)):
    with pytest.raises(KeyError):
      with ed.trace(recorder("inner", log)):
        raise KeyError("x")
    ed.Normal(0., 1., name="y")
  assert log == [("outer", "y")]


def test_tracer_restored_after_it_raises():
  calls = []

  def flaky(fn, *args, **kwargs):
    calls.append(kwargs.get("name"))
    if kwargs.get("name") == "bad":
      raise ValueError("refused 'bad'")
    return ed.traceable(fn)(*args, **kwargs)

  with ed.trace(flaky):
    with pytest.raises(ValueError, match="'bad'"):
      ed.Normal(0., 1., name="bad")
    ed.Normal(0., 1., name="good")  # the tracer is back on the stack
  assert calls == ["bad", "good"]


def test_trace_rejects_non_callable():
  with pytest.raises(TypeError, match="callable"):
    with ed.trace(42):
      pass


def test_tracer_stack_is_thread_local():
  main_ready, other_done = threading.Event(), threading.Event()
  results, errors = {}, []

  def other_thread():
    try:
      main_ready.wait(10)
      with ed.tape() as rvs:
        ed.Normal(0., 1., name="from_other")
      results["other"] = list(rvs)
    except Exception as e:  # pylint: disable=broad-except
      errors.append(e)
    finally:
      other_done.set()

  thread = threading.Thread(target=other_thread)
  thread.start()
  with ed.tape() as rvs:
    ed.Normal(0., 1., name="before")
    main_ready.set()  # the other thread creates its RV while our tape is active
    assert other_done.wait(30)
    ed.Normal(0., 1., name="after")
  thread.join(30)
  assert not errors
  assert list(rvs) == ["before", "after"]
  assert results["other"] == ["from_other"]


def test_tape_records_named_random_variables_in_order():
  with ed.tape() as rvs:
    a = ed.Normal(0., 1., name="a")
    ed.Normal(0., 1.)  # unnamed: skipped
    c = ed.Gamma(2., 1., sample_shape=3, name="c")
    b = ed.Categorical(logits=[0., 1.], name="b")
    ed.traceable(lambda: 5)()  # not a random variable
  ed.Normal(0., 1., name="outside")
  assert list(rvs) == ["a", "c", "b"]
  assert rvs["a"] is a and rvs["c"] is c and rvs["b"] is b
  assert rvs["c"].shape == tf.TensorShape([3])


def test_nested_tapes_both_record():
  with ed.tape() as outer:
    ed.Normal(0., 1., name="o1")
    with ed.tape() as inner:
      ed.Normal(0., 1., name="i1")
    ed.Normal(0., 1., name="o2")
  assert list(inner) == ["i1"]
  assert list(outer) == ["o1", "i1", "o2"]


def test_tape_duplicate_name_raises_value_error():
  with pytest.raises(ValueError, match="'dup'"):
    with ed.tape():
      ed.Normal(0., 1., name="dup")
      ed.Normal(1., 1., name="dup")
  # Separate tapes may reuse a name.
  for _ in range(2):
    with ed.tape() as rvs:
      ed.Normal(0., 1., name="dup")
    assert list(rvs) == ["dup"]


def test_legacy_aliases():
  assert ed.interception is ed.trace
  assert ed.interceptable is ed.traceable
  assert ed.get_next_interceptor is ed.get_next_tracer

  log = []
  double = ed.interceptable(lambda v: 2 * v)
  outer = recorder("outer", log)

  def inner(fn, *args, **kwargs):
    with ed.get_next_interceptor() as nxt:
      log.append(("next_is_outer", nxt is outer))
    return ed.interceptable(fn)(*args, **kwargs)

  with ed.interception(outer):
    with ed.interception(inner):
      assert double(4) == 8
      x = ed.Normal(0., 1., name="x")
  assert log == [("next_is_outer", True), ("outer", None),
                 ("next_is_outer", True), ("outer", "x")]
  assert isinstance(x, ed.RandomVariable)


def test_make_value_setter_as_tracer():
  def model():
    x = ed.Normal(0., 1., name="x")
    y = ed.Normal(x, 0.5, sample_shape=2, name="y")
    w = ed.Normal(10., 1e-3, name="w")  # not set: drawn from its distribution
    return x, y, w

  with ed.trace(ed.make_value_setter(x=1.5, y=np.array([0.25, -0.5], np.float32))):
    x, y, w = model()
  assert isinstance(x, ed.RandomVariable) and x.numpy() == 1.5
  np.testing.assert_array_equal(y.numpy(), [0.25, -0.5])
  assert y.distribution.loc.numpy() == 1.5  # downstream sees the set value
  np.testing.assert_allclose(
      tf.reduce_sum(y.distribution.log_prob(y)).numpy(),
      tfd.Normal(1.5, 0.5).log_prob([0.25, -0.5]).numpy().sum(), rtol=1e-6)
  assert abs(w.numpy() - 10.) < 0.01


def test_make_value_setter_with_tape_outside():
  with ed.tape() as rvs:
    with ed.trace(ed.make_value_setter(x=2.)):
      ed.Normal(0., 1., name="x")
  assert list(rvs) == ["x"] and rvs["x"].numpy() == 2.


def test_tape_records_what_an_inner_tracer_returns_but_not_interventions():
  """As in Edward2, the tape records the output of every named traceable call,
  also when a tracer inside it returns something else; ed.do removes x."""

  def double(fn, *args, **kwargs):
    return 2. * ed.traceable(fn)(*args, **kwargs)

  def model():
    x = ed.Normal(0., 1., value=1.5, name="x")
    return ed.Normal(x, 1., value=0.5, name="y")

  with ed.trace(double):
    with ed.tape() as recorded:
      model()
  assert list(recorded) == ["x", "y"]
  assert float(recorded["x"]) == 3.0 and float(recorded["y"]) == 1.0

  with ed.do(x=2.):
    with ed.tape() as recorded:
      model()
  assert list(recorded) == ["y"]
