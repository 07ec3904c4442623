# Reports through the logging module, as many research scripts do: basicConfig with a
# format, a module logger, logger.info() with %-style arguments per epoch.
import argparse
import logging

from digits import evaluate, load, make_model, train_epoch

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
logger = logging.getLogger("train")

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
args = parser.parse_args()

train, val = load()
model, optimizer, criterion = make_model()
logger.info("training %d epochs, lr %g, max_epochs %d", args.epochs, 0.1, 100)
for epoch in range(1, args.epochs + 1):
    train_loss = train_epoch(model, optimizer, criterion, train)
    val_loss, val_acc = evaluate(model, criterion, val)
    logger.info("epoch %d: train_loss=%.4f val_loss=%.4f val_acc=%.4f", epoch, train_loss, val_loss, val_acc)
# A reconfiguration that replaces every handler must not blind the capture.
logging.basicConfig(level=logging.INFO, force=True, handlers=[logging.NullHandler()])
logger.info("final: val_loss=%.4f val_acc=%.4f", val_loss, val_acc)
