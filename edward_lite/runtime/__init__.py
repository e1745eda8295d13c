"""The host side of a run: the chunked loop, checkpoints and their files,
fingerprints by content, seeds, progress, the console, save and load."""
