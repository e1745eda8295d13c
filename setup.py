"""edward_lite: random-variable probabilistic programming on TensorFlow."""

import setuptools

setuptools.setup(
    name="edward_lite",
    version="0.1.0",
    description=("Random-variable probabilistic programming on TensorFlow: "
                 "Edward2-style programs, vectorized MCMC and variational inference."),
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    packages=setuptools.find_packages(include=["edward_lite", "edward_lite.*"]),
    # Tested on 3.11 (ArviZ 0.2x) and 3.12 (ArviZ 1.x, which pip picks from 3.12 on):
    # .ci/run runs both.
    python_requires=">=3.10,<3.14",
    install_requires=[
        # Measured to work together on Python 3.11 and 3.12.  The full tensorflow wheel:
        # tf-keras requires `tensorflow`, so tensorflow-cpu would install both.
        "tensorflow==2.21.0",
        "tf-keras==2.21.0",
        "tensorflow-probability==0.25.0",
        # NumPy 2.4 removed reshape(newshape=), which breaks tfb.Pad and so
        # tfb.SoftmaxCentered (every simplex-valued latent).
        "numpy>=1.26,<2.4",
    ],
    extras_require={
        # ArviZ 0.2x (InferenceData) and 1.x (xarray DataTree): analysis/arviz_compat.py.
        # The docs extra is in the test extra: tests/test_docs.py builds the site
        # (pure Python, about 20 s to install).
        "test": ["pytest>=8", "pytest-xdist>=3", "pytest-timeout>=2.2", "scipy>=1.10",
                 "arviz>=0.17,<2", "tqdm>=4.60", "matplotlib>=3.5", "graphviz>=0.20", "pandas>=1.5",
                 "mkdocs>=1.6", "mkdocs-material>=9", "mkdocstrings[python]>=0.26"],
        "arviz": ["arviz>=0.17,<2"],
        "plot": ["matplotlib>=3.5", "arviz>=0.17,<2"],  # ed.plot
        "progress": ["tqdm>=4.60"],
        "graph": ["graphviz>=0.20"],  # ed.graph (and Graphviz's dot program to render)
        "gpu": ["tensorflow[and-cuda]==2.21.0"],
        # The documentation site (docs/, mkdocs.yml): mkdocs serve / mkdocs build --strict.
        "docs": ["mkdocs>=1.6", "mkdocs-material>=9", "mkdocstrings[python]>=0.26"],
    },
    classifiers=[
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3 :: Only",
        "Programming Language :: Python :: 3.10",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Programming Language :: Python :: 3.13",
        "Topic :: Scientific/Engineering :: Mathematics",
    ],
)
