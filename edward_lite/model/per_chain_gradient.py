"""One chain's gradient, written so that vectorizing it over chains is fast.

The target differentiates one chain's program and then vectorizes the
result over chains (``tf.vectorized_map``, i.e. ``pfor``).  How a gradient
is written decides the batched program that ``pfor`` makes of it.

The common data-heavy case is a matrix product with the data on the left,
``l = X w`` (``tf.linalg.matvec(X, w)``, ``X @ w[:, None]``), ``X: [N, K]``
data, ``w: [K, 1]`` one chain's weights.  TensorFlow's gradient of ``w`` is

    dw = X^T g            (MatMul(X, g, transpose_a=True), g: [N, 1]),

which ``pfor`` batches by putting the chains in the *columns*:
``X^T [g_1 ... g_C]`` with a ``[K, C]`` output.  Written instead as

    dw = (g^T X)^T        (transpose(MatMul(g, X, transpose_a=True))),

``pfor`` puts the chains in the *rows*: ``[g_1 ... g_C]^T X`` with a
``[C, K]`` output, the layout of JAX's ``vmap(grad(...))``.  Under XLA on CPU
which is faster depends on the number of chains: with the whole program
around it, the row form is faster at 2-8 chains and slower from 16 or 64
chains on, where transposing the ``[N, C]`` forward product costs more than
it saves (``benchmarks/matmul_gradient.py``, RESULTS section 13).
``vectorized_value_and_gradient`` therefore uses the row form
up to ``ROW_FORM_MAX_CHAINS`` chains and TensorFlow's own above; both are the
same product, summed in another order.

The row form evaluates ``fn`` with every ``MatMul`` it creates marked for
the other gradient (``Graph.gradient_override_map``) and differentiates with
``tf.gradients``, which honours the mark (the eager ``GradientTape`` looks
gradients up by op type only).  It needs graph mode, as inside
``tf.vectorized_map``; called eagerly, the tape is used.

Programs with loops.  A program whose loop inputs differ per chain
(``tf.scan``, ``tf.while_loop``, ``tfd.HiddenMarkovModel``, ...) cannot be
vectorized that way: TensorFlow's vectorizer cannot batch the gradient of a
loop, and the gradient of the vectorized loop does not compile with XLA.
``batched_value_and_gradient(..., loops=True)`` then evaluates the chains
one after another with ``tf.map_fn`` inside the same compiled program: the
cost grows linearly with the number of chains.  (Differentiating the
vectorized program instead puts reductions in the gradient whose axes XLA
treats as compile-time constants, so every new state value would recompile:
RESULTS section 1.)

``log_density`` attaches these per-chain gradients to a ``[C]`` value with
``tf.custom_gradient``: it is how every target (``Target``, each replica of
a ``ShardedTarget``) exposes a differentiable log density.

Parameters read by every example.  ``summed_parameter_gradient`` gives
``sum_i d f(x_i) / d theta`` for ``tf.Variable``s ``theta`` that all examples
read (a variational program's weights), each term taken inside the
vectorized program as above: the gradient of the vectorized program would
again recompile under XLA for every chunk.
"""

import tensorflow as tf

__all__ = ["value_and_gradient", "vectorized_value_and_gradient", "batched_value_and_gradient",
           "log_density", "summed_parameter_gradient", "ROW_FORM_MAX_CHAINS"]

ROW_FORM_MAX_CHAINS = 8

_MATMUL_GRADIENT = "EdwardLiteRowBatchedMatMul"


@tf.RegisterGradient(_MATMUL_GRADIENT)
def _matmul_gradient(op, grad):
  """``MatMul``'s gradient with every product of ``grad`` on the left.

  For ``c = op(a) op(b)``: ``da`` and ``db`` as TensorFlow's own gradient,
  except ``db = a^T g`` (neither operand transposed), computed as
  ``(g^T a)^T``.
  """
  t_a, t_b = op.get_attr("transpose_a"), op.get_attr("transpose_b")
  a, b = tf.math.conj(op.inputs[0]), tf.math.conj(op.inputs[1])
  matmul = tf.raw_ops.MatMul
  if not t_a and not t_b:
    return (matmul(a=grad, b=b, transpose_b=True),
            tf.transpose(matmul(a=grad, b=a, transpose_a=True)))
  if not t_a and t_b:
    return matmul(a=grad, b=b), matmul(a=grad, b=a, transpose_a=True)
  if t_a and not t_b:
    return matmul(a=b, b=grad, transpose_b=True), matmul(a=a, b=grad)
  return (matmul(a=b, b=grad, transpose_a=True, transpose_b=True),
          matmul(a=grad, b=a, transpose_a=True, transpose_b=True))


def vectorized_value_and_gradient(fn, state):
  """One chain's value and gradient, vectorized over the chains of ``state``.

  Args:
    fn: ``state -> scalar`` Tensor, one chain's log density.
    state: dict ``name -> [C, ...]`` Tensor.

  Returns:
    ``(values [C], gradients)``, gradients a dict like ``state``.
  """
  chains = tf.compat.dimension_value(next(iter(state.values())).shape[0])
  rows = chains is not None and chains <= ROW_FORM_MAX_CHAINS
  return tf.vectorized_map(lambda s: value_and_gradient(fn, s, rows=rows), state)


def batched_value_and_gradient(fn, state, loops=False):
  """``(values [C], gradients dict)`` of one chain's ``fn`` over the chains of
  ``state``: vectorized, or chain by chain when the program has ``loops``
  (see the module docstring)."""
  if not loops:
    return vectorized_value_and_gradient(fn, state)
  dtype = next(iter(state.values())).dtype
  signature = (dtype, {n: tf.TensorSpec(None, v.dtype) for n, v in state.items()})
  return tf.map_fn(lambda s: value_and_gradient(fn, s), state, fn_output_signature=signature)


def log_density(fn, state, loops=False, batched=None):
  """``[C]`` values of one chain's ``fn`` over ``state`` (dict ``name ->
  [C, ...]``), differentiable: the gradient with respect to ``state`` is the
  per-chain one of ``batched_value_and_gradient``, computed with the value
  (or by ``batched``, a function ``state -> (values, gradients)`` computing
  the same, such as a ``tf.function`` of it that one trace serves).
  A program that reads ``tf.Variable``s (Keras weights) gets their gradient
  from the vectorized program."""
  names = list(state)
  if batched is None:
    batched = lambda s: batched_value_and_gradient(fn, s, loops)  # pylint: disable=unnecessary-lambda-assignment

  @tf.custom_gradient
  def value(*parts):
    lp, grads = batched(dict(zip(names, parts)))

    def grad_fn(upstream, variables=None):
      state_grads = [tf.reshape(upstream, [-1] + [1] * (grads[n].shape.rank - 1)) * grads[n]
                     for n in names]
      if not variables:
        return state_grads
      with tf.GradientTape() as tape:
        tape.watch(variables)
        lp_again = tf.vectorized_map(fn, dict(zip(names, parts)))
        total = tf.reduce_sum(tf.stop_gradient(upstream) * lp_again)
      var_grads = tape.gradient(total, variables,
                                unconnected_gradients=tf.UnconnectedGradients.ZERO)
      return state_grads, var_grads

    return lp, grad_fn

  return value(*[state[n] for n in names])


def summed_parameter_gradient(fn, examples, variables):
  """``sum_i d fn(examples_i) / d variables``, one term per example.

  Args:
    fn: one example (a nest of Tensors) -> scalar Tensor.
    examples: a nest of ``[n, ...]`` Tensors.
    variables: the ``tf.Variable``s every example reads.

  Returns:
    A list aligned with ``variables``; zero where ``fn`` does not read one.
  """
  def one(example):
    with tf.GradientTape() as tape:
      value = fn(example)
    return tape.gradient(value, variables, unconnected_gradients=tf.UnconnectedGradients.ZERO)

  return [tf.reduce_sum(g, axis=0) for g in tf.vectorized_map(one, examples)]


def value_and_gradient(fn, state, rows=False):
  """``(fn(state), d fn / d state)`` for one chain.

  Args:
    fn: ``state -> scalar`` Tensor (one chain's log density).
    state: dict ``name -> Tensor``.
    rows: write matrix-product gradients in the row form (graph mode only).

  Returns:
    ``(value, gradients)``, gradients a dict like ``state``; zero for parts
    the value does not depend on.
  """
  if not rows or tf.executing_eagerly():
    with tf.GradientTape() as tape:
      tape.watch(state)
      value = fn(state)
    return value, tape.gradient(value, state,
                                unconnected_gradients=tf.UnconnectedGradients.ZERO)
  names = list(state)
  with tf.compat.v1.get_default_graph().gradient_override_map({"MatMul": _MATMUL_GRADIENT}):
    value = fn(state)
  grads = tf.gradients(value, [state[n] for n in names],
                       unconnected_gradients=tf.UnconnectedGradients.ZERO)
  return value, dict(zip(names, grads))
