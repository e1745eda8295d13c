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
it saves (``benchmarks/matmul_gradient.py``, RESULTS section 13).  ``vectorized_value_and_gradient`` therefore uses the row form
up to ``ROW_FORM_MAX_CHAINS`` chains and TensorFlow's own above; both are the
same product, summed in another order.

The row form evaluates ``fn`` with every ``MatMul`` it creates marked for
the other gradient (``Graph.gradient_override_map``) and differentiates with
``tf.gradients``, which honours the mark (the eager ``GradientTape`` looks
gradients up by op type only).  It needs graph mode, as inside
``tf.vectorized_map``; called eagerly, the tape is used.
"""

import tensorflow as tf

__all__ = ["value_and_gradient", "vectorized_value_and_gradient", "ROW_FORM_MAX_CHAINS"]

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
