"""The MCMC kernels by name, for ``ed.mcmc.sample(kernel=...)``.

* ``"rwmh"`` -- ``RWMH`` (``rwmh.py``), random-walk Metropolis;
* ``"hmc"`` -- ``HMC`` (``hmc.py``), leapfrog Hamiltonian Monte Carlo with a
  fixed or jittered number of steps;
* ``"nuts"`` -- ``NUTS`` (``nuts.py``), the iterative No-U-Turn sampler
  (multinomial sampling, generalized U-turn criterion, maximum tree depth,
  divergence detection);
* ``"chees"`` -- ``ChEES`` (``hmc.py``), HMC whose trajectory length is
  adapted across chains.

The contract they keep is ``base.Kernel``.
"""

from edward_lite.mcmc.base import Kernel, check_kernel
from edward_lite.mcmc.hmc import HMC, ChEES
from edward_lite.mcmc.nuts import NUTS
from edward_lite.mcmc.rwmh import RWMH

__all__ = ["Kernel", "RWMH", "HMC", "NUTS", "ChEES", "KERNELS", "get_kernel"]

KERNELS = {"rwmh": RWMH, "hmc": HMC, "nuts": NUTS, "chees": ChEES}


def get_kernel(kernel):
  """A kernel object from a name (``"nuts"``, ...) or a Kernel instance."""
  if isinstance(kernel, Kernel):
    return check_kernel(kernel)
  if isinstance(kernel, str) and kernel.lower() in KERNELS:
    return KERNELS[kernel.lower()]()
  raise ValueError(f"Unknown kernel {kernel!r}; use one of {sorted(KERNELS)} or a "
                   "kernel object such as ed.mcmc.NUTS(max_tree_depth=8).")
