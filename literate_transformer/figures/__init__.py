"""Figures the chapters draw from the package's own tensors: one module per part of the book."""
