"""Correct, idiomatic PyTorch training scripts: the material the mutation operators break.

Each module runs alone (``python reference_loops/NAME.py --epochs E --seed S --device cpu``)
and exposes ``main(argv)``; see docs/loops.md.
"""
