"""The ``drop_detach_in_loss`` operator (DropDetachInLoss)."""

from __future__ import annotations

import libcst as cst

from mutations.gradient._loss_flow import closure, dependencies, feeds_loss
from mutator.context import Context
from mutator.operator import Example, NonSite, Replacement, Swap
from mutator.semantics import (
    TRAINING_CONTEXTS,
    bound_names,
    code_of,
    in_no_grad,
    is_model,
    method_name,
    optimizer_class,
    receiver,
    single_assignment,
)

# A chain that leaves autograd whatever the detach: nothing to differentiate afterwards.
_LEAVES_GRAPH = frozenset({"numpy", "item", "tolist"})


def _model_call(call: cst.Call, ctx: Context) -> bool:
    func = call.func
    if is_model(func, ctx):
        return True
    return isinstance(func, cst.Attribute) and is_model(func.value, ctx)  # model.pi(s)


def _model_of(call: cst.Call, ctx: Context) -> str:
    """The model a model call runs, as code: ``net`` of ``net(x)`` and ``net.v(s)``."""
    func = call.func
    return code_of(func if is_model(func, ctx) else func.value)  # type: ignore[attr-defined]


def _models_computing(expr: cst.BaseExpression, ctx: Context) -> set[str]:
    """The models whose outputs ``expr`` is computed from in its scope (by name)."""
    calls = [c for c in ctx.nodes_within(expr, cst.Call) if _model_call(c, ctx)]  # type: ignore[arg-type]
    scope = ctx.enclosing_function(expr)
    read = {name.value for name in ctx.nodes_within(expr, cst.Name)}  # type: ignore[attr-defined]
    names = closure(read, dependencies(scope, ctx))
    for assign in ctx.nodes(cst.Assign):
        if ctx.enclosing_function(assign) is not scope:
            continue
        bound = {n for t in assign.targets for n in bound_names(t.target)}  # type: ignore[attr-defined]
        if bound & names:
            calls += [
                c
                for c in ctx.nodes_within(assign.value, cst.Call)  # type: ignore[attr-defined]
                if _model_call(c, ctx)  # type: ignore[arg-type]
            ]
    return {_model_of(call, ctx) for call in calls}  # type: ignore[arg-type]


def _trained_models(ctx: Context) -> set[str] | None:
    """The models whose ``parameters()`` some optimizer is built on, as code (None: an
    optimizer whose parameters are not all spelled ``<model>.parameters()``, or none)."""
    trained: set[str] = set()
    for call in ctx.nodes(cst.Call):
        if optimizer_class(call, ctx) is None:
            continue
        params = [c for c in ctx.nodes_within(call, cst.Call) if method_name(c) == "parameters"]  # type: ignore[arg-type]
        if not params:
            return None
        trained |= {code_of(receiver(c)) for c in params}  # type: ignore[arg-type]
    return trained or None


class DropDetachInLoss(Swap):
    """Remove a ``.detach()`` from a term of the backwarded loss.

    Bug: a factor the loss must treat as a constant (a policy-gradient baseline or
    importance weight, a TD or bootstrap target, a stop-gradient branch) is left attached to
    the graph. Real fix: seungeunrho/minimalRL@36d0f5b (ACER's bias-correction term
    weighted the log-policy by the live policy ``pi`` instead of ``pi.detach()``); the same
    kind recurs wherever a target or weight is computed by the network being trained.
    Impact: the gradient also flows through the term meant as a constant: the update
    follows another objective (a residual-gradient TD update, a policy pushed to change its
    own weights), learning slows or drifts; nothing crashes. Not sites: the detached input
    of another model's forward (``gan_fake_not_detached``), a recurrent state re-bound to
    itself (``drop_hidden_detach``), a value leaving autograd (``.numpy()``, ``.item()``),
    and, as a non-site, a detach of a tensor no model computes (equivalent). Fix: keep the
    ``.detach()`` (or compute the term under ``torch.no_grad()``). Check: assert the
    constant term has ``requires_grad == False``, or compare gradients with and without
    the term held fixed.
    """

    name = "drop_detach_in_loss"
    category = "gradient"
    summary = "A .detach() removed from a loss term: gradient flows through a 'constant'."
    expected = "degrades"
    witness = (
        "differs trained_per_step|optimizer.grad",
        "gradient flows through the term the fix detached",
    )
    crashes = ("backward through the graph a second time",)
    node_types = (cst.Call,)
    contexts = TRAINING_CONTEXTS
    examples = (
        Example(
            before="""
                pi = model.pi(s)
                loss = -(advantage * pi.detach() * torch.log(pi)).sum()
                loss.backward()
            """,
            after="""
                pi = model.pi(s)
                loss = -(advantage * pi * torch.log(pi)).sum()
                loss.backward()
            """,
        ),
        Example(  # a TD target from the trained network
            before="""
                td_target = r + gamma * net.v(s_prime) * done_mask
                loss = F.smooth_l1_loss(net.v(s), td_target.detach())
                optimizer.zero_grad()
                loss.mean().backward()
            """,
            after="""
                td_target = r + gamma * net.v(s_prime) * done_mask
                loss = F.smooth_l1_loss(net.v(s), td_target)
                optimizer.zero_grad()
                loss.mean().backward()
            """,
        ),
    )
    non_examples = (
        # The detached fake fed to the discriminator: gan_fake_not_detached's bug.
        """
            fake = netG(noise)
            loss_d = criterion(netD(fake.detach()), zeros)
            loss_d.backward()
        """,
        # Handed with the critic to a penalty helper: the GAN's detached fake batch again.
        """
            fake = generator(z)
            gp = compute_gradient_penalty(critic, real, fake.detach())
            d_loss = critic(fake.detach()).mean() - critic(real).mean() + 10 * gp
            d_loss.backward()
        """,
        # A hidden state re-bound to itself: drop_hidden_detach's bug.
        """
            for x, y in batches:
                hidden = hidden.detach()
                out, hidden = model(x, hidden)
                loss = criterion(out, y)
                loss.backward()
        """,
        # Logging: the value leaves autograd anyway.
        """
            out = model(x)
            loss = criterion(out, y)
            loss.backward()
            print(out.detach().cpu().numpy())
        """,
        # A target network no optimizer trains: its gradient is never used (equivalent).
        """
            q_net, target_net = Net(), Net()
            optimizer = torch.optim.Adam(q_net.parameters())
            q_next = target_net(s_next).detach()
            loss = F.mse_loss(q_net(s), r + gamma * q_next.max(1)[0])
            loss.backward()
        """,
        # Targets from the data: nothing to detach from (equivalent).
        """
            target = torch.tensor(batch_targets)
            loss = ((model(x) - target.detach()) ** 2).mean()
            loss.backward()
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | NonSite | None:
        assert isinstance(node, cst.Call)
        if method_name(node) != "detach" or node.args:
            return None
        detached = receiver(node)
        if isinstance(detached, cst.Call) and method_name(detached) == "detach":
            return None
        statement = ctx.statement_of(node)
        if statement is None or in_no_grad(node, ctx) or not feeds_loss(statement, ctx):
            return None
        holder = ctx.parent(node)
        if isinstance(holder, cst.Arg):
            consumer = ctx.parent(holder)
            if isinstance(consumer, cst.Call) and (
                _model_call(consumer, ctx) or any(is_model(a.value, ctx) for a in consumer.args)
            ):
                return None  # the detached input of another model (a GAN's fake batch)
        outer = ctx.parent(holder) if isinstance(holder, cst.Attribute) else None
        if isinstance(outer, cst.Call) and method_name(outer) in _LEAVES_GRAPH:
            return None
        assign = single_assignment(statement)
        if assign is not None:
            bound = {n for t in assign.targets for n in bound_names(t.target)}
            read = {n.value for n in ctx.nodes_within(detached, cst.Name)}  # type: ignore[attr-defined]
            if bound and bound <= read:
                return None  # ``hidden = hidden.detach()``: a state cut between steps
        models = _models_computing(detached, ctx)
        if not models:
            return NonSite("equivalent: no model computes the detached tensor here")
        trained = _trained_models(ctx)
        if trained is not None and not models & trained:
            return NonSite(
                f"equivalent: only {', '.join(sorted(models))} computes it, and no optimizer trains it"
            )
        if detached.lpar:
            return detached  # ``(log_prob + target).detach()`` keeps its parentheses
        return detached.with_changes(lpar=node.lpar, rpar=node.rpar)
