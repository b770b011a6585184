"""Rebuild all-MiniLM-L6-v2's model.safetensors (fp32) from pack_minilm.py's file: python unpack_minilm.py PACKED OUT"""
import sys

from safetensors.torch import load_file, save_file

packed, state = load_file(sys.argv[1]), {}
for k, t in packed.items():
    if k.endswith(".q"):
        state[k[:-2]] = (t.float() * packed[k[:-2] + ".s"]).contiguous()
    elif not k.endswith(".s"):
        state[k] = t
save_file(state, sys.argv[2], metadata={"format": "pt"})
