"""Datasets: the synthetic generator, discovery of a user's images, and the default-data cache."""
