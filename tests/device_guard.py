"""A stand-in accelerator for tests on a machine without one: the `guard` device.

`torch.utils.rename_privateuse1_backend("guard")` gives torch a device type of that name; a tensor
"on" it is a wrapper (`GuardTensor`) whose data lives in CPU memory, and `DeviceGuard`, a dispatch
mode, runs every operation on the wrapped CPU data. What it adds is the accelerator's rules:

- an operation that mixes a guard tensor with a CPU tensor of one element or more fails, as it
  does on CUDA ("Expected all tensors to be on the same device"); 0-dim CPU scalars, CPU indices
  into a guard tensor and copies across devices are allowed, as on CUDA;
- a CPU generator driving a random operation on guard tensors fails, as on CUDA;
- `.to("guard")` / `device="guard"` make guard tensors; `.cpu()` / `.to("cpu")` give plain ones.

So code that writes "cpu" (or nothing) where it means the model's device fails under the guard with
the model on `guard`, while the arithmetic stays exactly the CPU's.
"""

from __future__ import annotations

import contextlib

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

NAME = "guard"
_renamed = False


def guard_device() -> torch.device:
    global _renamed
    if not _renamed:
        # torch's own setup for a backend written in Python: a device module, hooks and a device guard
        torch.utils.backend_registration._setup_privateuseone_for_python_backend(rename=NAME,
                                                                                 backend_module=_Module())
        _renamed = True
    return torch.device(NAME, 0)


class _Module(torch.utils.backend_registration._DummyBackendModule):
    """What torch asks of a device's module; AMP (which activation checkpointing consults for every
    registered device) asks for the dtypes it may autocast to."""

    def get_amp_supported_dtype(self) -> list[torch.dtype]:
        return [torch.bfloat16]


class GuardTensor(torch.Tensor):
    inner: torch.Tensor

    @staticmethod
    def __new__(cls, inner: torch.Tensor, requires_grad: bool = False):
        t = torch.Tensor._make_wrapper_subclass(cls, inner.shape, strides=inner.stride(), dtype=inner.dtype,
                                                device=guard_device(), requires_grad=requires_grad,
                                                storage_offset=inner.storage_offset())
        t.inner = inner
        return t

    def tolist(self):  # an accelerator tensor's tolist copies to the host
        return self.inner.tolist()

    def untyped_storage(self):  # an accelerator tensor has a storage (checkpoint writers ask for its address)
        return self.inner.untyped_storage()

    def numpy(self, *, force: bool = False):
        raise TypeError(f"can't convert {NAME} device tensor to numpy: use .cpu() first, as on CUDA")

    def __repr__(self):
        return f"GuardTensor({self.inner!r})"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        with DeviceGuard():  # reached only when no mode is active: apply the rules anyway
            return func(*args, **(kwargs or {}))


class DeviceMixError(RuntimeError):
    pass


def _is_guard_device(d) -> bool:
    if d is None:
        return False
    return torch.device(d).type == NAME


_CROSS_DEVICE_OK = {"copy_", "_to_copy", "_copy_from", "_copy_from_and_resize"}
_INDEXING = {"index", "index_put", "index_put_", "_index_put_impl_"}


class DeviceGuard(TorchDispatchMode):
    """Runs guard tensors' operations on their CPU data, refusing what an accelerator refuses."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        name = func._schema.name.split("::")[-1]
        flat, _ = tree_flatten((args, kwargs))
        tensors = [t for t in flat if isinstance(t, torch.Tensor)]
        guarded = [t for t in tensors if isinstance(t, GuardTensor)]
        target = kwargs.get("device")
        if guarded and name not in _CROSS_DEVICE_OK:
            index_args = set()
            if name in _INDEXING and len(args) > 1:  # CPU indices into an accelerator tensor are allowed
                index_args = {id(t) for t in tree_flatten(args[1])[0] if isinstance(t, torch.Tensor)}
            plain = [t for t in tensors if not isinstance(t, GuardTensor) and t.dim() > 0 and t.device.type == "cpu"
                     and id(t) not in index_args]
            if plain:
                raise DeviceMixError(f"{func}: mixes {NAME} tensors with CPU tensors of shape "
                                     f"{[tuple(t.shape) for t in plain]}")
            gen = kwargs.get("generator")
            if gen is not None and gen.device.type == "cpu":
                raise DeviceMixError(f"{func}: a CPU generator drives a random operation on {NAME} tensors")
        if name == "_to_copy" and guarded and target is not None and not _is_guard_device(target):
            kwargs.pop("device")
            return func(args[0].inner, *args[1:], **kwargs).to(target)
        wrap = bool(guarded) or _is_guard_device(target)
        if _is_guard_device(target):
            kwargs["device"] = torch.device("cpu")
        if name == "copy_" and isinstance(args[0], GuardTensor):
            args[0].inner.copy_(_unwrap(args[1]), *args[2:])
            return args[0]
        if name == "copy_":
            return func(args[0], _unwrap(args[1]), *args[2:], **kwargs)
        by_inner = {id(t.inner): t for t in guarded}
        out = func(*tree_map(_unwrap, args), **tree_map(_unwrap, kwargs))
        if not wrap:
            return out
        return tree_map(lambda o: _rewrap(o, by_inner), out)


def _rewrap(o, by_inner: dict):
    """An output that is an input's data (an in-place op) is that input; other tensors get wrapped."""
    if not isinstance(o, torch.Tensor):
        return o
    return by_inner[id(o)] if id(o) in by_inner else GuardTensor(o)


def _unwrap(x):
    return x.inner if isinstance(x, GuardTensor) else x


class _DataConstructors(TorchFunctionMode):
    """`torch.tensor(data, device=guard)` copies its data to the device below the dispatch modes:
    make it on the CPU, then move it, which the guard sees."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in (torch.tensor, torch.as_tensor) and _is_guard_device(kwargs.get("device")):
            device = kwargs.pop("device")
            return func(*args, **kwargs).to(device)
        return func(*args, **kwargs)


@contextlib.contextmanager
def on_guard_device():
    """The guard device exists and its rules hold inside the block."""
    guard_device()
    # `module.to(guard)` swaps each parameter's contents in place, as `.data = ` does on CUDA: tied
    # weights (SmolLM2's embedding and head) stay one parameter
    swap = torch.__future__.get_swap_module_params_on_conversion()
    torch.__future__.set_swap_module_params_on_conversion(True)
    try:
        with _DataConstructors(), DeviceGuard():
            yield
    finally:
        torch.__future__.set_swap_module_params_on_conversion(swap)
