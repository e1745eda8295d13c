"""Small image sets for the VAE and Image Transformer examples.

``shapes(n, size, seed)`` draws synthetic binary images (filled rectangles,
hollow rectangles, discs, crosses and diagonal bars at random positions and
sizes): a shipped-with-the-code stand-in for binarized digits that needs no
download.  ``load(name, ...)`` returns it, scikit-learn's bundled handwritten
digits (1,797 8x8 images, binarized) when scikit-learn is installed, or
MNIST/binarized MNIST through ``tensorflow-datasets`` when that is installed
and the data is present.
``write_grid`` saves a grid of images as a titled figure with labelled rows
(matplotlib), falling back to ``write_png_grid`` (TensorFlow's PNG encoder, no
labels) when matplotlib is not installed.
"""

import os
import sys

import numpy as np
import tensorflow as tf

__all__ = ["shapes", "load", "write_grid", "write_png_grid"]


def shapes(n, size=8, seed=0):
  """``n`` binary images ``[n, size, size]`` (uint8 0/1) of random shapes."""
  rng = np.random.default_rng(seed)
  images = np.zeros([n, size, size], np.uint8)
  yy, xx = np.mgrid[:size, :size]
  for k in range(n):
    kind = rng.integers(5)
    h, w = rng.integers(max(2, size // 4), size - 1, size=2)
    top, left = rng.integers(0, size - h + 1), rng.integers(0, size - w + 1)
    box = (yy >= top) & (yy < top + h) & (xx >= left) & (xx < left + w)
    if kind == 0:  # filled rectangle
      img = box
    elif kind == 1:  # hollow rectangle
      inner = (yy > top) & (yy < top + h - 1) & (xx > left) & (xx < left + w - 1)
      img = box & ~inner
    elif kind == 2:  # disc
      cy, cx = top + (h - 1) / 2, left + (w - 1) / 2
      r = min(h, w) / 2
      img = (yy - cy) ** 2 + (xx - cx) ** 2 <= r ** 2
    elif kind == 3:  # cross
      cy, cx = top + h // 2, left + w // 2
      img = box & ((yy == cy) | (xx == cx))
    else:  # diagonal bar
      img = box & (np.abs((yy - top) - (xx - left) * h / w) < 1.)
    images[k] = img
  return images


def load(name="shapes", n=2048, size=8, seed=0, split="train"):
  """``[n, size, size]`` uint8 images.

  Args:
    name: ``"shapes"`` (generated), ``"digits"`` (scikit-learn's 1,797
      8x8 digits, gray levels 0-16 binarized at 8, in a permutation by
      ``seed``; at most ``n``) or a ``tensorflow-datasets`` name such as
      ``"binarized_mnist"`` or ``"mnist"`` (binarized at 0.5; ``size`` is
      then the dataset's own, 28).
  """
  if name == "shapes":
    return shapes(n, size, seed)
  if name == "digits":
    try:
      from sklearn.datasets import load_digits  # pylint: disable=import-outside-toplevel
    except ImportError as e:
      raise ImportError("Loading 'digits' needs scikit-learn (pip install scikit-learn); or "
                        "use name='shapes'.") from e
    images = load_digits().images
    return (images[np.random.default_rng(seed).permutation(len(images))][:n] >= 8).astype(
        np.uint8)
  try:
    import tensorflow_datasets as tfds  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise ImportError(f"Loading '{name}' needs tensorflow-datasets (pip install "
                      "tensorflow-datasets); or use name='shapes'.") from e
  data = tfds.load(name, split=split, batch_size=-1, download=False)
  images = np.asarray(data["image"])[:n, ..., 0]
  return (images > (127 if images.max() > 1 else 0)).astype(np.uint8)


def write_png_grid(path, images, cols=8, scale=4):
  """Writes ``images`` ``[n, h, w]`` (values in [0, 1]) as one PNG grid."""
  images = np.clip(np.asarray(images, np.float32), 0., 1.)
  n, h, w = images.shape
  rows = -(-n // cols)
  grid = np.ones([rows * (h + 1) + 1, cols * (w + 1) + 1], np.float32) * 0.5
  for k in range(n):
    r, c = divmod(k, cols)
    grid[1 + r * (h + 1):1 + r * (h + 1) + h, 1 + c * (w + 1):1 + c * (w + 1) + w] = images[k]
  grid = np.kron(grid, np.ones([scale, scale], np.float32))
  png = tf.io.encode_png(tf.constant((grid * 255).astype(np.uint8)[..., None]))
  tf.io.write_file(path, png)
  return path


def write_grid(path, images, labels=None, title=None, cols=8, width=8.):
  """Writes ``images`` ``[n, h, w]`` (values in [0, 1]) as a PNG figure:
  rows of ``cols`` images, each row labelled, under a title; ``width``
  inches at 100 dpi (800 pixels).  Without matplotlib, writes the plain
  grid of ``write_png_grid`` and says so in one line.

  Args:
    labels: one label per row (cycled when shorter), or one string for all.
  """
  try:
    from matplotlib.figure import Figure  # pylint: disable=import-outside-toplevel
  except ImportError:
    print("matplotlib is not installed: writing a plain grid without labels "
          "(pip install 'edward_lite[plot]' for a labelled figure).", file=sys.stderr)
    return write_png_grid(path, images, cols)
  images = np.clip(np.asarray(images, np.float32), 0., 1.)
  n, h, w = images.shape
  rows = -(-n // cols)
  labels = [labels] if isinstance(labels, str) or labels is None else list(labels)
  strip_w = cols * (w + 1) + 1
  row_h = 0.82 * width * (h + 2) / strip_w  # inches per row at the axes' width
  fig = Figure(figsize=(width, 0.7 + rows * (row_h + 0.1)), dpi=100, layout="constrained")
  axes = fig.subplots(rows, 1, squeeze=False)[:, 0]
  for r, ax in enumerate(axes):
    strip = np.full([h + 2, strip_w], 0.75, np.float32)  # light grey frames
    for c, image in enumerate(images[r * cols:(r + 1) * cols]):
      strip[1:1 + h, 1 + c * (w + 1):1 + c * (w + 1) + w] = image
    ax.imshow(strip, cmap="gray", vmin=0., vmax=1., interpolation="nearest")
    ax.set_xticks([])
    ax.set_yticks([])
    label = labels[r % len(labels)]
    if label:
      ax.set_ylabel(label, rotation=0, ha="right", va="center", fontsize=12)
  if title:
    fig.suptitle(title, fontsize=13)
  if os.path.dirname(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
  fig.savefig(path, dpi=100, facecolor="white")
  return path
