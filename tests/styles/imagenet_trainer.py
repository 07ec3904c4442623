"""ImageNet-example style: argparse, main()/train()/validate(), AverageMeter, an optional
DistributedSampler, AMP (autocast + GradScaler, enabled on CUDA only), a Normalize
transform pipeline, StepLR, checkpoints with is_best, and an ONNX export nobody calls."""

import argparse
import shutil
import time
import types

import torch
import torch.nn as nn
import torch.utils.data
import torch.utils.data.distributed
from sklearn.datasets import load_digits


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


class RandomHorizontalFlip:
    def __call__(self, x):
        return x.flip(-1) if torch.rand(()) < 0.5 else x


class Normalize:
    def __init__(self, mean, std):
        self.mean = torch.tensor(mean).view(-1, 1, 1)
        self.std = torch.tensor(std).view(-1, 1, 1)

    def __call__(self, x):
        return (x - self.mean) / self.std


# The three torchvision.transforms this example needs, so it runs without torchvision.
transforms = types.SimpleNamespace(Compose=Compose, RandomHorizontalFlip=RandomHorizontalFlip, Normalize=Normalize)


class TensorImages(torch.utils.data.Dataset):
    def __init__(self, images, targets, transform):
        self.images, self.targets, self.transform = images, targets, transform

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        return self.transform(self.images[index]), self.targets[index]


class SmallNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1, bias=False),
            nn.BatchNorm2d(16),
            nn.ReLU(inplace=True),
            nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(32),
            nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1),
        )
        self.fc = nn.Linear(32, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1))


parser = argparse.ArgumentParser(description="ImageNet-style training on 8x8 digits")
parser.add_argument("--epochs", default=4, type=int)
parser.add_argument("--start-epoch", default=0, type=int)
parser.add_argument("-b", "--batch-size", default=64, type=int)
parser.add_argument("--lr", "--learning-rate", default=0.1, type=float, dest="lr")
parser.add_argument("--momentum", default=0.9, type=float)
parser.add_argument("--wd", "--weight-decay", default=1e-4, type=float, dest="weight_decay")
parser.add_argument("-p", "--print-freq", default=10, type=int)
parser.add_argument("--resume", default="", type=str, help="path to latest checkpoint")
parser.add_argument("-e", "--evaluate", action="store_true", help="evaluate on validation set")
parser.add_argument("--distributed", action="store_true", help="use DistributedSampler")
parser.add_argument("--amp", action="store_true", help="mixed precision (CUDA only)")
parser.add_argument("--export-onnx", default="", help="write the trained model as ONNX")
parser.add_argument("--workers", default=0, type=int)
parser.add_argument("--seed", default=0, type=int)
parser.add_argument("--device", default="cpu")


def main():
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    best_acc1 = 0.0

    model = SmallNet().to(device)
    criterion = nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=args.momentum, weight_decay=args.weight_decay)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=30, gamma=0.1)
    use_amp = args.amp and device.type == "cuda"
    scaler = torch.amp.GradScaler(device.type, enabled=use_amp)

    if args.resume:
        checkpoint = torch.load(args.resume, map_location=device)
        args.start_epoch = checkpoint["epoch"]
        best_acc1 = checkpoint["best_acc1"]
        model.load_state_dict(checkpoint["state_dict"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        scheduler.load_state_dict(checkpoint["scheduler"])

    digits = load_digits()
    images = torch.tensor(digits.data, dtype=torch.float32).view(-1, 1, 8, 8).repeat(1, 3, 1, 1) / 16.0
    targets = torch.tensor(digits.target)
    normalize = transforms.Normalize(mean=[0.3, 0.3, 0.3], std=[0.4, 0.4, 0.4])
    train_dataset = TensorImages(
        images[:1400], targets[:1400], transforms.Compose([transforms.RandomHorizontalFlip(), normalize])
    )
    val_dataset = TensorImages(images[1400:], targets[1400:], transforms.Compose([normalize]))

    if args.distributed:
        train_sampler = torch.utils.data.distributed.DistributedSampler(train_dataset)
        val_sampler = torch.utils.data.distributed.DistributedSampler(val_dataset, shuffle=False, drop_last=True)
    else:
        train_sampler = None
        val_sampler = None

    train_loader = torch.utils.data.DataLoader(
        train_dataset,
        batch_size=args.batch_size,
        shuffle=(train_sampler is None),
        num_workers=args.workers,
        pin_memory=device.type == "cuda",
        sampler=train_sampler,
    )
    val_loader = torch.utils.data.DataLoader(
        val_dataset, batch_size=args.batch_size, shuffle=False, num_workers=args.workers, sampler=val_sampler
    )

    if args.evaluate:
        validate(val_loader, model, criterion, device, args)
        return

    for epoch in range(args.start_epoch, args.epochs):
        if args.distributed:
            train_sampler.set_epoch(epoch)
        train(train_loader, model, criterion, optimizer, scaler, epoch, device, args)
        acc1 = validate(val_loader, model, criterion, device, args)
        scheduler.step()

        is_best = acc1 > best_acc1
        best_acc1 = max(acc1, best_acc1)
        save_checkpoint(
            {
                "epoch": epoch + 1,
                "state_dict": model.state_dict(),
                "best_acc1": best_acc1,
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
            },
            is_best,
        )

    if args.export_onnx:
        export_onnx(model, args.export_onnx, device)


def train(train_loader, model, criterion, optimizer, scaler, epoch, device, args):
    batch_time = AverageMeter("Time", ":6.3f")
    losses = AverageMeter("Loss", ":.4e")
    top1 = AverageMeter("Acc@1", ":6.2f")
    use_amp = args.amp and device.type == "cuda"

    model.train()
    end = time.time()
    for i, (images, target) in enumerate(train_loader):
        images = images.to(device, non_blocking=True)
        target = target.to(device, non_blocking=True)

        with torch.autocast(device_type=device.type, enabled=use_amp):
            output = model(images)
            loss = criterion(output, target)

        acc1, acc5 = accuracy(output, target, topk=(1, 5))
        losses.update(loss.item(), images.size(0))
        top1.update(acc1[0].item(), images.size(0))

        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

        batch_time.update(time.time() - end)
        end = time.time()
        if i % args.print_freq == 0:
            print(f"Epoch [{epoch}][{i}/{len(train_loader)}] {batch_time} {losses} {top1}")
    print(f"epoch {epoch} train loss {losses.avg:.4f}")


def validate(val_loader, model, criterion, device, args):
    losses = AverageMeter("Loss", ":.4e")
    top1 = AverageMeter("Acc@1", ":6.2f")
    model.eval()
    with torch.no_grad():
        for images, target in val_loader:
            images = images.to(device, non_blocking=True)
            target = target.to(device, non_blocking=True)
            output = model(images)
            loss = criterion(output, target)
            acc1, acc5 = accuracy(output, target, topk=(1, 5))
            losses.update(loss.item(), images.size(0))
            top1.update(acc1[0].item(), images.size(0))
    print(f" * Acc@1 {top1.avg:.3f} val loss {losses.avg:.4f}")
    return top1.avg


def save_checkpoint(state, is_best, filename="checkpoint.pth.tar"):
    torch.save(state, filename)
    if is_best:
        shutil.copyfile(filename, "model_best.pth.tar")


def export_onnx(model, path, device):
    """Export for serving; only with --export-onnx, never part of training."""
    model.eval()
    dummy_input = torch.randn(1, 3, 8, 8).to(device)
    torch.onnx.export(model, dummy_input, path, input_names=["images"], output_names=["logits"])


class AverageMeter:
    """Computes and stores the average and current value."""

    def __init__(self, name, fmt=":f"):
        self.name, self.fmt = name, fmt
        self.val = self.avg = self.sum = self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count

    def __str__(self):
        return ("{name} {val" + self.fmt + "} ({avg" + self.fmt + "})").format(**self.__dict__)


def accuracy(output, target, topk=(1,)):
    """Precision@k for each k in topk."""
    with torch.no_grad():
        maxk = max(topk)
        batch_size = target.size(0)
        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))
        res = []
        for k in topk:
            correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
            res.append(correct_k.mul_(100.0 / batch_size))
        return res


if __name__ == "__main__":
    main()
