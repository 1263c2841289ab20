"""Run by Python at start-up when bench/hf_standin is on PYTHONPATH (only for llama.cpp's converter): Debian's
torch (1.13) predates the float8 dtypes the converter names in its tables. The checkpoints converted here hold no
float8 tensors, so the names only need to exist; they alias uint8, which maps to the same numpy type there.
"""
try:
    import torch

    for _name in ("float8_e4m3fn", "float8_e5m2"):
        if not hasattr(torch, _name):
            setattr(torch, _name, torch.uint8)
except ImportError:
    pass
