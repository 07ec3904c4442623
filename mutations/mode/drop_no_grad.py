"""The ``drop_no_grad`` operator (DropNoGrad)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, NonSite, Replacement, Swap
from mutator.semantics import (
    bound_names,
    dedented_body,
    disables_grad,
    dotted_name,
    function_role,
    is_model,
    method_name,
    receiver,
    resolve,
)
from mutator.semantics.grad_flow import feeds_training
from mutator.semantics.grad_mode import only_used_without_grad

# Calls that build no autograd graph whatever the grad mode: printing, logging, ``.item()``.
_GRAPHLESS_METHODS = frozenset({"item", "tolist", "append", "format", "write", "info", "log"})


def _touches_parameters(root: cst.CSTNode, ctx: Context) -> bool:
    """Does ``root`` edit weights or gradients in place (EMA, manual SGD, init, clipping)?

    Such blocks need ``no_grad`` to run at all; dropping it there is a crash, not the
    evaluation bug this module is about.
    """
    if any(a.attr.value == "grad" for a in ctx.nodes_within(root, cst.Attribute)):
        return True  # p -= lr * p.grad
    for target in ctx.nodes_within(root, cst.AssignTarget):
        if isinstance(target.target, cst.Attribute) and target.target.attr.value == "data":
            return True  # w.data = ...
    local = {
        name
        for assign in ctx.nodes_within(root, cst.AssignTarget)
        for name in bound_names(assign.target)  # type: ignore[attr-defined]
    }
    for call in ctx.nodes_within(root, cst.Call):
        method = method_name(call)
        if method and method.endswith("_") and not method.startswith("_"):
            if dotted_name(receiver(call)) in local:
                continue  # ``input.fill_(word_id)`` on a tensor the block made: no weight
            return True  # in-place tensor method: p.mul_(), w.copy_(), nn.init.zeros_(w)
    return False


def _runs_forward(root: cst.CSTNode, ctx: Context) -> bool:
    """Does ``root`` call a model (``model(x)``, ``G.sample(n)``, ``evaluate(model, ...)``)?
    Statistics on tensors already in the graph (PPO's KL estimate) build nothing new."""
    for call in ctx.nodes_within(root, cst.Call):
        callee = call.func  # type: ignore[attr-defined]
        if not isinstance(callee, cst.Call) and is_model(callee, ctx):
            return True
        if isinstance(callee, cst.Name) and not resolve(callee, ctx).names:
            return True  # ``m(x)``, ``generate(...)``: a callable the script was handed
        if isinstance(callee, cst.Attribute) and is_model(callee.value, ctx):
            return True
        if any(is_model(arg.value, ctx) for arg in call.args):  # type: ignore[attr-defined]
            return True
        evaluation = _callee(call, ctx)  # type: ignore[arg-type]
        if evaluation is not None and function_role(evaluation, ctx) == "eval":
            return True  # ``self._eval_step(batch)``: the script's own evaluation step
    return False


def _defined(name: str, ctx: Context) -> cst.FunctionDef | None:
    """The script's one function or method called ``name`` (None if none, or several)."""
    functions = [f for f in ctx.nodes(cst.FunctionDef) if f.name.value == name]  # type: ignore[attr-defined]
    return functions[0] if len(functions) == 1 else None  # type: ignore[return-value]


def _callee(call: cst.Call, ctx: Context) -> cst.FunctionDef | None:
    """The script's own function a call runs: ``evaluate(...)``, or ``x.sample(...)`` when
    the script defines one ``sample``."""
    names = resolve(call.func, ctx).names
    local = [n.removeprefix("<local>.") for n in names if n.startswith("<local>.")]
    if len(local) == 1:
        return _defined(local[0], ctx)
    if isinstance(call.func, cst.Attribute) and not names:
        return _defined(call.func.attr.value, ctx)
    return None


def _decorated_off(function: cst.FunctionDef, ctx: Context) -> bool:
    return any(disables_grad(d.decorator, ctx) for d in function.decorators)


def _grad_free_elsewhere(body: cst.CSTNode, ctx: Context) -> bool:
    """Does ``body`` only call the script's functions that disable gradients themselves
    (``@torch.no_grad()``), plus helpers that run no model, printing and logging? Then
    the block's own ``no_grad`` changes nothing."""
    decorated = False
    for call in ctx.nodes_within(body, cst.Call):
        function = _callee(call, ctx)  # type: ignore[arg-type]
        if function is not None and _decorated_off(function, ctx):
            decorated = True
        elif function is not None and not _runs_forward(function.body, ctx):
            continue  # ``num_to_groups(n, batch)``: arithmetic
        elif not (
            any(n.startswith("builtins.") for n in resolve(call.func, ctx).names)  # type: ignore[attr-defined]
            or method_name(call) in _GRAPHLESS_METHODS  # type: ignore[arg-type]
        ):
            return False
    return decorated


class DropNoGrad(Swap):
    """Unwrap ``with torch.no_grad():`` (or ``torch.inference_mode()``,
    ``torch.set_grad_enabled(False)``) around evaluation, or delete ``@torch.no_grad()``.

    Bug: the evaluation forward records an autograd graph. Impact: activations of every
    validation batch are kept for a backward pass that never comes, so evaluation is
    slower and uses much more memory (an out-of-memory error on a GPU with a large
    validation set, or memory growth if a loss tensor is accumulated without
    ``.item()``); metrics are unchanged. Blocks that edit weights in place are not sites
    (without ``no_grad`` they raise instead), nor blocks that run no model (statistics on
    tensors already in the graph), nor blocks whose values feed training (an RL rollout or
    TD target that reaches the backwarded loss, a ``.numpy()`` of the output: there the
    gradient changes or the run raises, issue 22), nor blocks that only call functions
    decorated to disable gradients themselves (equivalent). Fix: wrap evaluation in
    ``with torch.no_grad():`` (or ``torch.inference_mode()``) or decorate the evaluation
    function. Check: memory watch during validation, or assert
    ``not torch.is_grad_enabled()`` / ``not out.requires_grad`` in the evaluation code.
    """

    name = "drop_no_grad"
    category = "mode"
    summary = "Remove torch.no_grad() around evaluation: the eval forward builds a graph."
    expected = "cost_only"
    witness = "more eval_graph", "an evaluation forward records an autograd graph"
    node_types = (cst.With, cst.Decorator)
    examples = (
        Example(
            before="""
                import torch
                model.eval()
                # validation
                with torch.no_grad():
                    out = model(x)
                    acc = (out.argmax(1) == y).float().mean()
                print(acc)
            """,
            after="""
                import torch
                model.eval()
                # validation
                out = model(x)
                acc = (out.argmax(1) == y).float().mean()
                print(acc)
            """,
        ),
        Example(
            before="""
                import torch

                class T:
                    @torch.no_grad()
                    def evaluate(self, x):
                        return self.model(x)
            """,
            after="""
                import torch

                class T:
                    def evaluate(self, x):
                        return self.model(x)
            """,
        ),
        Example(
            before="""
                from torch import inference_mode
                def test(m, xs):
                    with inference_mode(), autocast():
                        return [m(x) for x in xs]
            """,
            after="""
                from torch import inference_mode
                def test(m, xs):
                    with autocast():
                        return [m(x) for x in xs]
            """,
        ),
        Example(  # sampling whose prompt tensor is filled in place (a tutorial LM)
            before="""
                import torch
                with torch.no_grad():
                    input = torch.multinomial(prob, num_samples=1).unsqueeze(1)
                    for i in range(num_samples):
                        output, state = model(input, state)
                        input.fill_(torch.multinomial(output.exp(), 1).item())
            """,
            after="""
                import torch
                input = torch.multinomial(prob, num_samples=1).unsqueeze(1)
                for i in range(num_samples):
                    output, state = model(input, state)
                    input.fill_(torch.multinomial(output.exp(), 1).item())
            """,
        ),
        Example(
            before="""
                import torch
                with torch.set_grad_enabled(False): val = model(x)
            """,
            after="""
                import torch
                val = model(x)
            """,
        ),
        # The evaluation reuses the training step's names; the step binds them again
        # before its backward, so nothing of the block reaches it (issue 29).
        Example(
            before="""
                import torch
                for step in range(max_steps):
                    if step % 100 == 0:
                        with torch.no_grad():
                            loss = criterion(model(x_val), y_val)
                    loss = criterion(model(x), y)
                    loss.backward()
            """,
            after="""
                import torch
                for step in range(max_steps):
                    if step % 100 == 0:
                        loss = criterion(model(x_val), y_val)
                    loss = criterion(model(x), y)
                    loss.backward()
            """,
        ),
    )
    non_examples = (
        # An EMA update needs no_grad to run at all.
        """
            import torch
            with torch.no_grad():
                for e, p in zip(ema.parameters(), model.parameters()):
                    e.mul_(0.99).add_(p, alpha=0.01)
        """,
        """
            import torch
            with torch.no_grad():
                for p in params:
                    p -= lr * p.grad
        """,
        """
            import torch
            with torch.set_grad_enabled(phase == 'train'):
                out = model(x)
        """,
        """
            import torch
            with torch.enable_grad():
                out = model(x)
        """,
        """
            with open(path) as f:
                data = f.read()
        """,
        # A TD target that the loss reads (issue 22: cleanrl's DQN).
        """
            import torch
            for step in range(steps):
                with torch.no_grad():
                    target_max, _ = target_network(next_obs).max(dim=1)
                    td_target = rewards + gamma * target_max
                old_val = q_network(obs).gather(1, actions).squeeze()
                loss = F.mse_loss(td_target, old_val)
                loss.backward()
        """,
        # A rollout whose actions go to numpy (raises on a tensor that needs grad).
        """
            import torch
            with torch.no_grad():
                actions = actor(torch.Tensor(obs).to(device))
                actions = actions.cpu().numpy()
        """,
        # Statistics on tensors already in the graph: nothing new is built.
        """
            import torch
            with torch.no_grad():
                approx_kl = ((ratio - 1) - logratio).mean()
        """,
        """
            import torch


            def save_grid(images, path):
                torch.save(images.cpu(), path)


            def sample(netG, noise, path):
                with torch.no_grad():
                    save_grid(netG(noise), path)
        """,
        # Sampling decorated and called under inference_mode anyway (issue 22: a DDPM trainer).
        """
            import torch

            class Diffusion(nn.Module):
                @torch.inference_mode()
                def sample(self, n):
                    return self.model(torch.randn(n, 3, 32, 32))

            with torch.inference_mode():
                images = ema_model.sample(16)
        """,
    )

    def _evaluation(self, block: cst.With | cst.FunctionDef, ctx: Context) -> bool | NonSite:
        """A block that runs a model and whose values do not feed training; a NonSite for
        one whose values do (a TD target, a rollout): unwrapping it is another bug."""
        if _touches_parameters(block.body, ctx) or not _runs_forward(block.body, ctx):
            return False
        if feeds_training(block, ctx):
            return NonSite(
                "the block's values reach the training loss (a target, a rollout): "
                "computing them with gradients is another bug than evaluation building a graph"
            )
        return True

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | NonSite | None:
        if isinstance(node, cst.Decorator):
            function = ctx.parent(node)
            if not disables_grad(node.decorator, ctx):
                return None
            evaluation = self._evaluation(function, ctx)  # type: ignore[arg-type]
            if evaluation is not True:
                return evaluation or None
            if only_used_without_grad(function, ctx):  # type: ignore[arg-type]
                return NonSite("equivalent: every caller already runs with gradients off")
            return cst.RemoveFromParent()
        assert isinstance(node, cst.With)
        kept = [item for item in node.items if not disables_grad(item.item, ctx)]
        if len(kept) == len(node.items):
            return None
        evaluation = self._evaluation(node, ctx)
        if evaluation is not True:
            return evaluation or None
        if _grad_free_elsewhere(node.body, ctx):
            return NonSite(
                "equivalent: every call in the block is to a function decorated to disable gradients itself"
            )
        if kept:
            kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            return node.with_changes(items=kept)
        return cst.FlattenSentinel(dedented_body(node))
