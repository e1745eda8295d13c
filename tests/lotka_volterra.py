"""The Lotka-Volterra model on the Hudson's Bay Company lynx and hare pelts,
1900-1920 (thousands; public data, as in Carpenter's Stan case study), shared
by tests/test_ode.py and benchmarks/lotka_volterra_reference.py."""

import numpy as np

HARE = [30, 47.2, 70.2, 77.4, 36.3, 20.6, 18.1, 21.4, 22, 25.4, 27.1, 40.3, 57, 76.6, 52.3,
        19.5, 11.2, 7.6, 14.6, 16.2, 24.7]
LYNX = [4, 6.1, 9.8, 35.2, 59.4, 41.7, 19, 13, 8.3, 9.1, 7.4, 8, 12.3, 19.5, 45.7, 51.1,
        29.7, 15.8, 9.7, 10.1, 8.6]
COUNTS = np.stack([HARE, LYNX], 1)  # [21, 2]: 1900 (t = 0) ... 1920 (t = 20)
TIMES = np.arange(1., 21.)
NAMES = ("alpha", "beta", "gamma", "delta", "sigma", "z_init")
# Log-normal priors (log-scale location, scale).
PRIORS = {"alpha": (0., .5), "beta": (np.log(.05), .5), "gamma": (0., .5),
          "delta": (np.log(.05), .5), "sigma": (-1., 1.), "z_init": (np.log(10.), 1.)}
