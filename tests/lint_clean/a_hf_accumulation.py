"""A HuggingFace-style manual loop: AdamW with a no-decay parameter group, a linear
warmup/decay schedule built by a helper and stepped once per optimizer step, gradient
accumulation with the loss divided by the number of micro-batches, clipping, the model
wrapped (DataParallel, torch.compile) after its optimizer was built."""

import argparse

import torch
import torch.nn as nn
from torch.optim.lr_scheduler import LambdaLR


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps):
    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        remaining = num_training_steps - current_step
        return max(0.0, float(remaining) / float(max(1, num_training_steps - num_warmup_steps)))

    return LambdaLR(optimizer, lr_lambda)


class TinyLM(nn.Module):
    def __init__(self, vocab=50, dim=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.norm = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab)

    def forward(self, input_ids, labels):
        logits = self.lm_head(self.norm(self.embed(input_ids)))
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1))
        return loss, logits


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--learning_rate", type=float, default=5e-4)
    parser.add_argument("--weight_decay", type=float, default=0.01)
    parser.add_argument("--gradient_accumulation_steps", type=int, default=4)
    parser.add_argument("--num_train_epochs", type=int, default=2)
    parser.add_argument("--warmup_steps", type=int, default=5)
    parser.add_argument("--max_grad_norm", type=float, default=1.0)
    args = parser.parse_args()

    torch.manual_seed(0)
    data = torch.randint(0, 50, (256, 17))
    batches = [(b[:, :-1], b[:, 1:]) for b in data.split(8)]
    model = TinyLM()
    no_decay = ["bias", "norm.weight"]
    grouped = [
        {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
         "weight_decay": args.weight_decay},
        {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
         "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(grouped, lr=args.learning_rate)
    t_total = len(batches) // args.gradient_accumulation_steps * args.num_train_epochs
    scheduler = get_linear_schedule_with_warmup(optimizer, args.warmup_steps, t_total)
    if torch.cuda.device_count() > 1:
        model = nn.DataParallel(model)
    if hasattr(torch, "compile") and torch.cuda.is_available():
        model = torch.compile(model)

    global_step = 0
    model.train()
    model.zero_grad()
    for epoch in range(args.num_train_epochs):
        for step, (input_ids, labels) in enumerate(batches):
            outputs = model(input_ids, labels)
            loss = outputs[0]
            loss = loss / args.gradient_accumulation_steps
            loss.backward()
            if (step + 1) % args.gradient_accumulation_steps == 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                optimizer.step()
                scheduler.step()
                model.zero_grad()
                global_step += 1
        print(f"epoch {epoch} step {global_step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
