"""Seeds: integer seeds as stateless pairs, and named streams.

``seed_pair`` turns an integer seed into the ``[2]`` int32 pair that
TensorFlow's stateless random ops take; ``stream(seed, name)`` derives the
seed of one purpose (``STREAMS``) so its random numbers never repeat
another's.
"""

import tensorflow as tf

__all__ = ["seed_pair", "stream", "STREAMS"]


def seed_pair(seed):
  """Integer seed -> ``[low, high]`` with both parts in ``[0, 2**31 - 1)``."""
  return [seed % (2**31 - 1), (seed // (2**31 - 1)) % (2**31 - 1)]


# Named streams: ``stream(seed, name)`` is ``fold_in(seed, STREAMS[name])``,
# so the random numbers of one purpose never repeat another's.  (MCMC
# transitions fold in their iteration, initial draws ``-1 - attempt``, chain
# groups their block; those are indices, not streams.)
STREAMS = dict(
    vi_minibatches=0x5EED,    # VI data subsampling, then folded with the epoch
    vi_start_points=11,       # VI's uniform initial points
    vi_prior_start=7,         # VI's init="prior": a median of prior draws
    vi_start_draws=13,        # VI's init="auto": the fixed draws of its blurred density
    vi_weighted_draws=0x51,   # a fit's draws with importance weights
    vi_draws=0x52,            # a fit's draws
    vi_train_noise=0x53,      # ed.vi.train's per-example guide noise, then step and latent
    vi_eval_noise=0x54,       # ed.vi.train's held-out ELBO noise, then batch and latent
    vi_log_likelihood=0x55,   # TrainResult.log_likelihood: its draws, then batch, call, latent
    enumerated_draws=0xE0,    # summed-out discrete latents drawn after a run
    sbc_simulations=0x5BC,    # ed.sbc's prior draws of parameters and data
    sbc_vi_steps=0x5BD,       # ed.sbc's batched VI: the draws of each step
    sbc_vi_draws=0x5BE)       # ed.sbc's batched VI: the surrogates' ranked draws


def stream(seed, name):
  """The stateless seed of the named stream (``STREAMS``) of ``seed`` (int32[2])."""
  return tf.random.experimental.stateless_fold_in(seed, STREAMS[name])
