"""Trusted probes for the hidden suite of exercise 02: they build models from data, watch the
learner's loop from the outside (which model it built, what every optimizer step did) and
return data only."""
import contextlib

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
from transformers import AutoConfig, AutoModelForCausalLM

# The global generator's state when train() is called: not the run's seed, so a model or a dropout
# mask drawn without seeding first comes out other than the contract's.
FOREIGN_SEED = 987654321
# Likewise the CPU's default autocast dtype while train() runs: float16, not bf16, so a loop that leaves
# autocast's dtype to the default runs its forward passes in another precision than amp="bf16" asks for.
FOREIGN_AUTOCAST_DTYPE = torch.float16


class Preempted(Exception):
    """Raised from an optimizer-step hook to interrupt a run, as a preemption would."""


def flat_parameters(model):
    return torch.cat([p.detach().float().flatten() for p in model.parameters()])


def gradient_norm(model):
    """The norm of the whole gradient the parameters hold (those without one count as zero)."""
    norms = [p.grad.detach().float().norm() for p in model.parameters() if p.grad is not None]
    return float(torch.linalg.vector_norm(torch.stack(norms))) if norms else 0.0


def _on_cpu(value):
    return value.detach().to("cpu") if torch.is_tensor(value) else None


def _forward_record(model, args, kwargs):
    """What one forward pass of the learner's model saw: its batch, and the state it ran in."""
    input_ids = kwargs.get("input_ids", args[0] if args else None)
    device_type = input_ids.device.type if torch.is_tensor(input_ids) else "cpu"
    return {"input_ids": _on_cpu(input_ids), "attention_mask": _on_cpu(kwargs.get("attention_mask")),
            "grad": torch.is_grad_enabled(), "training": model.training,
            "autocast": torch.is_autocast_enabled(device_type) and torch.get_autocast_dtype(device_type) == torch.bfloat16}


@contextlib.contextmanager
def models_built(on_build=lambda model: None):
    """Record every model AutoModelForCausalLM.from_config / from_pretrained returns, and hand
    each to `on_build` (to hook it) as it is built."""
    built = []
    originals = {name: getattr(AutoModelForCausalLM, name) for name in ("from_config", "from_pretrained")}

    def recording(original):
        def build(*args, **kwargs):
            model = original(*args, **kwargs)
            built.append(model)
            on_build(model)
            return model
        return build

    for name, original in originals.items():
        setattr(AutoModelForCausalLM, name, recording(original))
    try:
        yield built
    finally:
        for name, original in originals.items():
            setattr(AutoModelForCausalLM, name, original)


def watch_training(module, cfg, interrupt_after_step=None):
    """Run the learner's train(cfg) and report, for every optimizer step, the forward passes since
    the previous step (batch, grad mode, train mode, autocast), the norm of the gradient it applied,
    the learning rate it used and the parameters after it; the parameters, their dtypes and torch's
    generator state at the first forward pass; the dtypes of parameters and optimizer state at the
    end, and how many parameters still hold a gradient. With `interrupt_after_step`, the run is
    interrupted right after that step."""
    steps, dtypes, forwards, initial, applied = [], {}, [], {}, []

    def before_forward(model, args, kwargs):
        if not initial:
            initial.update(params=flat_parameters(model), dtypes=sorted({str(p.dtype) for p in model.parameters()}),
                           rng=torch.get_rng_state())
        forwards.append(_forward_record(model, args, kwargs))

    def before_step(optimizer, args, kwargs):
        applied.append(gradient_norm(built[-1]))

    def after_step(optimizer, args, kwargs):
        model = built[-1]
        steps.append({"lr": optimizer.param_groups[0]["lr"], "params": flat_parameters(model), "forwards": forwards[:],
                      "applied_grad_norm": applied.pop() if applied else None})
        forwards.clear()
        dtypes["params"] = sorted({str(p.dtype) for p in model.parameters()})
        dtypes["optimizer_state"] = sorted({str(v.dtype) for state in optimizer.state.values()
                                            for v in state.values() if torch.is_tensor(v) and v.ndim > 0})
        if interrupt_after_step is not None and len(steps) == interrupt_after_step:
            raise Preempted()

    torch.manual_seed(FOREIGN_SEED)
    default_autocast_dtype = torch.get_autocast_dtype("cpu")
    torch.set_autocast_dtype("cpu", FOREIGN_AUTOCAST_DTYPE)
    with models_built(lambda model: model.register_forward_pre_hook(before_forward, with_kwargs=True)) as built:
        hooks = [register_optimizer_step_pre_hook(before_step), register_optimizer_step_post_hook(after_step)]
        try:
            result = module.train(cfg)
        except Preempted:
            result = None
        finally:
            for hook in hooks:
                hook.remove()
            torch.set_autocast_dtype("cpu", default_autocast_dtype)
    grads_left = sum(p.grad is not None for p in built[-1].parameters()) if built else 0
    return {"result": result, "steps": steps, "dtypes": dtypes, "models_built": len(built), "initial": initial,
            "grads_left": grads_left}


def _tiny_model(config, seed, frozen):
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**config), dtype=torch.float32)
    for name, parameter in model.named_parameters():
        if any(part in name for part in frozen):
            parameter.requires_grad_(False)
    return model


def param_group_names(module, config, weight_decay, frozen=()):
    """The learner's param_groups on a model built from `config`, with parameters given back
    by name. A parameter that is not the model's own is reported as "<foreign>"."""
    model = _tiny_model(config, 0, frozen)
    names = {id(p): n for n, p in model.named_parameters()}
    groups = module.param_groups(model, weight_decay)
    return [{"names": [names.get(id(p), "<foreign>") for p in group["params"]],
             "options": {k: v for k, v in group.items() if k != "params"}} for group in groups]


def watch_evaluate(module, config, batches, start_in_train_mode):
    """The learner's evaluate on a model built from `config`: its value, whether the forward
    passes ran without grad and in eval mode, and the mode the model is left in."""
    model = _tiny_model(config, 0, ())
    model.train(start_in_train_mode)
    seen = []
    model.register_forward_pre_hook(lambda m, args: seen.append((torch.is_grad_enabled(), m.training)))
    value = module.evaluate(model, batches)
    return {"value": value, "forwards": len(seen), "grad_enabled": [g for g, _ in seen],
            "training_during_forward": [t for _, t in seen], "training_after": model.training}


def watch_plot(module, log_path, png_path):
    """The learner's plot_curves, with the figure it saves captured: its axes' scales and lines."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    figures = []
    original = Figure.savefig

    def capture(self, *args, **kwargs):
        figures.append(self)
        return original(self, *args, **kwargs)

    Figure.savefig = capture
    try:
        module.plot_curves(log_path, png_path)
    finally:
        Figure.savefig = original
    axes = [{"xscale": ax.get_xscale(), "top": float(ax.get_position().y1), "lines": [{"x": [float(v) for v in line.get_xdata()],
                                                   "y": [float(v) for v in line.get_ydata()]}
                                                  for line in ax.get_lines()]}
            for figure in figures[-1:] for ax in figure.get_axes()]
    return {"figures_saved": len(figures), "axes": axes}


def watch_cuda_transfers(module, cfg):
    """Run train(cfg) on CUDA and report how batch tensors reached the device: pinned or not,
    non_blocking or not."""
    transfers = []
    original = torch.Tensor.to

    def recording(self, *args, **kwargs):
        target = args[0] if args else kwargs.get("device")
        if self.device.type == "cpu" and self.dtype == torch.long and str(target).startswith("cuda"):
            transfers.append({"pinned": self.is_pinned(), "non_blocking": bool(kwargs.get("non_blocking", False))})
        return original(self, *args, **kwargs)

    torch.Tensor.to = recording
    try:
        result = module.train(cfg)
    finally:
        torch.Tensor.to = original
    return {"transfers": transfers, "final_eval_loss": result["final_eval_loss"]}


def watch_final_model(module, cfg):
    """Run the learner's train(cfg); its result, and the parameters of the model it built (the
    last one, if several), as they are once train has returned."""
    with models_built() as built:
        result = module.train(cfg)
    return {"result": result, "params": flat_parameters(built[-1]) if built else None}
