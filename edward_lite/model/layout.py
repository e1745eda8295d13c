"""The layout of a target's latents: dict views of one flat ``[C, D]`` state.

Samplers and optimizers work on one flat vector per chain; users and the
program see one value per latent.  With latents ``n_1, ..., n_K`` in program
order, unconstrained shapes ``U_k`` and constrained shapes ``S_k``:

    flat[c] = concat_k reshape(u_k[c], [prod(U_k)])       D   = sum_k prod(U_k)
    flat_constrained[c] = concat_k reshape(x_k[c], [-1])  D_c = sum_k prod(S_k)

``Layout`` does these conversions and the shape checks of a state given as a
dict or a list.
"""

import collections

import numpy as np
import tensorflow as tf

__all__ = ["Layout"]


class Layout:
  """Flat and dict views of the latents ``latents`` (name -> ``LatentInfo``)."""

  def __init__(self, latents):
    self.latents = collections.OrderedDict(latents)
    latent_dtypes = {info.dtype for info in self.latents.values()}
    self.dtype = latent_dtypes.pop() if len(latent_dtypes) == 1 else None

  @property
  def names(self):
    return tuple(self.latents)

  @property
  def dim(self):
    """``D``, the total unconstrained dimension."""
    return sum(i.unconstrained_shape.num_elements() for i in self.latents.values())

  @property
  def constrained_dim(self):
    """``D_c``, the total constrained dimension."""
    return sum(i.shape.num_elements() for i in self.latents.values())

  def as_dict(self, state, constrained=False):
    """A dict ``name -> [C, *U_name]`` (or ``[C, *S_name]``) from a dict or
    a list in ``names`` order, each part converted to its latent's dtype;
    raises ValueError naming the part whose shape is wrong."""
    if isinstance(state, collections.abc.Mapping):
      extra = [k for k in state if k not in self.latents]
      missing = [k for k in self.latents if k not in state]
      if extra or missing:
        raise ValueError(f"State must have one entry per latent variable "
                         f"{list(self.latents)}; missing {missing}, unknown {extra}.")
      state = dict(state)
    elif isinstance(state, (list, tuple)):
      if len(state) != len(self.latents):
        raise ValueError(f"State has {len(state)} parts; the latents are "
                         f"{list(self.latents)}.")
      state = dict(zip(self.latents, state))
    else:
      raise TypeError("State must be a dict name -> Tensor or a list in `names` order.")
    chains = set()
    for name, info in self.latents.items():
      value = tf.convert_to_tensor(state[name], dtype=info.dtype)
      event = info.shape if constrained else info.unconstrained_shape
      if value.shape.rank is not None and (
          value.shape.rank != event.rank + 1 or
          not value.shape[1:].is_compatible_with(event)):
        raise ValueError(
            f"State for latent '{name}' has shape {value.shape.as_list()}; expected "
            f"[chains] + {event.as_list()} ({'constrained' if constrained else 'unconstrained'}).")
      if value.shape.rank and value.shape[0] is not None:
        chains.add(value.shape[0])
      state[name] = value
    if len(chains) > 1:
      raise ValueError(f"State parts disagree on the number of chains: {sorted(chains)}.")
    return state

  def flatten(self, state):
    """Unconstrained state (dict or list) -> ``[C, D]``."""
    state = self.as_dict(state)
    self.require_common_dtype()
    chains = tf.shape(next(iter(state.values())))[0] if state else 0
    return tf.concat([tf.reshape(state[n], [chains, -1]) for n in self.latents], axis=-1)

  def unflatten(self, flat):
    """``[C, D]`` -> unconstrained state ``{name: [C, *U_name]}``."""
    self.require_common_dtype()
    flat = tf.convert_to_tensor(flat, dtype=self.dtype)
    if flat.shape.rank is not None and (flat.shape.rank != 2 or
                                        flat.shape[-1] not in (None, self.dim)):
      raise ValueError(f"Flat state has shape {flat.shape.as_list()}; expected "
                       f"[chains, {self.dim}].")
    sizes = [i.unconstrained_shape.num_elements() for i in self.latents.values()]
    parts = tf.split(flat, sizes, axis=-1)
    return {n: tf.reshape(p, [-1] + i.unconstrained_shape.as_list())
            for (n, i), p in zip(self.latents.items(), parts)}

  def flatten_constrained(self, values, chains):
    """Constrained values ``{name: [C, *S_name]}`` -> ``[C, D_c]``."""
    return tf.concat([tf.reshape(values[n], [chains, -1]) for n in self.latents], axis=-1)

  def split_constrained(self, flat):
    """NumPy ``[..., D_c]`` -> dict ``name -> [..., *S_name]``."""
    flat = np.asarray(flat)
    out, offset = {}, 0
    for name, info in self.latents.items():
      size = info.shape.num_elements()
      out[name] = flat[..., offset:offset + size].reshape(flat.shape[:-1] + tuple(info.shape))
      offset += size
    return out

  def require_common_dtype(self):
    if self.dtype is None:
      found = {n: i.dtype.name for n, i in self.latents.items()}
      raise TypeError(f"Flattening needs one dtype for all latents; they have {found}.")
