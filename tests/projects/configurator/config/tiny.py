# a tiny run: python train.py config/tiny.py
max_iters = 40
batch_size = 16
