"""Probes of the visible tests: they run beside your module (in the worker during official
grading), build the objects a call needs from data, watch your loop from the outside (the model
it built, each optimizer step, each forward pass) and return what they saw, as data."""
import torch
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
from transformers import AutoModelForCausalLM, LlamaConfig


class StopTraining(Exception):
    """Raised after an optimizer step to cut a run short, as a preempted job is."""


def flat(parameters):
    """Every value of the parameters, as one float32 vector."""
    return torch.cat([p.detach().float().reshape(-1) for p in parameters])


def _norm_of_grads(parameters):
    grads = [p.grad.detach().float().reshape(-1) for p in parameters if p.grad is not None]
    return float(torch.linalg.vector_norm(torch.cat(grads))) if grads else 0.0


def _optimizer_parameters(optimizer):
    return [p for group in optimizer.param_groups for p in group["params"]]


class _Builds:
    """Every model AutoModelForCausalLM builds while the block runs, each handed to `on_build`."""

    def __init__(self, on_build):
        self.on_build, self.models, self.own = on_build, [], {}

    def __enter__(self):
        for name in ("from_config", "from_pretrained"):
            self.own[name] = vars(AutoModelForCausalLM).get(name)     # None: inherited from the base class
            setattr(AutoModelForCausalLM, name, self._wrap(getattr(AutoModelForCausalLM, name)))
        return self

    def _wrap(self, build):
        def building(*args, **kwargs):
            model = build(*args, **kwargs)
            self.models.append(model)
            self.on_build(model)
            return model
        return building

    def __exit__(self, *exc_info):
        for name, own in self.own.items():
            if own is None:
                delattr(AutoModelForCausalLM, name)
            else:
                setattr(AutoModelForCausalLM, name, own)


def watch_train(module, cfg, stop_after=None):
    """Run your train(cfg) and report every optimizer step: the training forward passes before it
    (their train mode and autocast), how many parameters already held a gradient when each step's
    first forward pass began, the norm of the gradient the optimizer applied, the learning rate it
    used. Also: the model's parameters at its first forward pass and at the end, the dtypes of
    parameters and AdamW state, and how many parameters hold a gradient once train returns. With
    `stop_after`, the run is cut short after that many optimizer steps."""
    steps, pending, first = [], [], {}

    def before_forward(model, args, kwargs):
        if not torch.is_grad_enabled():
            return
        if not first:
            first["params"] = flat(model.parameters())
        if not pending:
            first.setdefault("grads_at_step_start", []).append(sum(p.grad is not None for p in model.parameters()))
        device = "cuda" if next(model.parameters()).is_cuda else "cpu"
        pending.append({"training": model.training,
                        "bf16_autocast": torch.is_autocast_enabled(device)
                        and torch.get_autocast_dtype(device) == torch.bfloat16})

    def before_step(optimizer, args, kwargs):
        steps.append({"forwards": pending[:], "lr": optimizer.param_groups[0]["lr"],
                      "applied_grad_norm": _norm_of_grads(_optimizer_parameters(optimizer))})
        pending.clear()

    def after_step(optimizer, args, kwargs):
        steps[-1]["state_dtypes"] = sorted({str(value.dtype) for state in optimizer.state.values()
                                            for value in state.values() if torch.is_tensor(value) and value.ndim})
        if stop_after is not None and len(steps) == stop_after:
            raise StopTraining

    def hook(model):
        return model.register_forward_pre_hook(before_forward, with_kwargs=True)

    handles = [register_optimizer_step_pre_hook(before_step), register_optimizer_step_post_hook(after_step)]
    try:
        with _Builds(hook) as built:
            try:
                result = module.train(cfg)
            except StopTraining:
                result = None
    finally:
        for handle in handles:
            handle.remove()
    model = built.models[-1] if built.models else None
    return {"result": result, "steps": steps, "initial_params": first.get("params"),
            "grads_at_step_start": first.get("grads_at_step_start", []),
            "final_params": flat(model.parameters()) if model is not None else None,
            "param_dtypes": sorted({str(p.dtype) for p in model.parameters()}) if model is not None else [],
            "grads_left": sum(p.grad is not None for p in model.parameters()) if model is not None else 0}


def build_micro_llama(config, seed):
    """The model the tests build too: LlamaConfig(**config), weights drawn from `seed`."""
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(LlamaConfig(**config), dtype=torch.float32)


def param_group_report(module, config, weight_decay, frozen_prefixes=()):
    """Your param_groups on a micro Llama whose parameters under `frozen_prefixes` are frozen: per
    group, the parameter names it holds and its options."""
    model = build_micro_llama(config, 0)
    for name, parameter in model.named_parameters():
        if name.startswith(tuple(frozen_prefixes)):
            parameter.requires_grad_(False)
    name_of = {id(parameter): name for name, parameter in model.named_parameters()}
    return [{"names": [name_of.get(id(p), "(not a parameter of the model)") for p in group["params"]],
             "options": {key: value for key, value in group.items() if key != "params"}}
            for group in module.param_groups(model, weight_decay)]


def watch_evaluate(module, config, seed, batches, train_mode):
    """Your evaluate on a micro Llama (built from `config` and `seed`, put in train mode or not):
    what it returned, the grad and train modes of its forward passes, the mode it left."""
    model = build_micro_llama(config, seed).train(train_mode)
    passes = []
    model.register_forward_pre_hook(lambda m, args: passes.append({"grad": torch.is_grad_enabled(),
                                                                   "training": m.training}))
    value = module.evaluate(model, batches)
    return {"value": value, "passes": passes, "training_after": model.training}


def watch_plot(module, log_path, png_path):
    """Your plot_curves, with the figure it saves read back: each axes' top edge, x scale and the
    lines it draws."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    saved, save = [], Figure.savefig

    def saving(figure, *args, **kwargs):
        saved.append(figure)
        return save(figure, *args, **kwargs)

    Figure.savefig = saving
    try:
        module.plot_curves(log_path, png_path)
    finally:
        Figure.savefig = save
    axes = saved[-1].get_axes() if saved else []
    return [{"top": float(ax.get_position().y1), "xscale": ax.get_xscale(),
             "lines": [[list(map(float, line.get_xdata())), list(map(float, line.get_ydata()))]
                       for line in ax.get_lines()]} for ax in axes]


def warm_up():
    """Run once by `grader watch`, in its own process, before its first check (never while
    grading): the libraries' first calls that every check would otherwise pay again (a tiny model
    built, stepped under autocast, saved and read back; transformers' schedules imported), so that
    each check, forked from that process, finds them done. It runs none of your code."""
    import tempfile

    from transformers import get_cosine_schedule_with_warmup

    with torch.random.fork_rng(), tempfile.TemporaryDirectory() as folder:
        tiny = LlamaConfig(vocab_size=16, hidden_size=8, intermediate_size=8, num_hidden_layers=1,
                           num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=8)
        tiny.save_pretrained(folder)
        model = AutoModelForCausalLM.from_config(LlamaConfig.from_pretrained(folder), dtype=torch.float32)
        adam = torch.optim.AdamW(model.parameters())
        get_cosine_schedule_with_warmup(adam, 1, 2).step()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            model(input_ids=torch.tensor([[1, 2, 3]])).logits.float().sum().backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        adam.step()
        with torch.no_grad():
            model.eval()(input_ids=torch.tensor([[3, 2]]))
        torch.save(adam.state_dict(), f"{folder}/adam.pt")
        torch.load(f"{folder}/adam.pt")
        model.save_pretrained(folder)
        AutoModelForCausalLM.from_pretrained(folder)
