"""Device bugs: a batch's inputs, its targets or the model left on the CPU.

On a CPU run every mutant here behaves like the original; on a GPU run the first forward
(or the loss) raises a device-mismatch error. The catalog shows both, per device.
"""
