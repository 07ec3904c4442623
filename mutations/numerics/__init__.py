"""Numerics bugs: unstable formulas, lost precision, dead initialisation, a network gone linear."""
