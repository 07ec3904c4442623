"""Loss bugs: the wrong loss, the right loss fed the wrong tensors, the wrong reduction.

Which loss a call computes, what a criterion name holds and how to spell ``F`` or
``torch`` in the script at hand are ``mutator.semantics`` recognisers (numerics and
gradient operators ask the same questions).
"""
