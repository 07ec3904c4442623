"""Data bugs: labels that stop matching their inputs, leaking splits, evaluation on the
training data, lost preprocessing.

The private helpers at the top recognise the data-pipeline idioms only these operators
need: where the labels of a ``TensorDataset`` are, which side of a split is the training
one, which expressions standardize inputs, next-token slices, flattening. Train/eval
roles of names and DataLoaders are ``mutator.semantics`` recognisers.
"""
