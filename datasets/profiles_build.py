"""Build the profiler fixtures of exercise 05 into datasets/profiles/.

    python datasets/profiles_build.py [--out DIR] [--record]

Two kinds of fixture, each a Chrome trace (`<name>.trace.json.gz`, opens in Perfetto or
chrome://tracing) beside its key_averages table (`<name>.table.json`):

- `cuda_<scenario>`: synthetic CUDA profiles of the six scenarios the exercise diagnoses, for
  machines without a GPU. A small simulator plays one training step per ProfilerStep on one
  host thread (plus the autograd thread in backward) and one H100's streams, from a documented
  model of each scenario (`SCENARIOS`): the host pays a dispatch cost per op and a launch cost
  per kernel, a kernel starts when its stream is free and its launch has arrived, a sync blocks
  the host until the stream drains. Events follow the schema of real torch.profiler traces
  with CUDA activity (cpu_op, user_annotation, cuda_runtime with cbid and correlation, kernel
  and gpu_memcpy on the device's stream tracks, gpu_user_annotation, ac2g flow events). The
  table comes from torch's own FunctionEvent/EventList.key_averages() fed with those events.
  Fixed seeds and exact microsecond arithmetic: a rebuild gives the same bytes.
- `cpu_train_step`: a real torch.profiler recording (warmup 1, 3 active steps, shapes
  recorded, one intra-op thread) of a small transformer training step on the build machine.
  Real timings differ from run to run and machine to machine: `build_info.json` records what
  it was run on.
"""
from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import json
import math
import os
import platform
import random
import shutil
import sys
from pathlib import Path

import torch

OUT = Path(__file__).resolve().parent / "profiles"

HOST_PID, HOST_TID, BACKWARD_TID = 4242, 4242, 4288     # the python process, its main and autograd threads
DEVICE = 0
COMPUTE_STREAM, NCCL_STREAM, COPY_STREAM = 7, 28, 20
BASE_US = 2_000_000_000.0                               # traces count microseconds from an arbitrary origin
STEPS, WARMUP = 3, 1
CBID = {"cudaLaunchKernel": 211, "cudaMemcpyAsync": 41, "cudaStreamSynchronize": 131}
H100 = {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85045870592, "computeMajor": 9,
        "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
        "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "warpSize": 32, "sharedMemPerBlock": 49152,
        "sharedMemPerMultiprocessor": 233472, "numSms": 132, "sharedMemPerBlockOptin": 232448}

# The device model: sustained rates of an H100 SXM on the kernels below (about 60-70% of peak).
DEVICE_MODEL = {"gemm_tflops": 620.0, "attention_fwd_tflops": 420.0, "attention_bwd_tflops": 300.0,
                "memory_tb_s": 2.6, "min_kernel_us": 2.5, "launch_to_start_us": 4.0}
# The host model: what the Python process pays per op and per launch, in microseconds.
HOST_MODEL = {"op_us": 9.0, "view_op_us": 3.0, "launch_us": 5.5, "gap_us": 4.0, "memcpy_call_us": 9.0}

KERNELS = {
    "gemm": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas",
    "gemm_nn": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas",
    "gemm_small": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
    "flash_fwd": "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, false>(pytorch_flash::Flash_fwd_params)",
    "flash_bwd_dot": "void pytorch_flash::flash_bwd_dot_do_o_kernel<true, Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 8, cutlass::bfloat16_t> > >(pytorch_flash::Flash_bwd_params)",
    "flash_bwd": "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 8, cutlass::bfloat16_t> >, true, true, false, false, false, true, false, false>(pytorch_flash::Flash_bwd_params)",
    "flash_bwd_dq": "void pytorch_flash::flash_bwd_convert_dq_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 8, cutlass::bfloat16_t> > >(pytorch_flash::Flash_bwd_params, int)",
    "layer_norm": "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)",
    "layer_norm_bwd": "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<c10::BFloat16, float>(c10::BFloat16 const*, c10::BFloat16 const*, float const*, float const*, c10::BFloat16 const*, c10::BFloat16*, int)",
    "add": "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)",
    "mul": "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul> >(int, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul>)",
    "gelu": "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)",
    "gelu_bwd": "void at::native::vectorized_elementwise_kernel<4, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, std::array<char*, 3ul> >(int, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, std::array<char*, 3ul>)",
    "reduce": "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::sum_functor<float, float, float>, unsigned int, float, 4, 4> >(at::native::ReduceOp<float, at::native::sum_functor<float, float, float>, unsigned int, float, 4, 4>)",
    "log_softmax": "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(float*, float const*, int)",
    "log_softmax_bwd": "void at::native::(anonymous namespace)::cunn_SoftMaxBackward<4, float, float, float, at::native::(anonymous namespace)::LogSoftMaxBackwardEpilogue>(float*, float const*, float const*, long)",
    "nll": "void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*, float*, float const*, long const*, float const*, bool, long, long, long, long)",
    "nll_bwd": "void at::native::(anonymous namespace)::nll_loss_backward_reduce_cuda_kernel_2d<float, long>(float*, float const*, long const*, float const*, float const*, bool, int, int, long, long)",
    "fill": "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)",
    "embedding": "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, at::cuda::detail::TensorInfo<c10::BFloat16 const, unsigned int>, at::cuda::detail::TensorInfo<long const, unsigned int>, int, int, unsigned int, unsigned int, long)",
    "embedding_bwd": "void at::native::(anonymous namespace)::embedding_backward_feature_kernel<c10::BFloat16, float, long>(long const*, c10::BFloat16 const*, c10::BFloat16*, int, long, int, int)",
    "foreach": "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<{n}>, at::native::(anonymous namespace)::{functor}<float, {n}, {n_in}, 0>, float>(at::native::(anonymous namespace)::TensorListMetadata<{n}>, at::native::(anonymous namespace)::{functor}<float, {n}, {n_in}, 0>, float)",
    "allreduce": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
}


class Simulator:
    """One host (main thread + autograd thread) driving one GPU; writes trace events as it goes.

    Times are integers in nanoseconds inside, written as microseconds with three decimals, as
    kineto writes them, so the arithmetic is exact and the output reproducible.
    """

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.now = int(BASE_US * 1000)                 # host clock (ns)
        self.stream_free = {COMPUTE_STREAM: self.now, NCCL_STREAM: self.now, COPY_STREAM: self.now}
        self.tid = HOST_TID
        self.events: list[dict] = []
        self.open: list[dict] = []                      # host events entered and not yet left
        self.annotations: list[dict] = []               # user annotations whose device span is being tracked
        self.external_id = 0
        self.correlation = 100000
        self.event_index = 0

    # ---------------------------------------------------------------- clocks

    def jitter(self, us: float) -> int:
        """A duration in ns, +-10% around `us`: real hosts and devices never repeat exactly."""
        return max(1, round(us * 1000 * (0.9 + 0.2 * self.rng.random())))

    def host(self, us: float) -> None:
        self.now += self.jitter(us)

    # ---------------------------------------------------------------- host events

    @contextlib.contextmanager
    def op(self, name: str, shapes=None, cat: str = "cpu_op", cost_us: float | None = None):
        """An op (or a user annotation) on the current host thread, nesting what runs inside it."""
        self.external_id += 1
        args = {"External id": self.external_id, "Record function id": 0, "Ev Idx": self.event_index}
        if shapes is not None:
            args["Input Dims"] = shapes
            args["Input type"] = ["c10::BFloat16" if dims else "Scalar" for dims in shapes]
        event = {"ph": "X", "cat": cat, "name": name, "pid": HOST_PID, "tid": self.tid, "ts": self.now, "args": args}
        self.event_index += 1
        self.events.append(event)
        self.open.append(event)
        if cat == "user_annotation":
            event["device_span"] = None
            self.annotations.append(event)
        self.host(HOST_MODEL["op_us"] if cost_us is None else cost_us)
        try:
            yield event
        finally:
            self.host(0.5)
            event["dur"] = self.now - event["ts"]
            self.open.pop()
            if cat == "user_annotation":
                self.annotations.remove(event)

    def annotation(self, name: str):
        return self.op(name, cat="user_annotation", cost_us=1.0)

    def runtime(self, name: str, us: float, correlation: int) -> dict:
        event = {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": HOST_PID, "tid": self.tid, "ts": self.now,
                 "args": {"External id": self.innermost_op(), "cbid": CBID[name], "correlation": correlation}}
        self.host(us)
        event["dur"] = self.now - event["ts"]
        self.events.append(event)
        return event

    def innermost_op(self) -> int:
        return self.open[-1]["args"]["External id"] if self.open else 0

    def gap(self, us: float | None = None) -> None:
        """Python between two ops."""
        self.host(HOST_MODEL["gap_us"] if us is None else us)

    # ---------------------------------------------------------------- device work

    def launch(self, kernel: str, device_us: float, stream: int = COMPUTE_STREAM, grid=(132, 1, 1), block=(256, 1, 1)):
        """cudaLaunchKernel on the host; the kernel runs once its stream is free."""
        self.correlation += 1
        call = self.runtime("cudaLaunchKernel", HOST_MODEL["launch_us"], self.correlation)
        arrival = call["ts"] + round(DEVICE_MODEL["launch_to_start_us"] * 1000)
        start = max(self.stream_free[stream], arrival)
        duration = self.jitter(max(device_us, DEVICE_MODEL["min_kernel_us"]))
        self.stream_free[stream] = start + duration
        threads = block[0] * block[1] * block[2]
        self.device_event("kernel", kernel, start, duration, stream, {
            "queued": 0, "device": DEVICE, "context": 1, "stream": stream, "correlation": self.correlation,
            "registers per thread": 128, "shared memory": 65536 if "gemm" in kernel or "flash" in kernel else 0,
            "blocks per SM": round(grid[0] * grid[1] * grid[2] / H100["numSms"], 6),
            "warps per SM": round(grid[0] * grid[1] * grid[2] * threads / 32 / H100["numSms"], 6),
            "grid": list(grid), "block": list(block), "est. achieved occupancy %": 25 if "gemm" in kernel else 50})
        self.flow(call, self.correlation, stream, start)

    def memcpy(self, kind: str, nbytes: int, stream: int = COMPUTE_STREAM) -> None:
        """cudaMemcpyAsync and its copy on the device (HtoD from pinned memory, DtoH to pageable)."""
        self.correlation += 1
        call = self.runtime("cudaMemcpyAsync", HOST_MODEL["memcpy_call_us"], self.correlation)
        name = {"HtoD": "Memcpy HtoD (Pinned -> Device)", "DtoH": "Memcpy DtoH (Device -> Pageable)"}[kind]
        start = max(self.stream_free[stream], call["ts"] + round(DEVICE_MODEL["launch_to_start_us"] * 1000))
        duration = self.jitter(max(1.5, nbytes / 25e3))          # ~25 GB/s over PCIe 5, at least a round trip
        self.stream_free[stream] = start + duration
        self.device_event("gpu_memcpy", name, start, duration, stream, {
            "device": DEVICE, "context": 1, "stream": stream, "correlation": self.correlation, "bytes": nbytes,
            "memory bandwidth (GB/s)": round(nbytes / duration, 6)})
        self.flow(call, self.correlation, stream, start)

    def synchronize(self, stream: int = COMPUTE_STREAM) -> None:
        """cudaStreamSynchronize: the host blocks until the stream has drained."""
        self.correlation += 1
        event = {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": HOST_PID,
                 "tid": self.tid, "ts": self.now,
                 "args": {"External id": self.innermost_op(), "cbid": CBID["cudaStreamSynchronize"],
                          "correlation": self.correlation}}
        self.now = max(self.now + self.jitter(2.0), self.stream_free[stream] + self.jitter(3.0))
        event["dur"] = self.now - event["ts"]
        self.events.append(event)

    def device_event(self, cat: str, name: str, start: int, duration: int, stream: int, args: dict) -> None:
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": DEVICE, "tid": stream, "ts": start,
                            "dur": duration, "args": {"External id": self.innermost_op(), **args}})
        for annotation in self.annotations:                  # gpu_user_annotation spans its region's device work
            first, last = annotation["device_span"] or (start, start + duration)
            annotation["device_span"] = (min(first, start), max(last, start + duration))

    def flow(self, call: dict, correlation: int, stream: int, start: int) -> None:
        self.events.append({"ph": "s", "id": correlation, "pid": HOST_PID, "tid": call["tid"], "ts": call["ts"],
                            "cat": "ac2g", "name": "ac2g"})
        self.events.append({"ph": "f", "id": correlation, "pid": DEVICE, "tid": stream, "ts": start,
                            "cat": "ac2g", "name": "ac2g", "bp": "e"})

    # ---------------------------------------------------------------- composite ops

    def kernel_op(self, name: str, kernels, shapes=None):
        """An aten op that launches `kernels` [(kernel, device_us), ...]."""
        with self.op(name, shapes):
            for kernel, device_us in kernels:
                self.launch(KERNELS[kernel], device_us)

    def view(self, name: str = "aten::view") -> None:
        with self.op(name, cost_us=HOST_MODEL["view_op_us"]):
            pass
        self.gap()

    def item(self) -> None:
        """loss.item(): a 4-byte copy to the host, then a sync that waits for everything queued."""
        with self.op("aten::item"):
            with self.op("aten::_local_scalar_dense"):
                self.memcpy("DtoH", 4)
                self.synchronize()
        self.gap()

    @contextlib.contextmanager
    def backward_thread(self):
        """Backward ops run on the autograd engine's thread while the main thread waits in .backward()."""
        self.tid = BACKWARD_TID
        try:
            yield
        finally:
            self.tid = HOST_TID

    def finish(self) -> list[dict]:
        """All events in kineto's order, times in microseconds; gpu_user_annotation events added."""
        events = []
        for event in self.events:
            span = event.pop("device_span", None)
            if span is not None:
                events.append({"ph": "X", "cat": "gpu_user_annotation", "name": event["name"], "pid": DEVICE,
                               "tid": COMPUTE_STREAM, "ts": span[0], "dur": span[1] - span[0],
                               "args": {"External id": event["args"]["External id"]}})
            events.append(event)
        for event in events:
            event["ts"] = round(event["ts"] / 1000, 3)
            if "dur" in event:
                event["dur"] = round(event["dur"] / 1000, 3)
        return events


# ---------------------------------------------------------------- device cost model

def gemm_us(m: int, n: int, k: int) -> float:
    flops = 2.0 * m * n * k
    bytes_moved = 2.0 * (m * k + k * n + m * n)                       # bf16 operands
    return max(flops / (DEVICE_MODEL["gemm_tflops"] * 1e6), bytes_moved / (DEVICE_MODEL["memory_tb_s"] * 1e6))


def memory_us(nbytes: float) -> float:
    return nbytes / (DEVICE_MODEL["memory_tb_s"] * 1e6)


def attention_us(batch: int, heads: int, seq: int, head_dim: int, backward: bool, causal: bool = True) -> float:
    flops = 4.0 * batch * heads * seq * seq * head_dim * (0.5 if causal else 1.0)
    if backward:
        return 2.5 * flops / (DEVICE_MODEL["attention_bwd_tflops"] * 1e6)
    return flops / (DEVICE_MODEL["attention_fwd_tflops"] * 1e6)


# ---------------------------------------------------------------- a transformer training step

class Transformer:
    """A pre-norm decoder-only transformer in bf16: the ops and kernels of one training step."""

    def __init__(self, sim: Simulator, *, layers, width, ffn, heads, vocab, batch, seq):
        self.sim, self.layers, self.width, self.ffn, self.heads = sim, layers, width, ffn, heads
        self.vocab, self.batch, self.seq = vocab, batch, seq
        self.tokens = batch * seq
        self.head_dim = width // heads

    def linear(self, n_in: int, n_out: int) -> None:
        t = self.tokens
        with self.sim.op("aten::linear", [[t, n_in], [n_out, n_in], [n_out]]):
            with self.sim.op("aten::t", [[n_out, n_in]], cost_us=HOST_MODEL["view_op_us"]):
                with self.sim.op("aten::transpose", [[n_out, n_in], [], []], cost_us=HOST_MODEL["view_op_us"]):
                    with self.sim.op("aten::as_strided", [[n_out, n_in], [], [], []], cost_us=1.5):
                        pass
            self.sim.kernel_op("aten::addmm", [("gemm", gemm_us(t, n_out, n_in))], [[n_out], [t, n_in], [n_in, n_out], [], []])
        self.sim.gap()

    def elementwise(self, name: str, kernel: str, tensors: int = 3) -> None:
        self.sim.kernel_op(name, [(kernel, memory_us(tensors * 2.0 * self.tokens * self.width))],
                           [[self.batch, self.seq, self.width]] * 2)
        self.sim.gap()

    def layer_norm(self) -> None:
        shape = [[self.batch, self.seq, self.width], [], [self.width], [self.width], []]
        with self.sim.op("aten::layer_norm", shape):
            self.sim.kernel_op("aten::native_layer_norm", [("layer_norm", memory_us(4.0 * self.tokens * self.width))], shape)
        self.sim.gap()

    def attention(self) -> None:
        shape = [[self.batch, self.heads, self.seq, self.head_dim]] * 3
        for _ in range(3):
            self.sim.view("aten::view")
            self.sim.view("aten::transpose")
        with self.sim.op("aten::scaled_dot_product_attention", shape):
            with self.sim.op("aten::_scaled_dot_product_flash_attention", shape):
                self.sim.kernel_op("aten::_flash_attention_forward", [
                    ("flash_fwd", attention_us(self.batch, self.heads, self.seq, self.head_dim, backward=False))], shape)
        self.sim.gap()
        self.sim.view("aten::transpose")
        self.sim.view("aten::reshape")

    def forward(self) -> None:
        t, w = self.tokens, self.width
        self.sim.kernel_op("aten::embedding", [("embedding", memory_us(4.0 * t * w))], [[self.vocab, w], [self.batch, self.seq]])
        self.sim.gap()
        for _ in range(self.layers):
            self.layer_norm()
            self.linear(w, 3 * w)
            self.attention()
            self.linear(w, w)
            self.elementwise("aten::add", "add")
            self.layer_norm()
            self.linear(w, self.ffn)
            self.sim.kernel_op("aten::gelu", [("gelu", memory_us(4.0 * t * self.ffn))], [[self.batch, self.seq, self.ffn], []])
            self.sim.gap()
            self.linear(self.ffn, w)
            self.elementwise("aten::add", "add")
        self.layer_norm()
        self.linear(w, self.vocab)
        self.loss()

    def loss(self) -> None:
        t, v = self.tokens, self.vocab
        with self.sim.op("aten::cross_entropy_loss", [[t, v], [t], [], [], [], []]):
            with self.sim.op("aten::log_softmax", [[t, v], [], []]):
                self.sim.kernel_op("aten::_log_softmax", [("log_softmax", memory_us(6.0 * t * v))], [[t, v], [], []])
            with self.sim.op("aten::nll_loss_nd", [[t, v], [t], [], [], []]):
                with self.sim.op("aten::nll_loss", [[t, v], [t], [], [], []]):
                    self.sim.kernel_op("aten::nll_loss_forward", [("nll", 4.0)], [[t, v], [t], [], [], []])
        self.sim.gap()

    def backward_linear(self, n_in: int, n_out: int) -> None:
        t = self.tokens
        with self.sim.op("autograd::engine::evaluate_function: AddmmBackward0"):
            with self.sim.op("AddmmBackward0"):
                self.sim.view("aten::t")
                self.sim.kernel_op("aten::mm", [("gemm_nn", gemm_us(t, n_in, n_out))], [[t, n_out], [n_out, n_in]])
                self.sim.view("aten::t")
                self.sim.kernel_op("aten::mm", [("gemm", gemm_us(n_out, n_in, t))], [[n_out, t], [t, n_in]])
                self.sim.kernel_op("aten::sum", [("reduce", memory_us(2.0 * t * n_out))], [[t, n_out], [], [], []])
        self.accumulate_grad(2)

    def accumulate_grad(self, params: int) -> None:
        for _ in range(params):                 # set_to_none gradients: AccumulateGrad only steals the tensor
            with self.sim.op("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"):
                with self.sim.op("torch::autograd::AccumulateGrad"):
                    self.sim.view("aten::detach")

    def backward_elementwise(self, node: str, name: str, kernel: str, elements: float, tensors: int = 3) -> None:
        with self.sim.op(f"autograd::engine::evaluate_function: {node}"):
            with self.sim.op(node):
                self.sim.kernel_op(name, [(kernel, memory_us(tensors * 2.0 * elements))])

    def backward(self) -> None:
        t, w = self.tokens, self.width
        with self.sim.backward_thread():
            self.backward_elementwise("NllLossBackward0", "aten::nll_loss_backward", "nll_bwd", t, tensors=1)
            self.backward_elementwise("LogSoftmaxBackward0", "aten::_log_softmax_backward_data", "log_softmax_bwd",
                                      t * self.vocab)
            self.backward_linear(w, self.vocab)
            self.backward_elementwise("NativeLayerNormBackward0", "aten::native_layer_norm_backward", "layer_norm_bwd", t * w)
            for _ in range(self.layers):
                self.backward_linear(self.ffn, w)
                self.backward_elementwise("GeluBackward0", "aten::gelu_backward", "gelu_bwd", t * self.ffn)
                self.backward_linear(w, self.ffn)
                self.backward_elementwise("NativeLayerNormBackward0", "aten::native_layer_norm_backward",
                                          "layer_norm_bwd", t * w)
                self.backward_linear(w, w)
                with self.sim.op("autograd::engine::evaluate_function: ScaledDotProductFlashAttentionBackward0"):
                    with self.sim.op("ScaledDotProductFlashAttentionBackward0"):
                        with self.sim.op("aten::_scaled_dot_product_flash_attention_backward"):
                            self.sim.kernel_op("aten::_flash_attention_backward", [
                                ("flash_bwd_dot", memory_us(4.0 * t * w)),
                                ("flash_bwd", attention_us(self.batch, self.heads, self.seq, self.head_dim, backward=True)),
                                ("flash_bwd_dq", memory_us(6.0 * t * w))])
                self.backward_linear(w, 3 * w)
                self.backward_elementwise("NativeLayerNormBackward0", "aten::native_layer_norm_backward",
                                          "layer_norm_bwd", t * w)
            with self.sim.op("autograd::engine::evaluate_function: EmbeddingBackward0"):
                with self.sim.op("EmbeddingBackward0"):
                    with self.sim.op("aten::embedding_dense_backward"):
                        self.sim.kernel_op("aten::zeros", [("fill", memory_us(2.0 * self.vocab * w))])
                        self.sim.kernel_op("aten::index_put_", [("embedding_bwd", memory_us(8.0 * t * w))])
            self.accumulate_grad(1)

    def parameter_count(self) -> int:
        w = self.width
        per_layer = 3 * w * w + w * w + 2 * w * self.ffn + 4 * w
        return self.layers * per_layer + 2 * self.vocab * w

    def parameter_tensors(self) -> int:
        return self.layers * 12 + 4


def adamw_foreach(sim: Simulator, params: int, tensors: int) -> None:
    """torch.optim.AdamW with foreach=True (the default on CUDA): a handful of _foreach ops, each
    one multi_tensor_apply launch per chunk of the parameters, each a full pass over them."""
    chunks = max(1, math.ceil(params / (65536 * 320)), math.ceil(tensors / 24))
    passes = [("aten::_foreach_add_", "BinaryOpScalarFunctor", 2, 2), ("aten::_foreach_mul_", "BinaryOpScalarFunctor", 2, 1),
              ("aten::_foreach_lerp_", "TernaryOpScalarFunctor", 3, 2), ("aten::_foreach_mul_", "BinaryOpScalarFunctor", 2, 1),
              ("aten::_foreach_addcmul_", "PointwiseOpScalarFunctor", 3, 3), ("aten::_foreach_sqrt", "UnaryOpFunctor", 2, 1),
              ("aten::_foreach_div_", "BinaryOpScalarFunctor", 2, 1), ("aten::_foreach_add_", "BinaryOpScalarFunctor", 2, 1),
              ("aten::_foreach_addcdiv_", "PointwiseOpScalarFunctor", 4, 3)]
    with sim.annotation("Optimizer.step#AdamW.step"):
        for name, functor, depth, inputs in passes:
            kernel = KERNELS["foreach"].format(n=depth, n_in=inputs, functor=functor)
            with sim.op(name, [[]] * 2):
                for _ in range(chunks):
                    sim.launch(kernel, memory_us(4.0 * (depth + 1) * params / chunks), grid=(320, 1, 1), block=(512, 1, 1))
            sim.gap()
    with sim.annotation("Optimizer.zero_grad#AdamW.zero_grad"):
        sim.gap(30.0)                                     # set_to_none: a Python loop over the parameters


def data_loader_next(sim: Simulator, collate_ms: float, batch: int, seq: int) -> None:
    """The profiler's DataLoader region: fetching, decoding and collating a batch on the host."""
    with sim.annotation("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"):
        sim.host(collate_ms * 1000 * 0.97)                 # Python: decoding, tokenizing, augmenting ...
        with sim.op("aten::stack", [[batch, seq]]):
            with sim.op("aten::cat", [[batch, seq]]):
                sim.host(collate_ms * 1000 * 0.02)
    sim.gap()
    for _ in range(2):                                     # input ids and labels to the device
        with sim.op("aten::to", [[batch, seq], [], [], [], []]):
            with sim.op("aten::_to_copy", [[batch, seq], [], [], [], [], [], []]):
                with sim.op("aten::copy_", [[batch, seq], [batch, seq], []]):
                    sim.memcpy("HtoD", 8 * batch * seq)
        sim.gap()


# ---------------------------------------------------------------- the six scenarios

def transformer_step(sim, model: Transformer, *, collate_ms=1.0, allreduce=False):
    data_loader_next(sim, collate_ms, model.batch, model.seq)
    with sim.annotation("forward"):
        model.forward()
    with sim.annotation("backward"):
        with sim.op("aten::ones_like"):
            sim.launch(KERNELS["fill"], 2.0)
        if allreduce:
            backward_with_allreduce(sim, model)
        else:
            model.backward()
    adamw_foreach(sim, model.parameter_count(), model.parameter_tensors())
    sim.item()                                             # log the loss: one sync per step


def backward_with_allreduce(sim, model: Transformer) -> None:
    """DDP on 2 GPUs (this is rank 0): gradient buckets are all-reduced on NCCL's stream while the
    backward GEMMs go on, so device activity on the two streams overlaps."""
    original = model.backward_linear
    launched = [0]

    def backward_linear_then_bucket(n_in, n_out):
        original(n_in, n_out)
        launched[0] += 1
        if launched[0] % 4 == 0:                           # a 25 MB bucket is full
            with sim.op("nccl:all_reduce"):
                sim.launch(KERNELS["allreduce"], memory_us(6 * 25e6) * 9.0, stream=NCCL_STREAM,
                           grid=(16, 1, 1), block=(640, 1, 1))
            sim.gap()
    model.backward_linear = backward_linear_then_bucket
    try:
        model.backward()
    finally:
        model.backward_linear = original


def scenario_gemm(sim):
    """A 6-layer, width-3072 transformer (0.9B parameters) on 14 x 2048 tokens, rank 0 of a 2-GPU
    DDP job: the FFN and projection GEMMs fill the device; gradient all-reduces overlap them."""
    model = Transformer(sim, layers=6, width=3072, ffn=12288, heads=24, vocab=32000, batch=14, seq=2048)
    return lambda: transformer_step(sim, model, allreduce=True)


def scenario_attention(sim):
    """Long-context training: one 32k-token sequence through a narrow model (width 768, head
    dimension 128): attention's s^2 term dominates the GEMMs' s term."""
    model = Transformer(sim, layers=4, width=768, ffn=3072, heads=6, vocab=32000, batch=1, seq=32768)
    return lambda: transformer_step(sim, model)


def scenario_data_loading(sim):
    """A mid-sized model fed by a single-process DataLoader that decodes and augments on the host:
    about 200 ms per batch while the GPU needs about 80 ms for the step."""
    model = Transformer(sim, layers=4, width=2048, ffn=8192, heads=16, vocab=32000, batch=8, seq=1024)
    return lambda: transformer_step(sim, model, collate_ms=200.0)


def scenario_launch_overhead(sim):
    """An unfused, hand-written activation and normalisation chain on small tensors, applied in a
    Python loop: 600 tiny kernels per step, each shorter than its launch."""
    def step():
        with sim.annotation("forward"):
            for _ in range(60):
                for name, kernel in (("aten::mul", "mul"), ("aten::add", "add"), ("aten::mul", "mul"),
                                     ("aten::add", "add"), ("aten::gelu", "gelu"), ("aten::mul", "mul"),
                                     ("aten::add", "add"), ("aten::sum", "reduce")):
                    sim.kernel_op(name, [(kernel, 2.0)], [[64, 256], [64, 256]])
                    sim.gap(6.0)
        with sim.annotation("backward"):
            with sim.backward_thread():
                for _ in range(60):
                    sim.kernel_op("aten::mul", [("mul", 2.0)], [[64, 256], [64, 256]])
                    sim.kernel_op("aten::add", [("add", 2.0)], [[64, 256], [64, 256]])
        sim.item()
    return step


def scenario_host_sync(sim):
    """Gradient accumulation over 8 micro-batches, each followed by `loss.item()` and ~5 ms of
    host work on the value (NumPy metrics, logging): at every .item() the device drains, then
    idles until the host launches the next micro-batch."""
    model = Transformer(sim, layers=1, width=2048, ffn=8192, heads=16, vocab=8000, batch=4, seq=512)

    def step():
        for _ in range(8):
            with sim.annotation("forward"):
                model.forward()
            with sim.annotation("backward"):
                model.backward()
            sim.item()
            sim.host(5000.0)
        adamw_foreach(sim, model.parameter_count(), model.parameter_tensors())
    return step


def scenario_optimizer(sim):
    """A 1B-parameter embedding table with a small transformer on a tiny batch (2 x 128 tokens):
    AdamW's passes over every parameter dwarf the forward and backward."""
    model = Transformer(sim, layers=2, width=4096, ffn=4096, heads=32, vocab=256000, batch=2, seq=128)
    return lambda: transformer_step(sim, model)


SCENARIOS = {"gemm": (scenario_gemm, 1), "attention": (scenario_attention, 2), "data_loading": (scenario_data_loading, 3),
             "launch_overhead": (scenario_launch_overhead, 4), "host_sync": (scenario_host_sync, 5),
             "optimizer": (scenario_optimizer, 6)}


def simulate(name: str) -> dict:
    """The Chrome trace of WARMUP + STEPS simulated steps, keeping the STEPS active ones."""
    build, seed = SCENARIOS[name]
    sim = Simulator(seed)
    step = build(sim)
    for number in range(WARMUP + STEPS):
        if number == WARMUP:
            sim.events.clear()                             # the schedule's warmup steps are not recorded
            start = sim.now
        with sim.annotation(f"ProfilerStep#{number}"):
            step()
    events = sim.finish()
    return chrome_trace(events, start_ns=start, end_ns=max(sim.now, *sim.stream_free.values()), name=name)


def chrome_trace(events: list[dict], *, start_ns: int, end_ns: int, name: str) -> dict:
    """Kineto's envelope around the events: metadata, the profiler span, the window end marker."""
    start_us, end_us = round(start_ns / 1000, 3), round(end_ns / 1000, 3)
    meta = []
    for pid, label, threads in ((HOST_PID, "CPU", {HOST_TID: "python", BACKWARD_TID: "pt_autograd_0"}),
                                (DEVICE, "GPU 0", {COMPUTE_STREAM: "stream 7 ", COPY_STREAM: "stream 20 ",
                                                   NCCL_STREAM: "stream 28 "})):
        meta += [{"name": "process_name", "ph": "M", "ts": start_us, "pid": pid, "tid": 0, "args": {"name": "python"}},
                 {"name": "process_labels", "ph": "M", "ts": start_us, "pid": pid, "tid": 0, "args": {"labels": label}},
                 {"name": "process_sort_index", "ph": "M", "ts": start_us, "pid": pid, "tid": 0,
                  "args": {"sort_index": pid if pid else 5000000}}]
        for tid, thread in threads.items():
            meta += [{"name": "thread_name", "ph": "M", "ts": start_us, "pid": pid, "tid": tid,
                      "args": {"name": f"thread {tid} ({thread})" if pid == HOST_PID else thread}},
                     {"name": "thread_sort_index", "ph": "M", "ts": start_us, "pid": pid, "tid": tid,
                      "args": {"sort_index": tid}}]
    span = [{"ph": "X", "cat": "Trace", "ts": start_us, "dur": round(end_us - start_us, 3), "pid": "Spans",
             "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)", "args": {"Op count": 0}},
            {"name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g", "pid": "Traces",
             "tid": "Trace PyTorch Profiler", "ts": start_us},
            {"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": end_us}]
    return {"schemaVersion": 1, "deviceProperties": [H100], "record_shapes": 1,
            "trace_id": f"{abs(hash_text(name)):032X}"[:32], "displayTimeUnit": "ms",
            "baseTimeNanoseconds": 1700000000000000000, "traceEvents": meta + events + span,
            "traceName": f"cuda_{name}.trace.json"}


def hash_text(text: str) -> int:
    value = 1469598103934665603                              # FNV-1a: the same on every run (hash() is salted)
    for byte in text.encode():
        value = ((value ^ byte) * 1099511628211) % (1 << 128)
    return value


# ---------------------------------------------------------------- key_averages from trace events

def key_averages(trace: dict) -> list[dict]:
    """The table torch's profiler would print for these events: rebuild FunctionEvents the way
    torch.autograd.profiler._parse_kineto_results does (kernels and copies appended to the op
    whose External id they carry), then torch's own EventList.key_averages()."""
    from torch.autograd import DeviceType
    from torch.autograd.profiler_util import EventList, FunctionEvent

    host_cats, device_cats = {"cpu_op", "user_annotation", "cuda_runtime"}, {"kernel", "gpu_memcpy", "gpu_memset",
                                                                             "gpu_user_annotation"}
    functions, by_external_id, linked = [], {}, []
    for index, event in enumerate(e for e in trace["traceEvents"] if e.get("ph") == "X"):
        cat = event.get("cat")
        if cat not in host_cats | device_cats:
            continue
        on_device = cat in device_cats
        name = "ProfilerStep*" if event["name"].startswith("ProfilerStep#") else event["name"]
        function = FunctionEvent(
            id=index, name=name, thread=event["tid"], start_us=event["ts"], end_us=event["ts"] + event["dur"],
            input_shapes=event["args"].get("Input Dims", []), stack=[], use_device="cuda",
            device_type=DeviceType.CUDA if on_device else DeviceType.CPU, device_index=0,
            is_user_annotation=cat in ("user_annotation", "gpu_user_annotation"))
        functions.append(function)
        if cat in ("cpu_op", "user_annotation"):
            by_external_id[event["args"]["External id"]] = function
        elif cat in ("kernel", "gpu_memcpy", "gpu_memset"):
            linked.append((event["args"]["External id"], function))
    for external_id, device_function in linked:
        owner = by_external_id.get(external_id)
        if owner is not None:
            owner.append_kernel(device_function.name, 0, device_function.time_range.elapsed_us())
    events = EventList(functions, use_device="cuda")
    events._build_tree()
    return [{"name": a.key, "count": a.count, "self_cpu_us": round(a.self_cpu_time_total, 3),
             "cpu_total_us": round(a.cpu_time_total, 3), "self_device_us": round(a.self_device_time_total, 3),
             "device_total_us": round(a.device_time_total, 3), "device_type": a.device_type.name.lower()}
            for a in events.key_averages()]


# ---------------------------------------------------------------- the real CPU recording

def record_cpu_train_step() -> tuple[dict, list[dict]]:
    """A real profile of a small transformer training step on this machine's CPU, recorded by the
    exercise's reference `profile_steps`, so the fixture is exactly what a learner's recording is."""
    from torch.profiler import record_function

    from grader.course import COURSE, locate_module
    from grader.worker.loading import load_module

    profiling = load_module(locate_module(COURSE.solutions, COURSE.task_named("05")))
    torch.manual_seed(0)
    vocab, width, heads, seq, batch = 4096, 256, 4, 128, 5
    layer = torch.nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, batch_first=True, norm_first=True)
    model = torch.nn.ModuleDict({"embed": torch.nn.Embedding(vocab, width),
                                 "blocks": torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False),
                                 "head": torch.nn.Linear(width, vocab)})
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = torch.randint(vocab, (64, seq + 1))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(tokens), batch_size=batch, shuffle=True)
    batches = iter(loader)
    causal = torch.nn.Transformer.generate_square_subsequent_mask(seq)

    def step():
        nonlocal batches
        try:
            (ids,) = next(batches)
        except StopIteration:
            batches = iter(loader)
            (ids,) = next(batches)
        with record_function("forward"):
            hidden = model["blocks"](model["embed"](ids[:, :-1]), mask=causal, is_causal=True)
            loss = torch.nn.functional.cross_entropy(model["head"](hidden).flatten(0, 1), ids[:, 1:].flatten())
        with record_function("backward"):
            loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        table, trace = profiling.profile_steps(step, steps=STEPS, warmup=WARMUP)
    finally:
        torch.set_num_threads(threads)
    trace["traceName"] = "cpu_train_step.trace.json"
    return trace, table


# ---------------------------------------------------------------- files

def write_gzip_json(path: Path, obj) -> None:
    """gzip with no timestamp or file name inside, so equal JSON gives equal bytes."""
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as archive:
        archive.write(json.dumps(obj, separators=(",", ":")).encode())
    path.write_bytes(buffer.getvalue())


def write_json(path: Path, obj) -> None:
    path.write_text(json.dumps(obj, indent=1) + "\n", encoding="utf-8")


RECORDED = ("cpu_train_step.trace.json.gz", "cpu_train_step.table.json")


def build(out: Path, record: bool = False) -> dict:
    """Write every fixture into `out`. The synthetic ones are rebuilt (same bytes every time);
    the real CPU recording is made only with `record` or when there is none yet, and otherwise
    kept (copied from datasets/profiles when `out` is elsewhere): a recording is data, and the
    exercise's README quotes its numbers."""
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    for name, (builder, seed) in SCENARIOS.items():
        trace = simulate(name)
        write_gzip_json(out / f"cuda_{name}.trace.json.gz", trace)
        write_json(out / f"cuda_{name}.table.json", {
            "source": "synthetic", "scenario": name, "seed": seed, "steps": STEPS, "warmup": WARMUP,
            "model": " ".join((builder.__doc__ or "").split()), "rows": key_averages(trace)})
        files[f"cuda_{name}"] = {"source": "synthetic", "seed": seed}
    if record or not all((OUT / name).exists() for name in RECORDED):
        trace, table = record_cpu_train_step()
        write_gzip_json(out / RECORDED[0], trace)
        write_json(out / RECORDED[1], {
            "source": "recorded", "scenario": "train_step", "steps": STEPS, "warmup": WARMUP, "recorded_on": machine(),
            "model": "2-layer pre-norm transformer (width 256, 4 heads, causal, vocab 4096), batch 5 x 128 tokens "
                     "from a DataLoader, AdamW; one intra-op thread", "rows": table})
    elif out.resolve() != OUT.resolve():
        for name in RECORDED:
            shutil.copyfile(OUT / name, out / name)
    files["cpu_train_step"] = {"source": "recorded",
                               "recorded_on": json.loads((out / RECORDED[1]).read_text())["recorded_on"]}
    info = {"generator": "datasets/profiles_build.py", "files": files, "device_model": DEVICE_MODEL,
            "host_model": HOST_MODEL, "synthetic_tables_by": f"torch {torch.__version__} key_averages()"}
    write_json(out / "build_info.json", info)
    return info


def machine() -> dict:
    """What the real recording ran on: its numbers are this machine's, not a reference."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {"python": platform.python_version(), "torch": torch.__version__, "platform": platform.platform(),
            "cpu": cpu, "cpu_count": os.cpu_count(), "intra_op_threads": 1}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"output folder (default: {OUT})")
    parser.add_argument("--record", action="store_true",
                        help="record the real CPU profile anew (its timings are this machine's; update the README)")
    args = parser.parse_args(argv)
    info = build(args.out, record=args.record)
    print(json.dumps(info, indent=1))


if __name__ == "__main__":
    sys.exit(main())
